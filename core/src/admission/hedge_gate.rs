//! Decides whether a hedge may go out now, and where: the budget, origin
//! health and the 5xx-adaptive limits together, per isolate.
//!
//! A hedge needs: the primary's 5xx rate not past the stop level; a target
//! that admits it (healthy, or on its one recovery trial; not past the stop
//! level; with a token in its reduced bucket when its 5xx rate is past the
//! reduce level); and a token in the global bucket. Reduced buckets run all
//! the time, so one is ready the moment an origin's error rate crosses the
//! line and the cut takes effect at once.

use std::rc::Rc;

use crate::admission::budget::{BudgetParams, HedgeBudget};
use crate::admission::health::{BudgetLevel, HealthParams, HealthWindow, OriginHealth, Outcome};
use crate::admission::origin_load::{OriginLoad, OriginLoadParams};
use crate::admission::origin_pool::{choose_hedge, choose_primary, HedgeTarget};
use crate::no_hedge::HedgeDenied;

/// Why a hedge went out (`Server-Timing`, logs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HedgeCause {
    /// The primary outlived the hedge delay.
    Delay,
    /// The primary's origin stalled (several requests silent at once).
    Stall,
    /// The primary failed fast and retriably.
    Failure,
}

impl HedgeCause {
    /// A short name for headers and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            HedgeCause::Delay => "delay",
            HedgeCause::Stall => "stall",
            HedgeCause::Failure => "failure",
        }
    }
}

/// Which origins a hedge may not go to, beyond health and budget.
#[derive(Debug, Clone, Copy)]
struct TargetRules {
    /// The primary itself may take the hedge (on a new request).
    same_origin: bool,
    /// Queueing origins are left out.
    skip_queueing: bool,
    /// Peers whose 5xx rate cut their budget are left out.
    skip_erroring: bool,
    /// Peers slower by nature than this origin (the primary) are left out.
    slow_peer_of: Option<usize>,
}

impl TargetRules {
    /// Whether `origin`, at `level`, is ruled out as the hedge target.
    fn excludes(&self, load: &OriginLoad, origin: usize, level: BudgetLevel) -> bool {
        level == BudgetLevel::Stopped
            || (self.skip_erroring && matches!(level, BudgetLevel::Reduced(_)))
            || (self.skip_queueing && load.queueing(origin))
            || (self.slow_peer_of).is_some_and(|primary| slower_by_nature(load, origin, primary))
    }
}

/// Whether `origin`'s fast answers take more than [`SLOW_PEER_FACTOR`] times
/// `than`'s: the one test behind the slow-peer rule and a slow primary's
/// borrowed delay. Unknown until both have answered enough: false.
fn slower_by_nature(load: &OriginLoad, origin: usize, than: usize) -> bool {
    match (load.fast_ms(origin), load.fast_ms(than)) {
        (Some(slow), Some(fast)) => slow > SLOW_PEER_FACTOR * fast,
        _ => false,
    }
}

/// A peer whose fast answers take this many times the primary's is a worse
/// hedge target than the primary itself. Its fast answers (a running 25th
/// percentile) do not move with stragglers or pauses, so two like origins
/// never read twice apart.
const SLOW_PEER_FACTOR: f64 = 2.0;

/// A stall's hedges may borrow this many bucket sizes.
const STALL_OVERDRAFT: f64 = 3.0;

/// Why a hedge cannot wait for the budget to refill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// The primary failed fast and retriably.
    Failure,
    /// The primary's origin stalled.
    Stall,
}

/// One origin as the gate sees it, for stats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OriginSnapshot {
    /// Not degraded and not on a recovery trial.
    pub healthy: bool,
    /// Its results over the health window.
    pub window: HealthWindow,
    /// What its 5xx rate allows: full, reduced or stopped.
    pub budget: BudgetLevel,
    /// Tokens in its reduced bucket (spent only while the budget is reduced).
    pub reduced_budget_tokens: f64,
}

