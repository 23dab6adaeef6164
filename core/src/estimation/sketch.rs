//! A log-bucketed latency histogram that also counts censored samples.
//!
//! Values are milliseconds. Each bucket covers `(gamma^(i-1), gamma^i]` with
//! `gamma = (1 + a) / (1 - a)`, and a quantile is reported as the bucket's
//! midpoint `2 gamma^i / (gamma + 1)`, so every reported value is within a
//! relative error `a` of a value in its bucket ([`RELATIVE_ERROR`]: 1%). Buckets
//! are stored sparsely, so memory follows the spread of latencies, not their
//! range.
//!
//! A *censored* sample is a lower bound: a leg aborted after `t` ms would have
//! taken at least `t`. Quantiles use the Kaplan-Meier product-limit estimator,
//! which keeps censored legs "at risk" until their time and then hands their
//! probability mass to slower completions. Dropping them instead would bias
//! the estimate low, because the legs a hedge beats are exactly the slow ones.

use crate::vec_map::VecMap;

/// The relative error of every quantile this sketch reports.
pub const RELATIVE_ERROR: f64 = 0.01;

/// Smallest distinguishable latency; anything faster lands in one bucket.
const MIN_VALUE_MS: f64 = 0.01;

/// Counts in one bucket.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BucketCounts {
    /// Completions observed in this bucket.
    pub completed: u64,
    /// Censored samples (lower bounds) in this bucket.
    pub censored: u64,
}

/// A sketch's Kaplan-Meier estimate ([`LatencySketch::kaplan_meier`]).
#[derive(Debug, Clone, PartialEq)]
pub struct KaplanMeier {
    /// Each completion bucket's value, rising, with `P(V > value)`.
    pub steps: Vec<(f64, f64)>,
    /// The slowest time known: the last completion, or a later cut. The
    /// share that outlives the last completion (the last step's) is known
    /// only to take at least this long.
    pub slowest_ms: f64,
}

impl KaplanMeier {
    /// The share past the last completion: cut short, never answered.
    pub fn unresolved(&self) -> f64 {
        self.steps.last().map_or(0.0, |s| s.1)
    }
}

impl BucketCounts {
    fn total(&self) -> u64 {
        self.completed + self.censored
    }
}

/// One latency observation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sample {
    /// The call completed after this many milliseconds.
    Completed(f64),
    /// The call was abandoned after this many milliseconds; it would have taken longer.
    Censored(f64),
}

/// A mergeable, log-bucketed latency histogram with censored counts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencySketch {
    buckets: VecMap<i32, BucketCounts>,
    count: u64,
}

// === impl LatencySketch ===

impl LatencySketch {
    /// An empty sketch.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one sample. Non-finite or negative values are ignored: they come
    /// from a broken clock, not from the origin.
    pub fn record(&mut self, sample: Sample) {
        let (value, censored) = match sample {
            Sample::Completed(v) => (v, false),
            Sample::Censored(v) => (v, true),
        };
        if !value.is_finite() || value < 0.0 {
            return;
        }
        let entry = self.buckets.entry(bucket_index(value)).or_default();
        if censored {
            entry.censored += 1;
        } else {
            entry.completed += 1;
        }
        self.count += 1;
    }

