//! The one percentile rule of the simulator's figures (its report, its
//! timelines and the engine's own checks), apart from all three so none of
//! them depends on another for it.

/// The `q`-quantile of `samples` (nearest rank); sorts them in place.
pub fn percentile(samples: &mut [f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples.sort_unstable_by(f64::total_cmp);
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}