/// Settings for a [`HedgeGate`]: its own part of the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct GateParams {
    /// The global hedge budget.
    pub budget: BudgetParams,
    /// Origin health and the 5xx-adaptive limits.
    pub health: HealthParams,
    /// Each origin's zone, in `HEDGE_ORIGINS` order (one entry per origin).
    pub zones: Vec<Option<String>>,
    /// With no healthy peer, hedge to the primary itself on a new request.
    pub same_origin_hedge: bool,
    /// A straggler's hedge skips a peer whose 5xx rate cut its budget, or
    /// whose fast answers take twice the primary's, when the primary itself
    /// could take it (tail-aware policy): a hedge that fails fast rescues
    /// nothing, and the erroring peer is spared the load; a new request on a
    /// healthy primary escapes its straggler's bad luck sooner than the slow
    /// peer answers.
    pub avoid_poor_peers: bool,
    /// Primary choice, stall detection and the overload governor.
    pub origin_load: OriginLoadParams,
    /// Seeds the primary draws (each isolate needs its own).
    pub seed: u64,
    /// Per route policy (`HEDGE_ROUTES`, by index): the origins it may use
    /// and its own budget's share, when it sets them.
    pub routes: Vec<RouteScope>,
}

/// What a route policy changes in the gate.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RouteScope {
    /// The origins its requests may use (`None`: all).
    pub origins: Option<Vec<usize>>,
    /// Its own budget's percentage (`None`: the global bucket).
    pub budget_percent: Option<f64>,
}

/// Per-isolate hedge admission state.
#[derive(Debug)]
pub struct HedgeGate {
    budget: HedgeBudget,
    reduced: Vec<HedgeBudget>,
    health: Vec<OriginHealth>,
    zones: Vec<Option<String>>,
    same_origin_hedge: bool,
    avoid_poor_peers: bool,
    /// Each origin's legs in flight and recent latency: the primary choice,
    /// stalls, and which origins are queueing (no hedges to them).
    pub load: OriginLoad,
    pop_rates: Vec<Option<PopRate>>,
    /// Thresholds for PoP rates; a PoP rate is used for one health window
    /// and only over at least `min_requests` answers, like a local one.
    health_params: HealthParams,
    /// Route policies' origins, and their own buckets (by route policy).
    route_origins: Vec<Option<Rc<[usize]>>>,
    route_budgets: Vec<Option<HedgeBudget>>,
    /// The route policy of the request being decided (set by
    /// [`HedgeGate::scope`] before each decision).
    scope: Option<usize>,
}

// === impl HedgeGate ===

impl HedgeGate {
    /// A gate for `params`' origins: everything healthy, every bucket empty.
    pub fn new(params: &GateParams, now_ms: f64) -> Self {
        let reduced_params = BudgetParams {
            percent: params.health.reduced_budget_percent,
            ..params.budget
        };
        let origins = params.zones.len();
        Self {
            budget: HedgeBudget::new(params.budget, now_ms),
            reduced: (0..origins)
                .map(|_| HedgeBudget::new(reduced_params, now_ms))
                .collect(),
            health: (0..origins)
                .map(|_| OriginHealth::new(params.health, now_ms))
                .collect(),
            zones: params.zones.clone(),
            same_origin_hedge: params.same_origin_hedge,
            avoid_poor_peers: params.avoid_poor_peers,
            load: OriginLoad::new(params.origin_load, origins, params.seed),
            pop_rates: vec![None; origins],
            health_params: params.health,
            route_origins: (params.routes.iter())
                .map(|r| r.origins.as_deref().map(Rc::from))
                .collect(),
            route_budgets: (params.routes.iter())
                .map(|r| {
                    r.budget_percent.map(|percent| {
                        HedgeBudget::new(
                            BudgetParams {
                                percent,
                                ..params.budget
                            },
                            now_ms,
                        )
                    })
                })
                .collect(),
            scope: None,
        }
    }

    /// The decisions that follow are for a request of route policy
    /// `route` (`None`: no route policy): its origins and its budget.
    pub fn scope(&mut self, route: Option<usize>) {
        self.scope = route;
    }

    /// Whether the request in scope may use `origin`.
    fn allowed(&self, origin: usize) -> bool {
        self.restriction().is_none_or(|o| o.contains(&origin))
    }

