//! The hedge delay for one primary and route: by predicted benefit (the
//! tail-aware policy, once the route or its origin has the data), else the
//! quantile rule of [`choose_delay`].
//!
//! One function, [`DelayPlanner::route_delay`], serves both the race's plan
//! and the stats page, so what the stats show is what a request gets.

use crate::capped_map::CappedMap;
use crate::estimation::delay_policy::{
    choose_delay, DelayBasis, DelayChoice, DelayParams, HedgeMode, HedgePolicy,
};
use crate::estimation::estimator::{Estimates, LatencyEstimator, QuantileEstimate};
use crate::estimation::hedge_benefit::{best_delay, share_slower, shifted, BenefitChoice};

/// How often a route's delay by predicted benefit is recomputed, ms.
const BENEFIT_REFRESH_MS: f64 = 1_000.0;
/// Samples a route needs before its 1% tail is trusted.
const BENEFIT_MIN_SAMPLES: u64 = 500;
/// Samples a route needs before the delay is chosen on its own rather than
/// on its origin's over all routes: the objective reads the slowest 1%, and
/// on 500 samples that is 5 of them, so a busy route's delay wandered from
/// one second to the next. Measured in the simulator (issue 40, heavy-tail,
/// 60 s, the lab's four routes): on 500 own samples the default spent 5.0%
/// for p99 129.2 ms, 1.06 of the hindsight bound (workerd: 138.6, 1.10);
/// pooled until 5,000 it matches one route, 1.01.
const ROUTE_OWN_SAMPLES: u64 = 5_000;
/// Share of the budget that delay hedges may plan on; the rest is for
/// failure retries and stall hedges.
const BENEFIT_BUDGET_SHARE: f64 = 0.9;
/// Urgent hedges' recent share is reserved this many times over.
const URGENT_RESERVE: f64 = 1.5;
/// Weight of one request in the urgent share.
const URGENT_WEIGHT: f64 = 0.001;

/// What the delay choice reads of the configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanParams {
    /// How the delay is chosen at all.
    pub mode: HedgeMode,
    /// Which policy runs.
    pub policy: HedgePolicy,
    /// The quantile rule's settings.
    pub delay: DelayParams,
    /// The hedge budget as a share of requests, in [0, 1].
    pub budget_share: f64,
}

/// The chosen delay for a primary and route, and what the benefit rule
/// predicted (when it decided).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RouteDelay {
    /// The delay, or `None` when hedging is off.
    pub choice: Option<DelayChoice>,
    /// The delay by predicted benefit and its prediction, when it had the data.
    pub benefit: Option<BenefitChoice>,
}

/// Where a hedge of this primary would likely go, and the share of requests
/// that target may take (less when its 5xx rate cut its budget).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LikelyTarget {
    /// The origin.
    pub origin: usize,
    /// Its share of requests, in [0, 1].
    pub share: f64,
}

/// A delay by predicted benefit and when it was computed.
#[derive(Debug, Clone, Copy)]
struct BenefitCache {
    at_ms: f64,
    choice: Option<BenefitChoice>,
}

/// Chooses hedge delays; remembers the benefit rule's recent answers and
/// the recent share of urgent hedges, which delay hedges leave room for.
#[derive(Debug)]
pub struct DelayPlanner {
    params: PlanParams,
    /// The delay by predicted benefit per (primary, route), recently computed.
    benefit: CappedMap<(usize, String), BenefitCache>,
    /// Recent share of hedgeable requests that needed an urgent hedge
    /// (stall, fast failure), averaged over about the last 1,000.
    urgent_share: f64,
}

// === impl DelayPlanner ===

/// What a route policy changes in the delay choice.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RouteRules {
    /// Its delay rule (`None`: the global policy's).
    pub policy: Option<HedgePolicy>,
    /// Its own budget share (`None`: the global one).
    pub budget_share: Option<f64>,
}

impl DelayPlanner {
    /// A planner remembering at most `max_keys` routes for `window_ms` each.
    pub fn new(params: PlanParams, max_keys: usize, window_ms: f64) -> Self {
        Self {
            params,
            benefit: CappedMap::new(max_keys, window_ms),
            urgent_share: 0.0,
        }
    }

