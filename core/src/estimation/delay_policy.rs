//! Chooses the hedge delay: how long the primary may run before a hedge is sent.

use crate::estimation::estimator::{Estimates, QuantileEstimate};

/// How the hedge delay is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HedgeMode {
    /// Never hedge: the Worker is a pass-through.
    Off,
    /// Hedge after a fixed delay, whatever the latency distribution.
    Static {
        /// The fixed delay in milliseconds.
        delay_ms: f64,
    },
    /// Hedge at a measured latency quantile (the default).
    Adaptive,
    /// No hedging: the classic timeout and one retry. After `timeout_ms` the
    /// primary is aborted and the request retried once (at once if it fails
    /// fast). Kept to compare hedging against what most teams run.
    Retry {
        /// How long the primary may take before it is abandoned.
        timeout_ms: f64,
    },
}

/// Which hedging policy runs (`HEDGE_POLICY`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgePolicy {
    /// Primaries by latency, stall detection, fast failures retried on a
    /// peer past the failing origin's cut budget.
    TailAware,
    /// The previous policy: first-in-order primary, hedge at the quantile.
    FixedQuantile,
}

impl HedgePolicy {
    /// Its `HEDGE_POLICY` value.
    pub fn as_str(self) -> &'static str {
        match self {
            HedgePolicy::TailAware => "tail-aware",
            HedgePolicy::FixedQuantile => "fixed-quantile",
        }
    }

    /// Whether a fast failure is retried on a peer even when the failing
    /// origin's own 5xx-cut budget is spent (the retry takes load off it),
    /// and failure retries and stall hedges may borrow from the budget.
    pub fn hedges_urgently(self) -> bool {
        self == HedgePolicy::TailAware
    }
}

/// Settings for [`choose_delay`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayParams {
    /// The latency quantile to hedge at, in (0, 1); 0.95 by default.
    pub quantile: f64,
    /// Added to the quantile, in milliseconds.
    pub offset_ms: f64,
    /// Lower clamp on the adaptive delay.
    pub min_delay_ms: f64,
    /// Upper clamp on the adaptive delay.
    pub max_delay_ms: f64,
    /// Delay used while there are fewer than `min_data_points` samples.
    pub cold_delay_ms: f64,
    /// Samples needed before a measured quantile is trusted.
    pub min_data_points: u64,
    /// Local samples at which the local and PoP quantiles weigh the same
    /// (see [`blend`]).
    pub pop_blend_samples: u64,
}

/// Where a chosen delay came from; reported in `Server-Timing`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DelayBasis {
    /// The route's own latency quantile.
    Route,
    /// The origin-wide quantile (the route had too little data).
    Origin,
    /// Mostly the PoP-wide quantile: this isolate has little data of its own
    /// for the route (the PoP's weight is above one half).
    Pop,
    /// Mostly the route's own quantile, still blended with the PoP-wide one.
    Blend,
    /// Too little data anywhere: the configured cold-start delay.
    Cold,
    /// The configured static delay.
    Static,
    /// The retry timeout of `HEDGE_MODE=retry`.
    Retry,
    /// The delay with the best predicted tail within the budget
    /// (tail-aware policy, enough local data).
    Benefit,
    /// The hedge target's own delay by benefit: this primary has too few
    /// answers for one of its own and would otherwise wait longer than a
    /// request sent to the target first (tail-aware policy).
    Target,
}

impl DelayBasis {
    /// A short lowercase name for headers and logs.
    pub fn as_str(&self) -> &'static str {
        match self {
            DelayBasis::Route => "route",
            DelayBasis::Origin => "origin",
            DelayBasis::Pop => "pop",
            DelayBasis::Blend => "blend",
            DelayBasis::Cold => "cold",
            DelayBasis::Static => "static",
            DelayBasis::Retry => "retry",
            DelayBasis::Benefit => "benefit",
            DelayBasis::Target => "target",
        }
    }
}

/// A hedge delay and its basis.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelayChoice {
    /// Milliseconds to wait before hedging.
    pub delay_ms: f64,
    /// Where the number came from.
    pub basis: DelayBasis,
}

/// The hedge delay for a request, or `None` when hedging is off.
///
/// Adaptive: clamp(quantile + offset, min, max) of, in order: the route's
/// own estimate blended with the PoP's (when the PoP has `min_data_points`
/// samples), the route's own if it has `min_data_points` samples, the
/// origin's, else the cold delay.
pub fn choose_delay(
    mode: HedgeMode,
    params: &DelayParams,
    estimates: &Estimates,
) -> Option<DelayChoice> {
    match mode {
        HedgeMode::Off => None,
        HedgeMode::Static { delay_ms } => Some(DelayChoice {
            delay_ms,
            basis: DelayBasis::Static,
        }),
        HedgeMode::Retry { timeout_ms } => Some(DelayChoice {
            delay_ms: timeout_ms,
            basis: DelayBasis::Retry,
        }),
        HedgeMode::Adaptive => {
            let trusted = |basis, estimate: Option<QuantileEstimate>| {
                estimate
                    .filter(|e| e.samples >= params.min_data_points)
                    .map(|e| (basis, e.value_ms))
            };
            let pop = trusted(DelayBasis::Pop, estimates.pop).and_then(|_| {
                let (value, weight) =
                    blend(estimates.route, estimates.pop, params.pop_blend_samples)?;
                let basis = if weight >= 0.5 {
                    DelayBasis::Blend
                } else {
                    DelayBasis::Pop
                };
                Some((basis, value))
            });
            let choice = pop
                .or_else(|| trusted(DelayBasis::Route, estimates.route))
                .or_else(|| trusted(DelayBasis::Origin, estimates.origin))
                .map(|(basis, quantile)| DelayChoice {
                    delay_ms: (quantile + params.offset_ms)
                        .clamp(params.min_delay_ms, params.max_delay_ms),
                    basis,
                })
                .unwrap_or(DelayChoice {
                    delay_ms: params.cold_delay_ms,
                    basis: DelayBasis::Cold,
                });
            Some(choice)
        }
    }
}

