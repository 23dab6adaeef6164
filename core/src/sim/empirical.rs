//! An origin's latency as measured: the distribution a sketch of its legs
//! holds, for replaying a PoP's own traffic (the advisor).
//!
//! The sketch counts legs cut short (losers) as censored: they would have
//! taken longer than their time. The distribution is the Kaplan-Meier
//! estimate, which keeps such a leg at risk until its time and hands its
//! share to the slower answers. Censored legs beyond the slowest answer
//! leave a share with no answer to hand it to (the *unresolved tail*): it
//! is put at the slowest time seen, a lower bound, and reported, so a reader
//! knows how much of the tail is a guess.

use crate::estimation::sketch::{bucket_value, LatencySketch, RELATIVE_ERROR};

/// A distribution given by points of its CDF: (share at or below, ms), both
/// rising. A draw interpolates between two points on a log scale.
#[derive(Debug, Clone, PartialEq)]
pub struct Empirical {
    points: Vec<(f64, f64)>,
    /// The share past the slowest answer that censored legs left unresolved.
    pub unresolved_tail: f64,
    /// Legs it rests on (completed and censored).
    pub legs: u64,
}

impl Empirical {
    /// The Kaplan-Meier distribution of `sketch`'s legs; `None` without a
    /// completed one.
    pub fn from_sketch(sketch: &LatencySketch) -> Option<Self> {
        let km = sketch.kaplan_meier()?;
        // The lower edge of the first bucket: the CDF starts at 0 there.
        let first = sketch.buckets().next()?.0;
        let gamma = (1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR);
        let mut points = vec![(0.0, bucket_value(first) / gamma)];
        points.extend(
            km.steps
                .iter()
                .map(|&(value, slower)| (1.0 - slower, value)),
        );
        let unresolved_tail = km.unresolved();
        if unresolved_tail > 0.0 {
            // A point mass at the slowest time seen: a step, not a slope.
            points.push((1.0 - unresolved_tail, km.slowest_ms));
            points.push((1.0, km.slowest_ms));
        }
        Some(Self {
            points,
            unresolved_tail,
            legs: sketch.count(),
        })
    }

    /// Where the unresolved tail was put (the slowest time seen), if any.
    pub fn guessed_at_ms(&self) -> Option<f64> {
        (self.unresolved_tail > 0.0).then(|| self.points.last().map_or(0.0, |p| p.1))
    }

    /// The latency at cumulative share `u` in [0, 1).
    pub fn at(&self, u: f64) -> f64 {
        let i = self.points.partition_point(|&(p, _)| p <= u);
        match (
            i.checked_sub(1).and_then(|k| self.points.get(k)),
            self.points.get(i),
        ) {
            (Some(&(p0, v0)), Some(&(p1, v1))) if p1 > p0 && v0 > 0.0 && v1 > 0.0 => {
                let t = (u - p0) / (p1 - p0);
                (v0.ln() + t * (v1.ln() - v0.ln())).exp()
            }
            (Some(&(_, v)), _) | (None, Some(&(_, v))) => v,
            (None, None) => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimation::sketch::Sample;
    use crate::sim::Rng;

    fn percentile(sorted: &[f64], q: f64) -> f64 {
        sorted[((q * sorted.len() as f64) as usize).min(sorted.len() - 1)]
    }

    #[test]
    fn draws_follow_the_measured_distribution() {
        let mut rng = Rng::new(7, 0);
        let mut sketch = LatencySketch::new();
        let mut truth: Vec<f64> = (0..20_000).map(|_| rng.lognormal(40.0, 0.35)).collect();
        for &v in &truth {
            sketch.record(Sample::Completed(v));
        }
        let model = Empirical::from_sketch(&sketch).expect("answers");
        assert_eq!(model.unresolved_tail, 0.0);
        let mut draws: Vec<f64> = (0..20_000).map(|_| model.at(rng.uniform())).collect();
        truth.sort_by(f64::total_cmp);
        draws.sort_by(f64::total_cmp);
        for q in [0.5, 0.9, 0.99] {
            let (t, d) = (percentile(&truth, q), percentile(&draws, q));
            assert!((d / t - 1.0).abs() < 0.04, "q {q}: {d} against {t}");
        }
    }

    #[test]
    fn losers_cut_short_keep_their_share_of_the_tail() {
        // 90% answer at 30 ms; 10% would take 300 ms, but half of those
        // were cut at 100 ms by a winning hedge.
        let mut sketch = LatencySketch::new();
        for i in 0..10_000 {
            let sample = match i % 20 {
                0 => Sample::Completed(300.0),
                1 => Sample::Censored(100.0),
                _ => Sample::Completed(30.0),
            };
            sketch.record(sample);
        }
        let model = Empirical::from_sketch(&sketch).expect("answers");
        // Dropping the censored legs would put 300 ms at 5.3%; the cut
        // legs hand their share on: 10% again.
        let slow_share = 1.0
            - model.points.iter().find(|p| p.1 > 200.0).map_or(1.0, |p| {
                model.points[model.points.iter().position(|q| q == p).unwrap() - 1].0
            });
        assert!((slow_share - 0.10).abs() < 0.002, "{slow_share}");
        assert_eq!(model.unresolved_tail, 0.0);
    }

    #[test]
    fn censored_legs_past_the_slowest_answer_are_a_reported_guess() {
        let mut sketch = LatencySketch::new();
        for i in 0..1_000 {
            sketch.record(if i % 50 == 0 {
                Sample::Censored(500.0)
            } else {
                Sample::Completed(20.0)
            });
        }
        let model = Empirical::from_sketch(&sketch).expect("answers");
        assert!((model.unresolved_tail - 0.02).abs() < 1e-9);
        assert!((model.at(0.999) / 500.0 - 1.0).abs() < 0.02);
        assert!(Empirical::from_sketch(&LatencySketch::new()).is_none());
    }
}
