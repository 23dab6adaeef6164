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
use crate::estimation::sketch::{LatencySketch, Sample};
use crate::estimation::window::{WindowParams, WindowedSketch};

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
/// How recent a hedge target's own delay must be for a primary without
/// one to wait no longer than it (a few of its refreshes).
const TARGET_DELAY_FRESH_MS: f64 = 5.0 * BENEFIT_REFRESH_MS;
/// Share of the budget that delay hedges may plan on; the rest is for
/// failure retries and stall hedges.
const BENEFIT_BUDGET_SHARE: f64 = 0.9;
/// Urgent hedges' recent share is reserved this many times over.
const URGENT_RESERVE: f64 = 1.5;
/// Weight of one race in the recent shares (urgent hedges, primaries):
/// about the last 1,000 races.
const RECENT_WEIGHT: f64 = 0.001;
/// Weight of one race in its primary's own recent shares: about its last 100.
const OWN_RECENT_WEIGHT: f64 = 0.01;
/// The isolate's tail whose makers a primary's tail weight measures.
const ISOLATE_TAIL: f64 = 0.01;
/// A primary's tail weight is kept within these: a few samples past the
/// isolate's p99 must not make an origin's every request look like tail
/// (or none of them).
const TAIL_WEIGHT_RANGE: (f64, f64) = (0.25, 10.0);
/// Standard deviations of counting noise a tail weight ignores.
const NOISE_SDS: f64 = 3.0;
/// How far apart (as a ratio) an origin's median must be from the other
/// primaries' for its tail weight to be other than 1.
const MEDIANS_APART: f64 = 1.25;

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
    /// Whether the primary is the slow one of the two: its fast answers
    /// take more than twice the target's.
    pub slower_primary: bool,
}

/// The hedge a race sent, for the recent shares the budget plans on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceHedge {
    /// None.
    None,
    /// A straggler's hedge, after a delay the benefit rule chose.
    Planned,
    /// A straggler's hedge, after a delay chosen otherwise (too few samples
    /// for the benefit rule): outside the benefit rule's plans, so what
    /// these spend is taken off the budget they plan on.
    Unplanned,
    /// A stall's or a fast failure's.
    Urgent,
}

/// The hedge target, asked of the gate at most once per delay choice.
#[derive(Debug)]
struct AskedOnce<F> {
    ask: Option<F>,
    answer: Option<LikelyTarget>,
}

impl<F: FnOnce() -> LikelyTarget> AskedOnce<F> {
    fn new(ask: F) -> Self {
        Self {
            ask: Some(ask),
            answer: None,
        }
    }