    /// The origins the request in scope may use, when its route restricts
    /// them (a shared handle: no copy, and nothing at all for the usual
    /// unrestricted request).
    fn restriction(&self) -> Option<Rc<[usize]>> {
        self.scope
            .and_then(|r| self.route_origins.get(r))
            .and_then(Clone::clone)
    }

    /// The bucket the request in scope spends from: its route's own, or the global one.
    fn bucket(&mut self) -> &mut HedgeBudget {
        match self.scope.and_then(|r| self.route_budgets.get_mut(r)) {
            Some(Some(own)) => own,
            _ => &mut self.budget,
        }
    }

    /// The primary for a new request: the first origin that admits it.
    pub fn choose_primary(&mut self, now_ms: f64) -> usize {
        let restriction = self.restriction();
        let allowed = |i: usize| restriction.as_ref().is_none_or(|o| o.contains(&i));
        let health = &mut self.health;
        let chosen = choose_primary(health.len(), |i| allowed(i) && health[i].admit(now_ms));
        if allowed(chosen) {
            chosen
        } else {
            (0..health.len()).find(|&i| allowed(i)).unwrap_or(0)
        }
    }

    /// The primary for a new request, drawn by the load tracker among the
    /// healthy origins. A degraded origin whose cool-down is over takes the
    /// request as its one recovery trial first, as in configuration order;
    /// with no healthy origin, the first one.
    pub fn choose_primary_by_load(&mut self, now_ms: f64) -> usize {
        let restriction = self.restriction();
        let allowed = |i: usize| restriction.as_ref().is_none_or(|o| o.contains(&i));
        for (i, health) in self.health.iter_mut().enumerate() {
            if allowed(i) && !health.is_healthy() && health.admit(now_ms) {
                return i;
            }
        }
        let health = &self.health;
        let first_allowed = (0..health.len()).find(|&i| allowed(i)).unwrap_or(0);
        self.load
            .choose_primary(now_ms, |i| allowed(i) && health[i].is_healthy())
            .unwrap_or(first_allowed)
    }

    /// A hedge-eligible request arrived: fund the global bucket and every
    /// origin's reduced one (each caps hedges to or from its origin at the
    /// reduced share of all eligible traffic).
    pub fn deposit(&mut self, now_ms: f64) {
        self.bucket().deposit(now_ms);
        for bucket in &mut self.reduced {
            bucket.deposit(now_ms);
        }
    }

    /// Asks to hedge a request whose primary is `primary`. On success the
    /// tokens are spent and the target origin's index returned.
    /// `charge_budget` is false for the retry mode, which has no budget.
    pub fn permit(
        &mut self,
        primary: usize,
        now_ms: f64,
        charge_budget: bool,
    ) -> Result<usize, HedgeDenied> {
        let same_origin = self.same_origin_hedge;
        self.permit_to(primary, now_ms, charge_budget, same_origin, None)
    }

    /// [`HedgeGate::permit`] for an urgent hedge: a retry of a primary that
    /// failed fast, or a hedge of a request on a stalled origin. The global
    /// bucket may run into debt (one bucket size for a failure, three for a
    /// stall, which wants a burst of hedges at once), paid back before any
    /// straggler hedge goes out. After a failure the primary's own 5xx limits
    /// do not apply either (the retry takes load off it). The target's limits
    /// always apply.
    pub fn permit_urgent(
        &mut self,
        primary: usize,
        now_ms: f64,
        urgency: Urgency,
        keyed: bool,
    ) -> Result<usize, HedgeDenied> {
        let same_origin = self.same_origin_hedge && !keyed;
        self.permit_to(primary, now_ms, true, same_origin, Some(urgency))
    }

    /// [`HedgeGate::permit`] for a request hedged on the strength of its
    /// idempotency key: only another origin may take it (one origin seeing
    /// the key twice at once answers 409 or, worse, runs it twice).
    pub fn permit_to_peer(&mut self, primary: usize, now_ms: f64) -> Result<usize, HedgeDenied> {
        self.permit_to(primary, now_ms, true, false, None)
    }