    /// Number of samples, completed and censored.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The non-empty buckets as (index, counts), in index order.
    pub fn buckets(&self) -> impl Iterator<Item = (i32, BucketCounts)> + '_ {
        self.buckets.iter().map(|(&index, &counts)| (index, counts))
    }

    /// The Kaplan-Meier estimate of the samples: a sample cut short at `c`
    /// is known only to be slower than `c`, so it stays at risk up to `c`
    /// and then drops out, instead of counting as a completion (which would
    /// make a hedged tail look short). `None` without a completion. The
    /// hedge delay's objective and the advisor's replay both read it.
    pub fn kaplan_meier(&self) -> Option<KaplanMeier> {
        let mut at_risk = self.count as f64;
        let mut survival = 1.0;
        let mut steps = Vec::new();
        for (&index, counts) in &self.buckets {
            if at_risk <= 0.0 {
                break;
            }
            if counts.completed > 0 {
                survival *= 1.0 - counts.completed as f64 / at_risk;
                steps.push((bucket_value(index), survival.max(0.0)));
            }
            at_risk -= counts.total() as f64;
        }
        steps.last()?;
        // Buckets are never empty: the last one holds the slowest sample.
        let slowest_ms = bucket_value(*self.buckets.keys().next_back()?);
        Some(KaplanMeier { steps, slowest_ms })
    }

    /// Adds `counts` to bucket `index` (rebuilding a sketch from its buckets).
    pub fn add_counts(&mut self, index: i32, counts: BucketCounts) {
        if counts.total() == 0 {
            return;
        }
        let entry = self.buckets.entry(index).or_default();
        entry.completed += counts.completed;
        entry.censored += counts.censored;
        self.count += counts.total();
    }

    /// Adds every count of `other` into `self`.
    pub fn merge(&mut self, other: &LatencySketch) {
        for (&index, counts) in &other.buckets {
            let entry = self.buckets.entry(index).or_default();
            entry.completed += counts.completed;
            entry.censored += counts.censored;
        }
        self.count += other.count;
    }

    /// Removes the counts of `other`, which must have been merged in before
    /// (a sliding window subtracts the sub-window that expires).
    pub fn subtract(&mut self, other: &LatencySketch) {
        for (&index, counts) in &other.buckets {
            if let Some(entry) = self.buckets.get_mut(&index) {
                entry.completed = entry.completed.saturating_sub(counts.completed);
                entry.censored = entry.censored.saturating_sub(counts.censored);
                if entry.total() == 0 {
                    self.buckets.remove(&index);
                }
            }
        }
        self.count = self.count.saturating_sub(other.count);
    }

    /// The `q`-quantile (0 < q < 1) of the latency distribution, by the
    /// Kaplan-Meier estimator; `None` when the sketch is empty.
    ///
    /// Without censored samples this is the nearest-rank quantile (the
    /// smallest value `x` with at least `q * n` samples `<= x`), to within
    /// [`RELATIVE_ERROR`]. When censoring hides the quantile (too many legs
    /// were abandoned before completing), the largest censored value is
    /// returned: the best lower bound the data supports.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        // Guards float error in the running product: 95 of 100 must reach 0.95.
        const EPSILON: f64 = 1e-9;
        let mut at_risk = self.count as f64;
        let mut survival = 1.0_f64;
        let mut last_censored = None;
        for (&index, counts) in &self.buckets {
            if counts.completed > 0 && at_risk > 0.0 {
                survival *= 1.0 - counts.completed as f64 / at_risk;
                if 1.0 - survival + EPSILON >= q {
                    return Some(bucket_value(index));
                }
            }
            if counts.censored > 0 {
                last_censored = Some(index);
            }
            at_risk -= counts.total() as f64;
        }
        let fallback = last_censored.or_else(|| self.buckets.keys().next_back().copied());
        fallback.map(bucket_value)
    }
}

fn gamma() -> f64 {
    (1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR)
}

/// The bucket that holds `value` ms: the smallest `i` with `value <= gamma^i`.
pub fn bucket_index(value: f64) -> i32 {
    let v = value.max(MIN_VALUE_MS);
    (v.ln() / gamma().ln()).ceil() as i32
}

