//! The per-isolate Hedger: what every race reads and writes (latency
//! estimates, the hedge gate with budget and origin health, the PoP view,
//! the delay planner), and the plan of a request's race.
//! Its event handlers are in `events.rs`.

use std::rc::Rc;

use super::plan::{RacePlan, Route};
use crate::admission::hedge_gate::{GateParams, HedgeGate};
use crate::admission::isolate_lag::IsolateLag;
use crate::admission::payoff::{HedgePayoff, ThirdAttempts};
use crate::config::{Params, RouteMode};
use crate::estimation::delay_plan::{
    DelayPlanner, LikelyTarget, PlanParams, RouteDelay, RouteRules,
};
use crate::estimation::delay_policy::{DelayBasis, DelayChoice, HedgeMode};
use crate::estimation::estimator::LatencyEstimator;
use crate::no_hedge::NoHedge;
use crate::pop::link::{PopLink, PopLinkParams};
use crate::request::eligibility::Eligibility;

/// Per-isolate hedging state and decisions.
#[derive(Debug)]
pub struct Hedger {
    pub(super) params: Rc<Params>,
    /// Latency per origin and route key.
    pub estimator: LatencyEstimator,
    /// Budget, origin health and the hedge target choice.
    pub gate: HedgeGate,
    /// The PoP aggregate as this isolate sees it.
    pub pop: PopLink,
    /// The hedge delay per primary and route.
    pub(super) delays: DelayPlanner,
    /// How late the isolate's own event loop runs.
    pub isolate_lag: IsolateLag,
    /// Per cause and origin, whether hedges pay.
    pub payoff: HedgePayoff,
    /// The allowance of third attempts.
    pub third: ThirdAttempts,
}

// === impl Hedger ===

impl Hedger {
    /// A Hedger for `params` at `now_ms`; `pop_enabled` when the aggregator
    /// is bound; `seed` draws its random choices (isolates need different ones).
    pub fn new(params: Params, pop_enabled: bool, now_ms: f64, seed: u64) -> Self {
        let params = Rc::new(params);
        Self {
            delays: DelayPlanner::new(
                PlanParams {
                    mode: params.mode,
                    policy: params.policy,
                    delay: params.delay,
                    budget_share: params.budget.percent / 100.0,
                },
                params.estimator.max_route_keys,
                params.estimator.window,
                now_ms,
            ),
            estimator: LatencyEstimator::new(params.estimator),
            gate: HedgeGate::new(
                &GateParams {
                    seed,
                    ..params.gate()
                },
                now_ms,
            ),
            isolate_lag: IsolateLag::new(params.guards.busy_lag_ms),
            payoff: HedgePayoff::new(params.origins.len(), params.guards.cut_unpaid),
            third: ThirdAttempts::default(),
            pop: PopLink::new(PopLinkParams {
                enabled: pop_enabled,
                ..params.pop.link
            }),
            params,
        }
    }

    /// The configuration it runs on (shared: cloning the `Rc` copies nothing).
    pub fn params(&self) -> &Rc<Params> {
        &self.params
    }

    /// The origin a new request goes to first (by recent latency and load
    /// under the tail-aware policy, else the first healthy one in order),
    /// among those the request in the gate's scope may use. Private: every
    /// caller sets the scope first.
    fn choose_primary(&mut self, now_ms: f64) -> usize {
        if self.params.origin_load.by_latency {
            self.gate.choose_primary_by_load(now_ms)
        } else {
            self.gate.choose_primary(now_ms)
        }
    }

    /// The primary for a request under route policy `route_policy` that
    /// runs no race (a WebSocket upgrade): among the route's own origins.
    pub fn choose_primary_for(&mut self, route_policy: Option<usize>, now_ms: f64) -> usize {
        self.gate.scope(route_policy);
        self.choose_primary(now_ms)
    }

    /// Its primary, hedge delay and (when it gets none) why, for a request
    /// on route key `route` under no route policy.
    pub fn plan(&mut self, eligibility: Eligibility, route: &str, now_ms: f64) -> RacePlan {
        self.plan_for(eligibility, &Route::key(route), now_ms)
    }