    fn permit_to(
        &mut self,
        primary: usize,
        now_ms: f64,
        charge_budget: bool,
        same_origin_allowed: bool,
        urgency: Option<Urgency>,
    ) -> Result<usize, HedgeDenied> {
        let after_failure = urgency == Some(Urgency::Failure);
        // Every origin's level once: the primary's, the candidate targets' and
        // the withdrawal below all read these.
        let levels: Vec<BudgetLevel> = (0..self.health.len())
            .map(|i| self.level(i, now_ms))
            .collect();
        let level_of = |i: usize| levels.get(i).copied().unwrap_or(BudgetLevel::Full);
        let primary_level = level_of(primary);
        let primary_limited = charge_budget && !after_failure;
        if primary_limited && primary_level == BudgetLevel::Stopped {
            return Err(HedgeDenied::PrimaryErroring);
        }
        if primary_limited
            && matches!(primary_level, BudgetLevel::Reduced(_))
            && self.reduced[primary].tokens(now_ms) < 1.0
        {
            return Err(HedgeDenied::Budget);
        }
        let overdraft = match urgency {
            None => 0.0,
            Some(Urgency::Failure) => self.bucket().capacity(),
            // A stall stops every request in flight at once: its hedges come
            // in a burst larger than any bucket banks.
            Some(Urgency::Stall) => STALL_OVERDRAFT * self.bucket().capacity(),
        };
        if charge_budget && self.bucket().tokens(now_ms) < 1.0 - overdraft {
            return Err(HedgeDenied::Budget);
        }
        let zones: Vec<Option<&str>> = self.zones.iter().map(|z| z.as_deref()).collect();
        let rules = self.target_rules(primary, primary_level, same_origin_allowed, urgency);
        let restriction = self.restriction();
        let target = choose_hedge(primary, &zones, rules.same_origin, |i| {
            let level = level_of(i);
            let room = restriction.as_ref().is_none_or(|o| o.contains(&i))
                && !rules.excludes(&self.load, i, level)
                && (!matches!(level, BudgetLevel::Reduced(_))
                    || !charge_budget
                    || self.reduced[i].tokens(now_ms) >= 1.0);
            // Admission last: it may claim the origin's recovery trial.
            room && self.health[i].admit(now_ms)
        })
        .ok_or(HedgeDenied::NoTarget)?;
        let origin = match target {
            HedgeTarget::Peer(i) => i,
            HedgeTarget::SameOrigin => primary,
        };
        if charge_budget {
            // A retry after a failure takes load off its primary: only the
            // target's reduced bucket pays for it.
            let mut limited = if after_failure {
                vec![origin]
            } else {
                vec![primary, origin]
            };
            limited.dedup();
            for o in limited {
                if matches!(level_of(o), BudgetLevel::Reduced(_)) {
                    self.reduced[o].try_withdraw(now_ms);
                }
            }
            self.bucket().withdraw(now_ms, overdraft);
        }
        Ok(origin)
    }

    /// Where a hedge of `primary`'s request would most likely go now (the
    /// first healthy peer in preference order), without claiming anything.
    pub fn likely_target(&mut self, primary: usize, now_ms: f64) -> Option<usize> {
        let levels: Vec<BudgetLevel> = (0..self.health.len())
            .map(|i| self.level(i, now_ms))
            .collect();
        let level_of = |i: usize| levels.get(i).copied().unwrap_or(BudgetLevel::Full);
        let rules = self.target_rules(primary, level_of(primary), self.same_origin_hedge, None);
        let zones: Vec<Option<&str>> = self.zones.iter().map(|z| z.as_deref()).collect();
        match choose_hedge(primary, &zones, rules.same_origin, |i| {
            self.allowed(i)
                && self.health[i].is_healthy()
                && !rules.excludes(&self.load, i, level_of(i))
        })? {
            HedgeTarget::Peer(i) => Some(i),
            HedgeTarget::SameOrigin => Some(primary),
        }
    }

    /// Whether `origin` is slower by nature than `than`: its fast answers
    /// take more than [`SLOW_PEER_FACTOR`] times `than`'s (as for the rule
    /// that keeps stragglers off a slow peer).
    pub fn slower(&self, origin: usize, than: usize) -> bool {
        slower_by_nature(&self.load, origin, than)
    }