/// The value reported for bucket `index`: within the relative error of every
/// value in the bucket.
pub fn bucket_value(index: i32) -> f64 {
    let g = gamma();
    2.0 * g.powi(index) / (g + 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The simulator's seeded generator (native only, as are the tests).
    use crate::sim::Rng;

    fn exact_quantile(sorted: &[f64], q: f64) -> f64 {
        let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
        sorted[rank - 1]
    }

    fn relative_error(estimate: f64, exact: f64) -> f64 {
        (estimate - exact).abs() / exact
    }

    #[test]
    fn quantiles_within_two_percent_on_seeded_heavy_tail() {
        let mut rng = Rng::from_state(42);
        let mut values = Vec::new();
        let mut sketch = LatencySketch::new();
        for _ in 0..20_000 {
            let mut v = rng.lognormal(40.0, 0.35);
            if rng.uniform() < 0.02 {
                v += 800.0;
            }
            values.push(v);
            sketch.record(Sample::Completed(v));
        }
        values.sort_by(f64::total_cmp);
        for q in [0.5, 0.9, 0.95, 0.99, 0.999] {
            let exact = exact_quantile(&values, q);
            let estimate = sketch.quantile(q).expect("non-empty");
            assert!(
                relative_error(estimate, exact) <= 0.02,
                "q={q}: estimate {estimate} vs exact {exact}"
            );
        }
    }

    #[test]
    fn quantiles_within_two_percent_on_seeded_uniform_small_sample() {
        let mut rng = Rng::from_state(7);
        let mut values: Vec<f64> = (0..101).map(|_| 1.0 + rng.uniform() * 500.0).collect();
        let mut sketch = LatencySketch::new();
        for &v in &values {
            sketch.record(Sample::Completed(v));
        }
        values.sort_by(f64::total_cmp);
        for q in [0.1, 0.5, 0.95] {
            let exact = exact_quantile(&values, q);
            let estimate = sketch.quantile(q).expect("non-empty");
            assert!(relative_error(estimate, exact) <= 0.02, "q={q}");
        }
    }

    #[test]
    fn empty_sketch_has_no_quantile() {
        assert_eq!(LatencySketch::new().quantile(0.95), None);
    }

    #[test]
    fn invalid_values_are_ignored() {
        let mut sketch = LatencySketch::new();
        sketch.record(Sample::Completed(f64::NAN));
        sketch.record(Sample::Completed(-1.0));
        sketch.record(Sample::Censored(f64::INFINITY));
        assert_eq!(sketch.count(), 0);
    }

    #[test]
    fn censored_slow_legs_raise_the_tail_estimate() {
        // 90 fast completions at 10 ms and 10 legs abandoned at 50 ms.
        let mut with_censored = LatencySketch::new();
        let mut survivors_only = LatencySketch::new();
        for _ in 0..90 {
            with_censored.record(Sample::Completed(10.0));
            survivors_only.record(Sample::Completed(10.0));
        }
        for _ in 0..10 {
            with_censored.record(Sample::Censored(50.0));
        }
        let biased = survivors_only.quantile(0.95).expect("non-empty");
        let corrected = with_censored.quantile(0.95).expect("non-empty");
        assert!(relative_error(biased, 10.0) <= 0.01);
        // The true p95 is at least 50 ms: the censored legs say so.
        assert!(corrected >= 50.0 * (1.0 - RELATIVE_ERROR), "{corrected}");
    }

    #[test]
    fn censored_mass_moves_to_later_completions() {
        // 80 completions at 10 ms, 10 legs abandoned at 20 ms, 10 completions
        // at 100 ms. The abandoned legs would have finished after 20 ms, so the
        // only later completions (100 ms) inherit their mass and p85 is 100 ms.
        let record = |sketch: &mut LatencySketch, n: usize, sample: Sample| {
            for _ in 0..n {
                sketch.record(sample);
            }
        };
        let mut sketch = LatencySketch::new();
        record(&mut sketch, 80, Sample::Completed(10.0));
        record(&mut sketch, 10, Sample::Censored(20.0));
        record(&mut sketch, 10, Sample::Completed(100.0));
        let p80 = sketch.quantile(0.80).expect("non-empty");
        let p85 = sketch.quantile(0.85).expect("non-empty");
        assert!(relative_error(p80, 10.0) <= 0.01, "{p80}");
        assert!(relative_error(p85, 100.0) <= 0.01, "{p85}");

        // Dropping the abandoned legs (survivors only) puts p85 at 10 ms.
        let mut survivors = LatencySketch::new();
        record(&mut survivors, 80, Sample::Completed(10.0));
        record(&mut survivors, 10, Sample::Completed(100.0));
        let dropped_p85 = survivors.quantile(0.85).expect("non-empty");
        assert!(relative_error(dropped_p85, 10.0) <= 0.01, "{dropped_p85}");
    }

    #[test]
    fn censored_samples_below_the_quantile_do_not_lower_it() {
        // A hedge aborted after 2 ms says only "more than 2 ms": it must not
        // pull the p50 of 40 ms completions down.
        let mut sketch = LatencySketch::new();
        for _ in 0..50 {
            sketch.record(Sample::Completed(40.0));
        }
        for _ in 0..50 {
            sketch.record(Sample::Censored(2.0));
        }
        let p50 = sketch.quantile(0.5).expect("non-empty");
        assert!(relative_error(p50, 40.0) <= 0.01, "{p50}");
    }

    #[test]
    fn merge_then_subtract_restores_the_original() {
        let mut a = LatencySketch::new();
        let mut b = LatencySketch::new();
        for i in 1..100 {
            a.record(Sample::Completed(i as f64));
            b.record(Sample::Censored(i as f64 * 3.0));
        }
        let original = a.clone();
        a.merge(&b);
        assert_eq!(a.count(), 198);
        a.subtract(&b);
        assert_eq!(a, original);
    }

    #[test]
    fn merged_halves_match_the_whole() {
        let mut rng = Rng::from_state(3);
        let mut whole = LatencySketch::new();
        let mut left = LatencySketch::new();
        let mut right = LatencySketch::new();
        for i in 0..10_000 {
            let v = rng.lognormal(40.0, 0.35);
            whole.record(Sample::Completed(v));
            if i % 2 == 0 {
                left.record(Sample::Completed(v));
            } else {
                right.record(Sample::Completed(v));
            }
        }
        left.merge(&right);
        assert_eq!(left, whole);
    }

    #[test]
    fn every_bucket_value_is_within_the_relative_error_of_its_members() {
        for v in [0.5, 1.0, 7.3, 40.0, 99.9, 1234.5, 60_000.0] {
            let reported = bucket_value(bucket_index(v));
            assert!(relative_error(reported, v) <= RELATIVE_ERROR + 1e-12, "{v}");
        }
    }
}
