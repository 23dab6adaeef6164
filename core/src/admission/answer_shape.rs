//! How an origin's recent successful answers spread over time, for one
//! question: how likely is it that legs of these ages are all still
//! unanswered while the origin works as usual? The stall rule asks it
//! ([`super::origin_load`]): a silence an origin's own spread explains (a run
//! of cache misses on a two-mode origin) is not a stall; one it does not
//! explain (a stop-the-world pause) is.
//!
//! Not the estimator's sketch: that one is per route, windowed and read
//! through a Kaplan-Meier pass; this is per origin, follows the last few
//! hundred answers, and answers a survival share in one pass over 40
//! buckets on the request path.

/// Buckets per doubling of the latency (each about 19% wide).
const PER_DOUBLING: f64 = 4.0;
/// Buckets from 1 ms to about 1 s; the last is open.
const BUCKETS: usize = 40;
/// Every this many answers the counts halve, so the shape follows the last
/// few hundred.
const HALVING: u32 = 256;

/// Successful answers' latencies in log-spaced buckets.
#[derive(Debug, Clone, Default)]
pub struct AnswerShape {
    counts: Vec<f32>,
    total: f32,
    since_halving: u32,
}

impl AnswerShape {
    /// One more successful answer that took `latency_ms`.
    pub fn record(&mut self, latency_ms: f64) {
        if self.counts.is_empty() {
            self.counts = vec![0.0; BUCKETS];
        }
        self.counts[bucket(latency_ms)] += 1.0;
        self.total += 1.0;
        self.since_halving += 1;
        if self.since_halving >= HALVING {
            self.since_halving = 0;
            self.counts.iter_mut().for_each(|c| *c *= 0.5);
            self.total *= 0.5;
        }
    }

    /// Answers it holds (halvings count: a weight, not a tally).
    pub fn weight(&self) -> f64 {
        f64::from(self.total)
    }

    /// The share of answers slower than `age_ms`, never below half an
    /// answer's worth (an age past all seen is rare, not impossible); 1
    /// with nothing recorded.
    pub fn survival(&self, age_ms: f64) -> f64 {
        let total = f64::from(self.total);
        if total <= 0.0 {
            return 1.0;
        }
        let b = bucket(age_ms);
        let above: f32 = self.counts[b + 1..].iter().sum();
        // Within the bucket, linear in the log of the latency; half of the
        // open last bucket.
        let within = if b == BUCKETS - 1 {
            0.5
        } else {
            let lower = b as f64 / PER_DOUBLING;
            let upper = (b + 1) as f64 / PER_DOUBLING;
            ((upper - doublings(age_ms)) / (upper - lower)).clamp(0.0, 1.0)
        };
        let slower = f64::from(above) + within * f64::from(self.counts[b]);
        slower.max(0.5) / total
    }
}

fn bucket(latency_ms: f64) -> usize {
    // Negative and NaN latencies land in the first bucket (`as` saturates).
    ((doublings(latency_ms) * PER_DOUBLING) as usize).min(BUCKETS - 1)
}

/// log2 of the latency from 1 ms, through `ln` (the sketch's, so the wasm
/// carries one logarithm).
fn doublings(latency_ms: f64) -> f64 {
    latency_ms.max(1.0).ln() / std::f64::consts::LN_2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survival_reads_the_share_slower_than_an_age() {
        let mut shape = AnswerShape::default();
        assert_eq!(shape.survival(10.0), 1.0, "nothing recorded");
        for _ in 0..90 {
            shape.record(30.0);
        }
        for _ in 0..10 {
            shape.record(250.0);
        }
        assert!((shape.survival(5.0) - 1.0).abs() < 1e-9);
        assert!((shape.survival(100.0) - 0.1).abs() < 1e-9, "the slow tenth");
        assert!(
            shape.survival(500.0) <= 0.005 + 1e-9,
            "past all seen: half an answer"
        );
        assert!(shape.survival(500.0) > 0.0);
        // Within a bucket it falls with the age.
        assert!(shape.survival(29.0) > shape.survival(31.0));
    }

    #[test]
    fn the_shape_follows_recent_answers() {
        let mut shape = AnswerShape::default();
        for _ in 0..1_000 {
            shape.record(200.0);
        }
        for _ in 0..1_000 {
            shape.record(20.0);
        }
        // A thousand answers later the old mode weighs about a sixteenth.
        assert!(shape.survival(100.0) < 0.1, "{}", shape.survival(100.0));
        assert!(shape.weight() < 600.0);
    }
}