    /// The answer, asking first if not yet asked (always `Some`).
    fn get(&mut self) -> Option<LikelyTarget> {
        if self.answer.is_none() {
            self.answer = self.ask.take().map(|ask| ask());
        }
        self.answer
    }
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
    /// Each origin's recent share of hedgeable requests as their primary,
    /// over about the last 1,000.
    primary_shares: Vec<f64>,
    /// Each origin's recent share of its own races (as primary) that sent
    /// an unplanned hedge, over about its last 100.
    unplanned_shares: Vec<f64>,
    /// How long hedgeable requests' races took, over the estimator's
    /// window: where the isolate's tail begins.
    race_times: WindowedSketch,
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
    /// A planner remembering at most `max_keys` routes for a `window` each.
    pub fn new(params: PlanParams, max_keys: usize, window: WindowParams, now_ms: f64) -> Self {
        Self {
            params,
            benefit: CappedMap::new(max_keys, window.window_ms),
            urgent_share: 0.0,
            primary_shares: Vec::new(),
            unplanned_shares: Vec::new(),
            race_times: WindowedSketch::new(window, now_ms),
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
        let tail_aware = matches!(
            (p.mode, p.policy),
            (HedgeMode::Adaptive, HedgePolicy::TailAware)
        );
        // Asked at most once, and only when a rule below reads it.
        let mut target = AskedOnce::new(target);
        let benefit = match tail_aware {
            true => self.benefit(
                estimator,
                primary,
                route,
                now_ms,
                p.budget_share,
                &mut target,
            ),
            false => None,
        };
        let clamp = |delay_ms: f64| delay_ms.clamp(p.delay.min_delay_ms, p.delay.max_delay_ms);
        let by_benefit = benefit.map(|b| DelayChoice {
            delay_ms: clamp(b.delay_ms),
            basis: DelayBasis::Benefit,
        });
        let mut choice = by_benefit.or_else(|| choose_delay(p.mode, &p.delay, &estimates));
        // A slow primary with too few answers for a delay of its own (an
        // origin kept at little more than its probe share of primaries)
        // waits no longer than a request sent to its hedge target first:
        // its own quantile (~270 ms on slow-origin) held 2-3% of the
        // isolate's requests past the isolate's p99: p99 1.24 -> 1.01 of
        // the hindsight bound, at 6.7 -> 9.0% extra (simulator, medians of
        // seeds 1-12). Only a primary slower by nature: an origin with few
        // primaries for a while after a pause (gc-pause) is as fast as its
        // target, and hedging it early moved gc-pause from 0.977 to 1.002
        // of the bound.
        let borrowed = match (tail_aware, benefit, choice) {
            (true, None, Some(own)) => target
                .get()
                .filter(|t| t.slower_primary)
                .and_then(|t| self.target_delay(t.origin, route, now_ms))
                .map(clamp)
                .filter(|&d| d < own.delay_ms),
            _ => None,
        };
        if let Some(delay_ms) = borrowed {
            choice = Some(DelayChoice {
                delay_ms,
                basis: DelayBasis::Target,
            });
        }
        RouteDelay { choice, benefit }
    }

    /// The delay by benefit `target`'s own requests on `route` got
    /// recently as primaries (asked only for a target the primary is slower
    /// than, so never the primary itself).
    fn target_delay(&self, target: usize, route: &str, now_ms: f64) -> Option<f64> {
        let cached = self.benefit.get(&(target, route.to_string()))?;
        let fresh = now_ms - cached.at_ms <= TARGET_DELAY_FRESH_MS;
        cached.choice.filter(|_| fresh).map(|c| c.delay_ms)
    }

    /// The share of all hedgeable requests that primaries other than
    /// `primary` recently hedged outside the benefit rule's plans.
    fn unplanned_spend(&self, primary: usize) -> f64 {
        (self.primary_shares.iter().zip(&self.unplanned_shares))
            .enumerate()
            .filter(|&(origin, _)| origin != primary)
            .map(|(_, (share, unplanned))| share * unplanned)
            .sum()
    }

    /// A hedgeable request's race on `primary` ended, after `took_ms` when
    /// it ended by itself (not when the client left), with the hedge it sent.
    pub fn note_race_end(
        &mut self,
        primary: usize,
        took_ms: Option<f64>,
        hedge: RaceHedge,
        now_ms: f64,
    ) {
        let urgent = hedge == RaceHedge::Urgent;
        self.urgent_share += RECENT_WEIGHT * (f64::from(u8::from(urgent)) - self.urgent_share);
        if self.primary_shares.len() <= primary {
            self.primary_shares.resize(primary + 1, 0.0);
            self.unplanned_shares.resize(primary + 1, 0.0);
        }
        for (origin, share) in self.primary_shares.iter_mut().enumerate() {
            *share += RECENT_WEIGHT * (f64::from(u8::from(origin == primary)) - *share);
        }
        let unplanned = f64::from(u8::from(hedge == RaceHedge::Unplanned));
        if let Some(share) = self.unplanned_shares.get_mut(primary) {
            *share += OWN_RECENT_WEIGHT * (unplanned - *share);
        }
        if let Some(took_ms) = took_ms {
            self.race_times.record(Sample::Completed(took_ms), now_ms);
        }
    }

    /// How much of the isolate's slowest 1% `primary`'s requests on `route`
    /// hold for their number ([`best_delay`]'s `tail_weight`): the share of
    /// them slower than the isolate's p99 (of races as they ran), over that
    /// share among all primaries' requests. 1 with one primary, before the
    /// isolate has the data, when its median is not apart from the
    /// others', and within counting noise.
    fn tail_weight(
        &mut self,
        estimator: &mut LatencyEstimator,
        primary: usize,
        primary_samples: &LatencySketch,
        route: &str,
        min_samples: u64,
        now_ms: f64,
    ) -> f64 {
        // An origin counts as a primary from 1% of recent races.
        let serves = |share: &f64| *share >= RECENT_WEIGHT * 10.0;
        if self.primary_shares.iter().filter(|s| serves(s)).count() < 2
            || self.race_times.count(now_ms) < min_samples
        {
            return 1.0;
        }
        let Some(p99) = self.race_times.quantile(1.0 - ISOLATE_TAIL, now_ms) else {
            return 1.0;
        };
        // Per origin: the share past the isolate's p99, the samples it
        // rests on, and the log of the median.
        let measure = |sketch: &LatencySketch| {
            let median = sketch.quantile(0.5)?.max(f64::MIN_POSITIVE);
            Some((
                share_slower(sketch, p99)?,
                sketch.count() as f64,
                median.ln(),
            ))
        };
        let Some((own, own_count, own_median)) = measure(primary_samples) else {
            return 1.0;
        };
        // The primary's samples are the caller's; the others' are read once.
        let mut measure_origin = |origin: usize| match origin == primary {
            true => Some((own, own_count, own_median)),
            false => estimator
                .samples(origin, route, ROUTE_OWN_SAMPLES, min_samples, now_ms)
                .and_then(|samples| measure(&samples.whole)),
        };
        let (mut slower, mut median, mut weights) = (0.0, 0.0, 0.0);
        for (origin, &share) in self.primary_shares.iter().enumerate() {
            if let Some((s, _, m)) = serves(&share).then(|| measure_origin(origin)).flatten() {
                slower += share * s;
                median += share * m;
                weights += share;
            }
        }
        // Only an origin whose ordinary requests are apart too (a degraded
        // one) has a share of the tail of its own: a spell (a GC pause, a
        // burst of loss) fills one origin's tail for a while and leaves its
        // median where the others' is, and a weight that followed spells
        // moved gc-pause's delays with each pause (simulator, 30 s, seed 1:
        // p99 1.03 -> 1.14 of the hindsight bound).
        if slower <= 0.0 || (own_median - median / weights).abs() < MEDIANS_APART.ln() {
            return 1.0;
        }
        // Counted in requests: how many of the primary's are past the
        // isolate's p99, against how many would be at everyone's rate. Only
        // what lies beyond the noise of those counts moves the weight: two
        // origins alike differ by a few standard deviations between their
        // samples.
        let expected = own_count * slower / weights;
        let excess = own_count * own - expected;
        let beyond_noise = (excess.abs() - NOISE_SDS * expected.sqrt()).max(0.0);
        let w = 1.0 + excess.signum() * beyond_noise / expected;
        w.clamp(TAIL_WEIGHT_RANGE.0, TAIL_WEIGHT_RANGE.1)
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
        target: &mut AskedOnce<impl FnOnce() -> LikelyTarget>,
    ) -> Option<BenefitChoice> {
        let key = (primary, route.to_string());
        if let Some(cached) = self.benefit.get_mut(&key, now_ms) {
            if now_ms - cached.at_ms < BENEFIT_REFRESH_MS {
                return cached.choice;
            }
        }
        let p = &self.params;
        // Delay hedges plan on what urgent ones (stalls, failures) leave.
        let planned = budget_share * BENEFIT_BUDGET_SHARE - URGENT_RESERVE * self.urgent_share;
        let mut max_share = planned.max(0.0);
        let min_samples = p.delay.min_data_points.max(BENEFIT_MIN_SAMPLES);
        let target = target.get()?;
        // A target whose 5xx rate cut its share takes no more than that.
        max_share = max_share.min(target.share * BENEFIT_BUDGET_SHARE);
        // The budget holds over all primaries: what the others' unplanned
        // hedges spend (a slow primary's, at its target's delay) is not
        // this one's to plan on. On slow-origin (simulator, seeds 1-12):
        // extra 9.5 -> 9.0%, p99 126.3 -> 128.1 ms, p99.9 the same.
        if let Some(&own) = self.primary_shares.get(primary).filter(|&&own| own > 0.0) {
            let others = self.unplanned_spend(primary);
            max_share = max_share.min(((planned - others) / own).max(0.0));
        }
        // The route's own samples, else the origin's over all its routes
        // (as the quantile falls back), so a route with little traffic of
        // its own is not left on the quantile.
        let x = estimator.samples(primary, route, ROUTE_OWN_SAMPLES, min_samples, now_ms)?;
        let y = estimator.samples(target.origin, route, ROUTE_OWN_SAMPLES, min_samples, now_ms);
        // No data on the target yet: assume it behaves like the primary.
        let whole_y = y.as_ref().map_or(&x.whole, |y| &y.whole);
        let weight = self.tail_weight(estimator, primary, &x.whole, route, min_samples, now_ms);
        let mut choice = best_delay(&x.whole, whole_y, max_share, weight);
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
                choice = best_delay(recent_x, recent_y, max_share, weight).or(choice);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimation::delay_policy::HedgeMode;
    use crate::estimation::estimator::EstimatorParams;

    const WINDOW: WindowParams = WindowParams {
        window_ms: 60_000.0,
        sub_windows: 6,
    };

    fn planner() -> DelayPlanner {
        let params = PlanParams {
            mode: HedgeMode::Adaptive,
            policy: HedgePolicy::TailAware,
            delay: DelayParams {
                quantile: 0.95,
                offset_ms: 0.0,
                min_delay_ms: 1.0,
                max_delay_ms: 1_000.0,
                cold_delay_ms: 100.0,
                min_data_points: 100,
                pop_blend_samples: 1_000,
            },
            budget_share: 0.1,
        };
        DelayPlanner::new(params, 16, WINDOW, 0.0)
    }

    /// `n` requests with primary 0 for `share_0` of them: each origin's
    /// latency from `latency(origin, i)`, the race taking what the primary
    /// took.
    fn feed(
        plan: &mut DelayPlanner,
        est: &mut LatencyEstimator,
        n: usize,
        share_0: f64,
        latency: impl Fn(usize, usize) -> f64,
    ) {
        let every = (1.0 / share_0).round() as usize;
        for i in 0..n {
            let primary = usize::from(i % every != 0);
            let took = latency(primary, i);
            est.record(primary, "/", Sample::Completed(took), 1_000.0);
            plan.note_race_end(primary, Some(took), RaceHedge::None, 1_000.0);
        }
    }

    fn estimator() -> LatencyEstimator {
        LatencyEstimator::new(EstimatorParams {
            window: WINDOW,
            max_route_keys: 16,
        })
    }

    /// `origin`'s tail weight on route "/", read from the samples the
    /// planner reads for it.
    fn weight_of(plan: &mut DelayPlanner, est: &mut LatencyEstimator, origin: usize) -> f64 {
        let samples = est.samples(origin, "/", ROUTE_OWN_SAMPLES, 100, 1_000.0);
        let samples = samples.expect("samples");
        plan.tail_weight(est, origin, &samples.whole, "/", 100, 1_000.0)
    }

    /// Even spread over [from, from + width): the i-th of every 97.
    fn spread(i: usize, from: f64, width: f64) -> f64 {
        from + width * (i % 97) as f64 / 97.0
    }

    #[test]
    fn a_degraded_primarys_requests_weigh_more_in_the_isolates_tail() {
        // Origin 0 gets a tenth of the requests and is slow (100-500 ms);
        // origin 1 is fast (20-60 ms) but for 1% at 250 ms. The isolate's
        // slowest 1% is origin 0's: its delay must be chosen for its
        // slowest several percent, not its own 1%.
        let (mut plan, mut est) = (planner(), estimator());
        feed(&mut plan, &mut est, 20_000, 0.1, |origin, i| match origin {
            0 => spread(i, 100.0, 400.0),
            _ if i % 100 == 1 => 250.0,
            _ => spread(i, 20.0, 40.0),
        });
        let slow = weight_of(&mut plan, &mut est, 0);
        let fast = weight_of(&mut plan, &mut est, 1);
        assert!(slow > 3.0, "{slow}");
        // Most of the isolate's requests: its median is everyone's.
        assert_eq!(fast, 1.0);
    }

    #[test]
    fn alike_origins_weigh_the_same_whatever_their_share_or_spells() {
        let (mut plan, mut est) = (planner(), estimator());
        feed(&mut plan, &mut est, 20_000, 0.3, |origin, i| match origin {
            // A spell (a GC pause) put 3% of origin 0's requests at 300 ms:
            // its tail, not its median.
            0 if i % 1_000 < 30 => 300.0,
            // The same spread, drawn in a different order per origin.
            _ => spread(i * (origin + 1) * 7, 20.0, 100.0),
        });
        for origin in [0, 1] {
            let weight = weight_of(&mut plan, &mut est, origin);
            assert_eq!(weight, 1.0, "origin {origin}");
        }
    }

    #[test]
    fn one_primary_weighs_one() {
        let (mut plan, mut est) = (planner(), estimator());
        feed(&mut plan, &mut est, 5_000, 1.0, |_, i| {
            spread(i, 20.0, 200.0)
        });
        assert_eq!(weight_of(&mut plan, &mut est, 0), 1.0);
    }

    /// Origin 0's delay by benefit when origin 1 takes `share_1` of the
    /// races and sends an unplanned hedge on `unplanned_1` of its own.
    fn hedge_share_beside(share_1: f64, unplanned_1: f64) -> f64 {
        let (mut plan, mut est) = (planner(), estimator());
        for i in 0..3_000 {
            // 12% of origin 0's requests at 200-400 ms: hedging pays up to the budget.
            let ms = if i % 25 < 3 {
                spread(i, 200.0, 200.0)
            } else {
                spread(i, 20.0, 40.0)
            };
            est.record(0, "/", Sample::Completed(ms), 1_000.0);
        }
        let every_1 = (1.0 / share_1).round() as usize;
        let every_unplanned = (1.0 / unplanned_1).round() as usize;
        for i in 0..5_000_usize {
            let (primary, hedge) = match i.is_multiple_of(every_1) {
                true if (i / every_1).is_multiple_of(every_unplanned) => (1, RaceHedge::Unplanned),
                true => (1, RaceHedge::None),
                false => (0, RaceHedge::None),
            };
            plan.note_race_end(primary, None, hedge, 1_000.0);
        }
        let target = || LikelyTarget {
            origin: 0,
            share: 1.0,
            slower_primary: false,
        };
        let delay = plan.route_delay(
            &mut est,
            0,
            "/",
            1_000.0,
            RouteRules::default(),
            || None,
            target,
        );
        delay.benefit.expect("enough samples").hedge_share
    }

    #[test]
    fn another_primarys_unplanned_hedges_come_off_the_budget_planned_on() {
        // Budget 10%, 90% of it for delay hedges: 9% of origin 0's requests.
        let alone = hedge_share_beside(0.2, 0.01);
        assert!(alone > 0.06, "{alone}");
        // Origin 1 (a fifth of the races) hedges a quarter of its own outside
        // any plan: 5% of all requests, leaving 4% of all (5% of origin 0's).
        let beside = hedge_share_beside(0.2, 0.25);
        assert!(beside <= 0.05 + 1e-9, "{beside}");
    }
}