    /// [`Hedger::plan`] for a request on `route`: its route policy's
    /// origins, mode, budget and timeout.
    pub fn plan_for(&mut self, eligibility: Eligibility, route: &Route, now_ms: f64) -> RacePlan {
        self.gate.scope(route.policy);
        let policy = route.policy.and_then(|i| self.params.routes.get(i));
        let mode = policy.and_then(|p| p.mode);
        let timeout_ms = policy
            .and_then(|p| p.timeout_ms)
            .unwrap_or(self.params.timeout_ms);
        let own_budget = self.own_budget(route.policy);
        let primary = self.choose_primary(now_ms);
        let hedgeable = matches!(eligibility, Eligibility::Hedgeable { .. });
        let peer_only = matches!(
            eligibility,
            Eligibility::Hedgeable {
                peer_only: true,
                ..
            }
        );
        // A route with its own budget has its own PoP share, apart from the global one.
        self.pop
            .note_request(primary, &route.key, hedgeable && own_budget.is_none());
        if hedgeable && own_budget.is_some() {
            self.pop.note_route_request(&route.key);
        }
        let (delay, no_hedge) = match (eligibility, mode) {
            (Eligibility::NotHedgeable(reason), _) => (None, Some(NoHedge::NotEligible(reason))),
            // Hedging off for the route: what HEDGE_MODE=off does, no more.
            (_, Some(RouteMode::Off)) => (None, Some(NoHedge::Off)),
            (_, Some(RouteMode::Static { delay_ms })) => self.static_delay(delay_ms, now_ms),
            (Eligibility::Hedgeable { .. }, _) => self.choose_delay(primary, route, now_ms),
        };
        if delay.is_some() {
            self.third.deposit();
        }
        let retry = matches!(self.params.mode, HedgeMode::Retry { .. });
        let stall_check_ms = match (delay, retry) {
            (Some(d), false) => {
                (self.gate.load.stall_after_ms(primary)).filter(|&ms| ms < d.delay_ms)
            }
            _ => None,
        };
        RacePlan {
            primary,
            route: route.clone(),
            delay,
            no_hedge,
            retry,
            peer_only,
            stall_check_ms,
            timeout_ms,
        }
    }

    /// The budget percentage of route policy `route_policy`, when it has its own.
    pub(super) fn own_budget(&self, route_policy: Option<usize>) -> Option<f64> {
        route_policy
            .and_then(|i| self.params.routes.get(i))
            .and_then(|p| p.budget_percent)
    }

    /// Whether the PoP is over the budget this request spends from: its
    /// route's own share against its own budget, else the global one.
    pub(super) fn pop_over_budget(
        &self,
        route: &str,
        own_budget: Option<f64>,
        now_ms: f64,
    ) -> bool {
        match own_budget {
            Some(percent) => self.pop.route_over_budget(route, percent / 100.0, now_ms),
            None => (self.pop).over_budget(self.params.budget.percent / 100.0, now_ms),
        }
    }

    /// A route's fixed delay (its policy's `mode: static`), within the budget.
    fn static_delay(
        &mut self,
        delay_ms: f64,
        now_ms: f64,
    ) -> (Option<DelayChoice>, Option<NoHedge>) {
        // The PoP's budget is checked when a hedge would go out (a fast
        // failure's retry still may): `hedge_pays`.
        self.gate.deposit(now_ms);
        let choice = DelayChoice {
            delay_ms,
            basis: DelayBasis::Static,
        };
        (Some(choice), None)
    }

    fn choose_delay(
        &mut self,
        primary: usize,
        route: &Route,
        now_ms: f64,
    ) -> (Option<DelayChoice>, Option<NoHedge>) {
        // Whether the PoP is over the budget this request spends from is
        // asked when a hedge would go out (`hedge_pays`): a fast failure's
        // retry still goes then, a straggler's hedge does not.
        let choice = (self.route_delay_for(primary, route, now_ms)).choice;
        if choice.is_some() {
            self.gate.deposit(now_ms);
        }
        (choice, choice.is_none().then_some(NoHedge::Off))
    }

    /// The hedge delay for `primary`'s requests on `route` at `now_ms`, and
    /// what the benefit rule predicts for it (also for the stats page).
    /// A route key that is a route policy's name runs on that policy's
    /// delay rule, budget share and origins.
    pub fn route_delay(&mut self, primary: usize, route: &str, now_ms: f64) -> RouteDelay {
        let route = Route {
            key: route.to_string(),
            policy: (self.params.routes.iter()).position(|r| r.name == route),
        };
        self.route_delay_for(primary, &route, now_ms)
    }

    /// [`Hedger::route_delay`] for a request on `route` (its plan knows the
    /// route policy: no look-up by name on a request's path).
    fn route_delay_for(&mut self, primary: usize, route: &Route, now_ms: f64) -> RouteDelay {
        let rules = route
            .policy
            .and_then(|i| self.params.routes.get(i))
            .map_or_else(RouteRules::default, |r| RouteRules {
                policy: r.policy,
                budget_share: r.budget_percent.map(|p| p / 100.0),
            });
        self.gate.scope(route.policy);
        let (pop, gate) = (&self.pop, &mut self.gate);
        let key = &route.key;
        self.delays.route_delay(
            &mut self.estimator,
            primary,
            key,
            now_ms,
            rules,
            || pop.estimate(primary, key, now_ms),
            || {
                let origin = gate.likely_target(primary, now_ms).unwrap_or(primary);
                LikelyTarget {
                    origin,
                    share: gate.target_share(origin, now_ms),
                    slower_primary: gate.slower(primary, origin),
                }
            },
        )
    }
}