/// Blends the isolate's own quantile with the PoP's: the local estimate gets
/// weight `n / (n + blend_samples)` for its `n` samples, so a cold isolate
/// uses the PoP's, and its own takes over as its data grows (equal weight at
/// `blend_samples` local samples, 90% at nine times that). `None` without a
/// PoP estimate.
pub fn blend(
    local: Option<QuantileEstimate>,
    pop: Option<QuantileEstimate>,
    blend_samples: u64,
) -> Option<(f64, f64)> {
    let pop = pop?;
    let (local_value, n) = local.map_or((0.0, 0), |l| (l.value_ms, l.samples));
    let weight = n as f64 / (n as f64 + blend_samples.max(1) as f64);
    Some((weight * local_value + (1.0 - weight) * pop.value_ms, weight))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: DelayParams = DelayParams {
        quantile: 0.95,
        offset_ms: 5.0,
        min_delay_ms: 10.0,
        max_delay_ms: 1_000.0,
        cold_delay_ms: 250.0,
        min_data_points: 20,
        pop_blend_samples: 200,
    };

    fn est(value_ms: f64, samples: u64) -> Option<QuantileEstimate> {
        Some(QuantileEstimate { value_ms, samples })
    }

    #[test]
    fn a_cold_isolate_uses_the_pop_quantile_and_blends_toward_its_own() {
        let pop_only = Estimates {
            route: None,
            origin: None,
            pop: est(95.0, 5_000),
        };
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &pop_only).expect("adaptive");
        assert_eq!((choice.basis, choice.delay_ms), (DelayBasis::Pop, 100.0));
        let half = Estimates {
            route: est(195.0, 200),
            origin: est(195.0, 200),
            pop: est(95.0, 5_000),
        };
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &half).expect("adaptive");
        assert_eq!((choice.basis, choice.delay_ms), (DelayBasis::Blend, 150.0));
        let few = Estimates {
            route: est(195.0, 2),
            ..half
        };
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &few).expect("adaptive");
        assert_eq!(choice.basis, DelayBasis::Pop);
        assert!(
            (choice.delay_ms - 101.0).abs() < 0.01,
            "{}",
            choice.delay_ms
        );
        // A PoP estimate on too few samples is not used.
        let thin_pop = Estimates {
            pop: est(95.0, 19),
            ..Estimates::default()
        };
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &thin_pop).expect("adaptive");
        assert_eq!(choice.basis, DelayBasis::Cold);
    }

    #[test]
    fn off_mode_never_hedges() {
        assert_eq!(
            choose_delay(HedgeMode::Off, &PARAMS, &Estimates::default()),
            None
        );
    }

    #[test]
    fn no_data_uses_the_cold_delay() {
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &Estimates::default());
        assert_eq!(
            choice,
            Some(DelayChoice {
                delay_ms: 250.0,
                basis: DelayBasis::Cold
            })
        );
    }

    #[test]
    fn thin_route_data_falls_back_to_the_origin() {
        let estimates = Estimates {
            route: est(80.0, 19),
            origin: est(60.0, 500),
            pop: None,
        };
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &estimates).expect("adaptive");
        assert_eq!(choice.basis, DelayBasis::Origin);
        assert_eq!(choice.delay_ms, 65.0);
    }

    #[test]
    fn enough_route_data_uses_quantile_plus_offset() {
        let estimates = Estimates {
            route: est(80.0, 20),
            origin: est(60.0, 500),
            pop: None,
        };
        let choice = choose_delay(HedgeMode::Adaptive, &PARAMS, &estimates).expect("adaptive");
        assert_eq!(choice.basis, DelayBasis::Route);
        assert_eq!(choice.delay_ms, 85.0);
    }

    #[test]
    fn adaptive_delay_is_clamped() {
        let fast = Estimates {
            route: est(1.0, 100),
            origin: None,
            pop: None,
        };
        let slow = Estimates {
            route: est(5_000.0, 100),
            origin: None,
            pop: None,
        };
        let d = |e| choose_delay(HedgeMode::Adaptive, &PARAMS, &e).map(|c| c.delay_ms);
        assert_eq!(d(fast), Some(10.0));
        assert_eq!(d(slow), Some(1_000.0));
    }

    #[test]
    fn static_mode_ignores_estimates() {
        let estimates = Estimates {
            route: est(80.0, 1_000),
            origin: None,
            pop: None,
        };
        let choice = choose_delay(HedgeMode::Static { delay_ms: 10.0 }, &PARAMS, &estimates);
        assert_eq!(
            choice,
            Some(DelayChoice {
                delay_ms: 10.0,
                basis: DelayBasis::Static
            })
        );
    }

    #[test]
    fn blend_moves_from_pop_to_local_as_local_data_grows() {
        let pop = Some(QuantileEstimate {
            value_ms: 100.0,
            samples: 10_000,
        });
        let local = |samples| {
            Some(QuantileEstimate {
                value_ms: 200.0,
                samples,
            })
        };
        assert_eq!(blend(None, pop, 200), Some((100.0, 0.0)));
        assert_eq!(blend(local(200), pop, 200), Some((150.0, 0.5)));
        let (value, weight) = blend(local(1_800), pop, 200).unwrap();
        assert!((weight - 0.9).abs() < 1e-12 && (value - 190.0).abs() < 1e-9);
        assert_eq!(blend(local(50), None, 200), None);
    }
}