    /// The most of all requests that hedges may go to `target` now: its
    /// reduced share when its 5xx rate cut it, none when stopped.
    pub fn target_share(&mut self, target: usize, now_ms: f64) -> f64 {
        match self.level(target, now_ms) {
            BudgetLevel::Full => 1.0,
            BudgetLevel::Reduced(percent) => percent / 100.0,
            BudgetLevel::Stopped => 0.0,
        }
    }

    /// The target rules `permit_to` and `likely_target` share.
    fn target_rules(
        &self,
        primary: usize,
        primary_level: BudgetLevel,
        same_origin_allowed: bool,
        urgency: Option<Urgency>,
    ) -> TargetRules {
        // A queueing origin takes no hedge that adds load (a failure's retry
        // replaces a request, it adds none).
        let skip_queueing = urgency != Some(Urgency::Failure);
        let same_origin = same_origin_allowed && !(skip_queueing && self.load.queueing(primary));
        // A straggler on a primary in good standing is better hedged on the
        // primary itself than on a peer that fails fast, or whose fast answers
        // take twice the primary's (a straggler on a healthy origin is its
        // own bad luck, which a new request there escapes, while the slow
        // peer's answer is slow by nature); urgent hedges (the primary stalled
        // or failed) still go to the peer.
        let prefer_primary = self.avoid_poor_peers
            && same_origin
            && urgency.is_none()
            && primary_level == BudgetLevel::Full;
        TargetRules {
            same_origin,
            skip_queueing,
            skip_erroring: prefer_primary,
            slow_peer_of: prefer_primary.then_some(primary),
        }
    }

    /// Records how a request to `origin` on route `route` (a
    /// [`route_tag`](crate::admission::health::route_tag)) ended; whether it
    /// counted against the origin (see [`OriginHealth::record`]).
    pub fn record(&mut self, origin: usize, outcome: Outcome, route: u64, now_ms: f64) -> bool {
        self.health
            .get_mut(origin)
            .is_some_and(|h| h.record(outcome, route, now_ms))
    }

    /// A request to `origin` was aborted before it answered: it says nothing
    /// about the origin, but a recovery trial it carried must be freed.
    pub fn abandoned(&mut self, origin: usize, now_ms: f64) {
        if let Some(h) = self.health.get_mut(origin) {
            h.abandon_trial(now_ms);
        }
    }

    /// Requests to `origin` awaiting an answer (for the metrics).
    pub fn legs_in_flight(&mut self, origin: usize, now_ms: f64) -> usize {
        self.load.in_flight(origin, now_ms)
    }

    /// Tokens in the global hedge budget now (for stats).
    pub fn budget_tokens(&mut self, now_ms: f64) -> f64 {
        self.budget.tokens(now_ms)
    }

    /// How `origin` stands now: health, window rates and its budget (for stats).
    pub fn origin_snapshot(&mut self, origin: usize, now_ms: f64) -> Option<OriginSnapshot> {
        let level = self.level(origin, now_ms);
        let reduced_tokens = self.reduced.get_mut(origin)?.tokens(now_ms);
        let health = self.health.get_mut(origin)?;
        Some(OriginSnapshot {
            healthy: health.is_healthy(),
            window: health.window(now_ms),
            budget: level,
            reduced_budget_tokens: reduced_tokens,
        })
    }

    /// The PoP-wide 5xx rates from the aggregator's latest reply, as
    /// (origin, rate, responses). Until they go stale (one health window),
    /// an origin's budget level is the stricter of this isolate's and the
    /// PoP's, so a quiet isolate holds back from an origin the PoP sees erroring.
    pub fn note_pop_rates(&mut self, rates: &[(usize, f64, u64)], now_ms: f64) {
        for slot in &mut self.pop_rates {
            *slot = None;
        }
        for &(origin, rate, responses) in rates {
            if let Some(slot) = self.pop_rates.get_mut(origin) {
                *slot = Some(PopRate {
                    rate,
                    responses,
                    at_ms: now_ms,
                });
            }
        }
    }

    /// The PoP's probe verdicts from the aggregator's latest reply, as
    /// (origin, up), each good for `fresh_ms`.
    pub fn note_probes(&mut self, verdicts: &[(usize, bool)], fresh_ms: f64, now_ms: f64) {
        for &(origin, up) in verdicts {
            if let Some(h) = self.health.get_mut(origin) {
                h.note_probe(up, fresh_ms, now_ms);
            }
        }
    }