    /// The delay for `primary`'s requests on `route` at `now_ms`.
    /// `pop_estimate` gives the PoP's quantile for them and `target` where a
    /// hedge would go; each is asked only when the rule needs it.
    /// `rules` is the route policy's own delay rule and budget share, if it
    /// sets them.
    #[allow(clippy::too_many_arguments)]
    pub fn route_delay(
        &mut self,
        estimator: &mut LatencyEstimator,
        primary: usize,
        route: &str,
        now_ms: f64,
        rules: RouteRules,
        pop_estimate: impl FnOnce() -> Option<QuantileEstimate>,
        target: impl FnOnce() -> LikelyTarget,
    ) -> RouteDelay {
        let mut p = self.params;
        p.policy = rules.policy.unwrap_or(p.policy);
        p.budget_share = rules.budget_share.unwrap_or(p.budget_share);
        // Only the adaptive mode reads the estimates.
        let estimates = match p.mode {
            HedgeMode::Adaptive => Estimates {
                pop: pop_estimate(),
                ..estimator.estimates(primary, route, p.delay.quantile, now_ms)
            },
            _ => Estimates::default(),
        };
        let benefit = match (p.mode, p.policy) {
            (HedgeMode::Adaptive, HedgePolicy::TailAware) => {
                self.benefit(estimator, primary, route, now_ms, p.budget_share, target)
            }
            _ => None,
        };
        let by_benefit = benefit.map(|b| DelayChoice {
            delay_ms: b.delay_ms.clamp(p.delay.min_delay_ms, p.delay.max_delay_ms),
            basis: DelayBasis::Benefit,
        });
        RouteDelay {
            choice: by_benefit.or_else(|| choose_delay(p.mode, &p.delay, &estimates)),
            benefit,
        }
    }

    /// A hedgeable request's race ended; `urgent` when it needed a stall or
    /// failure hedge.
    pub fn note_race_end(&mut self, urgent: bool) {
        self.urgent_share += URGENT_WEIGHT * (f64::from(u8::from(urgent)) - self.urgent_share);
    }

    /// The delay by predicted benefit for `primary`'s requests on `route`
    /// (recomputed at most once a second per key). `None` until the route,
    /// or its origin over all routes, has the data.
    fn benefit(
        &mut self,
        estimator: &mut LatencyEstimator,
        primary: usize,
        route: &str,
        now_ms: f64,
        budget_share: f64,
        target: impl FnOnce() -> LikelyTarget,
    ) -> Option<BenefitChoice> {
        let key = (primary, route.to_string());
        if let Some(cached) = self.benefit.get_mut(&key, now_ms) {
            if now_ms - cached.at_ms < BENEFIT_REFRESH_MS {
                return cached.choice;
            }
        }
        let p = &self.params;
        // Delay hedges plan on what urgent ones (stalls, failures) leave.
        let max_share =
            (budget_share * BENEFIT_BUDGET_SHARE - URGENT_RESERVE * self.urgent_share).max(0.0);
        let min_samples = p.delay.min_data_points.max(BENEFIT_MIN_SAMPLES);
        let target = target();
        // A target whose 5xx rate cut its share takes no more than that.
        let max_share = max_share.min(target.share * BENEFIT_BUDGET_SHARE);
        // The route's own samples, else the origin's over all its routes
        // (as the quantile falls back), so a route with little traffic of
        // its own is not left on the quantile.
        let x = estimator.samples(primary, route, ROUTE_OWN_SAMPLES, min_samples, now_ms)?;
        let y = estimator.samples(target.origin, route, ROUTE_OWN_SAMPLES, min_samples, now_ms);
        // No data on the target yet: assume it behaves like the primary.
        let whole_y = y.as_ref().map_or(&x.whole, |y| &y.whole);
        let mut choice = best_delay(&x.whole, whole_y, max_share);
        // A window remembers a spell (an overload, a sick origin) for its
        // whole length: when the newest samples put a different share of
        // requests past the chosen delay, plan on them instead.
        if let (Some(c), Some(recent_x)) = (choice, &x.recent) {
            let recent_share = share_slower(recent_x, c.delay_ms).unwrap_or(c.hedge_share);
            if shifted(c.hedge_share, recent_share) {
                let recent_y = match &y {
                    Some(y) => y.recent.as_ref().unwrap_or(&y.whole),
                    None => recent_x,
                };
                choice = best_delay(recent_x, recent_y, max_share).or(choice);
            }
        }
        let fresh = BenefitCache {
            at_ms: now_ms,
            choice,
        };
        if let Some(cached) = self.benefit.get_or_insert_with(key, now_ms, || fresh) {
            *cached = fresh;
        }
        choice
    }
}