    /// Whether fresh probes say `origin` is down.
    pub fn probe_down(&self, origin: usize, now_ms: f64) -> bool {
        self.health
            .get(origin)
            .is_some_and(|h| h.probe_down(now_ms))
    }

    /// The PoP-wide 5xx rate of `origin` in use now, if any.
    pub fn pop_5xx_rate(&self, origin: usize, now_ms: f64) -> Option<f64> {
        self.pop_5xx(origin, now_ms).map(|p| p.rate)
    }

    /// The PoP-wide 5xx figures of `origin` in use now, if any.
    fn pop_5xx(&self, origin: usize, now_ms: f64) -> Option<PopRate> {
        self.pop_rates.get(origin).copied().flatten().filter(|p| {
            now_ms - p.at_ms < self.health_params.window.window_ms
                && p.responses >= self.health_params.min_requests
        })
    }

    fn level(&mut self, origin: usize, now_ms: f64) -> BudgetLevel {
        let local = self
            .health
            .get_mut(origin)
            .map_or(BudgetLevel::Full, |h| h.budget_level(now_ms));
        match self.pop_5xx(origin, now_ms) {
            Some(p) => {
                // The PoP's count of 5xx answers, rebuilt from its rate.
                let errors = (p.rate * p.responses as f64).round() as u64;
                local.stricter(self.health_params.level_for_5xx(errors, p.responses))
            }
            None => local,
        }
    }
}

/// One origin's PoP-wide 5xx rate as last reported.
#[derive(Debug, Clone, Copy, PartialEq)]
struct PopRate {
    rate: f64,
    responses: u64,
    at_ms: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vec_map::VecMap;

    fn params(extra: &[(&str, &str)]) -> GateParams {
        let mut vars: VecMap<String, String> = VecMap::new();
        vars.insert(
            "HEDGE_ORIGINS".into(),
            r#"[{"name":"a","url":"http://a","zone":"z1"},{"name":"b","url":"http://b","zone":"z1"},{"name":"c","url":"http://c","zone":"z2"}]"#.into(),
        );
        for (k, v) in extra {
            vars.insert(k.to_string(), v.to_string());
        }
        crate::config::parse(&vars)
            .expect("valid test config")
            .gate()
    }

    /// A gate whose global bucket holds what 100 eligible requests earned
    /// (a new gate starts empty).
    fn funded(mut gate: HedgeGate) -> HedgeGate {
        for _ in 0..100 {
            gate.deposit(0.0);
        }
        gate
    }

    #[test]
    fn a_new_gate_has_earned_no_hedges() {
        let mut gate = HedgeGate::new(&params(&[]), 0.0);
        assert_eq!(gate.permit(0, 0.0, true), Err(HedgeDenied::Budget));
        assert_eq!(gate.budget_tokens(0.0), 0.0);
    }

    #[test]
    fn hedges_go_to_the_other_zone() {
        let mut gate = funded(HedgeGate::new(&params(&[]), 0.0));
        assert_eq!(gate.permit(0, 0.0, true), Ok(2));
    }

    #[test]
    fn a_degraded_origin_gets_no_hedges_until_it_recovers() {
        let mut gate = funded(HedgeGate::new(
            &params(&[("HEDGE_TUNING", r#"{"health_cooldown_ms":1000}"#)]),
            0.0,
        ));
        for _ in 0..5 {
            gate.record(2, Outcome::Unreachable, 0, 0.0);
        }
        assert_eq!(gate.origin_snapshot(2, 0.0).map(|s| s.healthy), Some(false));
        assert_eq!(
            gate.permit(0, 10.0, true),
            Ok(1),
            "the same-zone peer instead"
        );
        // After the cool-down, one hedge is the trial; its success restores c.
        assert_eq!(gate.permit(0, 1_000.0, true), Ok(2));
        assert_eq!(gate.permit(0, 1_001.0, true), Ok(1), "one trial at a time");
        gate.record(2, Outcome::Success, 0, 1_050.0);
        assert_eq!(gate.permit(0, 1_100.0, true), Ok(2));
    }

    #[test]
    fn a_keyed_request_is_never_hedged_to_its_own_origin() {
        let one = params(&[("HEDGE_ORIGINS", r#"[{"name":"a","url":"http://a"}]"#)]);
        let mut gate = HedgeGate::new(&one, 0.0);
        for _ in 0..100 {
            gate.deposit(0.0);
        }
        assert_eq!(gate.permit_to_peer(0, 0.0), Err(HedgeDenied::NoTarget));
        assert_eq!(gate.permit(0, 0.0, true), Ok(0), "an unkeyed GET may");
    }

    #[test]
    fn an_aborted_trial_frees_the_trial_slot() {
        let mut gate = funded(HedgeGate::new(
            &params(&[("HEDGE_TUNING", r#"{"health_cooldown_ms":1000}"#)]),
            0.0,
        ));
        for _ in 0..5 {
            gate.record(2, Outcome::Unreachable, 0, 0.0);
        }
        assert_eq!(gate.permit(0, 1_000.0, true), Ok(2));
        gate.abandoned(2, 1_020.0);
        assert_eq!(gate.permit(0, 1_030.0, true), Ok(2));
    }

    #[test]
    fn a_primary_past_the_stop_level_is_not_hedged() {
        let mut gate = HedgeGate::new(&params(&[]), 0.0);
        // 34 in 100: surely past the 20% stop level.
        for i in 0..100 {
            let outcome = if i % 3 == 0 {
                Outcome::ServerError
            } else {
                Outcome::Success
            };
            gate.record(0, outcome, 0, 0.0);
        }
        assert_eq!(gate.permit(0, 1.0, true), Err(HedgeDenied::PrimaryErroring));
        // The retry mode has no budget and is not stopped by it.
        assert!(gate.permit(0, 1.0, false).is_ok());
    }

    /// Origins a and c, a 50% budget holding one token, no time floor, no
    /// same-origin hedges: every hedge from a targets c.
    fn half_budget_gate_with_one_peer() -> HedgeGate {
        HedgeGate::new(
            &params(&[
                (
                    "HEDGE_ORIGINS",
                    r#"[{"name":"a","url":"http://a"},{"name":"c","url":"http://c"}]"#,
                ),
                ("HEDGE_BUDGET_PERCENT", "50"),
                ("HEDGE_BUDGET_FLOOR_PER_SEC", "0"),
                (
                    "HEDGE_TUNING",
                    r#"{"budget_max_tokens":1,"same_origin_hedge":false}"#,
                ),
            ]),
            0.0,
        )
    }

    /// Hedges permitted for 1,000 eligible requests from a, one per ms from `start`.
    fn hedges_per_1000(gate: &mut HedgeGate, start: f64) -> usize {
        (0..1_000)
            .filter(|i| {
                let now = start + f64::from(*i);
                gate.deposit(now);
                gate.permit(0, now, true).is_ok()
            })
            .count()
    }

    #[test]
    fn a_5xx_burst_cuts_hedges_to_the_reduced_budget_and_they_recover() {
        let mut gate = half_budget_gate_with_one_peer();
        assert!(hedges_per_1000(&mut gate, 0.0) >= 490);
        // c answers 5% of its requests with 5xx: its hedges drop to 5%.
        for i in 0..100 {
            let outcome = if i % 20 == 0 {
                Outcome::ServerError
            } else {
                Outcome::Success
            };
            gate.record(1, outcome, 0, 2_000.0);
        }
        let snapshot = gate.origin_snapshot(1, 2_000.0).expect("origin c");
        assert_eq!(snapshot.budget, BudgetLevel::Reduced(5.0));
        assert_eq!(snapshot.window.server_error_rate, Some(0.05));
        assert!(
            snapshot.healthy,
            "a 5% 5xx rate reduces the budget, it does not degrade"
        );
        assert!(
            gate.origin_snapshot(2, 2_000.0).is_none(),
            "no third origin"
        );
        let reduced = hedges_per_1000(&mut gate, 2_000.0);
        assert!((40..=60).contains(&reduced), "{reduced}");
        // A minute on, the errors have left the window: the full budget again.
        for _ in 0..100 {
            gate.record(1, Outcome::Success, 0, 63_000.0);
        }
        assert!(hedges_per_1000(&mut gate, 63_000.0) >= 490);
    }

    #[test]
    fn a_quiet_isolate_holds_back_from_an_origin_the_pop_sees_erroring() {
        let mut gate = half_budget_gate_with_one_peer();
        gate.deposit(1_000.0);
        gate.deposit(1_000.0);
        // This isolate has seen nothing of c; the PoP saw 30% 5xx over 100 answers.
        gate.note_pop_rates(&[(1, 0.3, 100)], 1_000.0);
        assert_eq!(gate.pop_5xx_rate(1, 1_000.0), Some(0.3));
        assert_eq!(gate.permit(0, 1_000.0, true), Err(HedgeDenied::NoTarget));
        assert_eq!(
            gate.origin_snapshot(1, 1_000.0).map(|s| s.budget),
            Some(BudgetLevel::Stopped)
        );
        // 5% across the PoP: the reduced budget (5%), not this isolate's 50%.
        gate.note_pop_rates(&[(1, 0.05, 100)], 2_000.0);
        let reduced = hedges_per_1000(&mut gate, 2_000.0);
        assert!((40..=60).contains(&reduced), "{reduced}");
        // A rate over too few answers, or one a window old, is not used.
        gate.note_pop_rates(&[(1, 1.0, 5)], 3_000.0);
        assert_eq!(gate.pop_5xx_rate(1, 3_000.0), None);
        gate.note_pop_rates(&[(1, 1.0, 100)], 4_000.0);
        assert_eq!(gate.pop_5xx_rate(1, 64_000.0), None);
        assert!(hedges_per_1000(&mut gate, 64_000.0) >= 490);
    }

    #[test]
    fn the_stricter_of_local_and_pop_levels_wins() {
        let full = BudgetLevel::Full;
        let reduced = BudgetLevel::Reduced(5.0);
        let stopped = BudgetLevel::Stopped;
        assert_eq!(full.stricter(reduced), reduced);
        assert_eq!(reduced.stricter(full), reduced);
        assert_eq!(reduced.stricter(stopped), stopped);
        assert_eq!(stopped.stricter(full), stopped);
    }

    #[test]
    fn no_healthy_peer_and_no_same_origin_hedging_means_no_hedge() {
        let mut gate = funded(HedgeGate::new(
            &params(&[
                ("HEDGE_ORIGINS", r#"[{"name":"a","url":"http://a"}]"#),
                ("HEDGE_TUNING", r#"{"same_origin_hedge":false}"#),
            ]),
            0.0,
        ));
        assert_eq!(gate.permit(0, 0.0, true), Err(HedgeDenied::NoTarget));
    }

    #[test]
    fn a_straggler_is_hedged_on_its_primary_rather_than_on_a_slow_peer() {
        let two = params(&[(
            "HEDGE_ORIGINS",
            r#"[{"name":"a","url":"http://a"},{"name":"b","url":"http://b"}]"#,
        )]);
        let mut gate = funded(HedgeGate::new(&two, 0.0));
        // 60 answers at a time (past the 50 a running percentile needs):
        // a's take 40 ms, b's 60 ms, then 120 ms.
        let answer = |gate: &mut HedgeGate, origin: usize, ms: f64| {
            for _ in 0..60 {
                let id = gate.load.leg_sent(origin, 0.0);
                gate.load.leg_answered(origin, id, ms, false, ms);
            }
        };
        answer(&mut gate, 0, 40.0);
        answer(&mut gate, 1, 60.0);
        assert_eq!(gate.permit(0, 1.0, true), Ok(1), "1.5x: the peer");
        answer(&mut gate, 1, 120.0);
        assert!(gate.load.fast_ms(1).is_some_and(|ms| ms > 80.0));
        assert_eq!(gate.permit(0, 2.0, true), Ok(0), "3x: a new request on a");
        assert_eq!(gate.likely_target(0, 2.0), Some(0));
        // The slow origin's own stragglers still go to the fast one, and a
        // stall's hedges leave the primary whatever the peer's speed.
        assert_eq!(gate.permit(1, 3.0, true), Ok(0));
        assert_eq!(gate.permit_urgent(0, 4.0, Urgency::Stall, false), Ok(1));
    }
}
