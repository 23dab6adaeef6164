//! The per-isolate Hedger: the decisions of every request's race, driven by
//! events, with no I/O.
//!
//! It owns what the races read and write (the latency estimator, the hedge
//! gate with budget and origin health, the PoP view and the route counters).
//! The Worker asks it for a [`RacePlan`] when a request arrives, then feeds it
//! each event of the race (the hedge timer fired, a leg answered or failed,
//! the deadline passed, the client left) and does what the returned
//! [`Action`] says. Time is passed in, so tests drive a race event by event
//! on a clock they set.
//!
//! It also holds the isolate's request-level state: which routes answer
//! storably (cache lookups and coalescing), the coalesced flights, and the
//! bytes of request bodies held for replay. [`Hedger::arrive`] says what a
//! cacheable request does first (look in the cache, lead or wait on a
//! coalesced fetch) before the race.

use std::collections::HashSet;
use std::rc::Rc;

use crate::admission::health::Outcome;
use crate::admission::hedge_gate::{GateParams, HedgeGate, Urgency};
use crate::cache::invalidation::Invalidations;
use crate::cache::policy::CacheRoutes;
use crate::capped_map::CappedMap;
use crate::config::{HedgePolicy, Params};
use crate::estimation::delay_policy::{choose_delay, DelayBasis, DelayChoice, HedgeMode};
use crate::estimation::estimator::{Estimates, LatencyEstimator};
use crate::estimation::hedge_benefit::{best_delay, share_slower, shifted, BenefitChoice};
use crate::estimation::sketch::Sample;
use crate::no_hedge::NoHedge;
use crate::observe::route_stats::{RaceSummary, RouteStats};
use crate::pop::client::{PopClient, PopClientParams};
use crate::race::{classify_status, health_outcome, Leg, LegOutcome, Race, Step};
use crate::request::coalesce::{Coalescer, Role};
use crate::request::eligibility::Eligibility;
use crate::request::held_bodies::HeldBodies;

/// What the Hedger decided for a request before any origin is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct RacePlan {
    /// Index of the primary origin.
    pub primary: usize,
    /// Route key latency is recorded under.
    pub route: String,
    /// The hedge delay, or `None` when this request is never hedged.
    pub delay: Option<DelayChoice>,
    /// Why this request is never hedged, when it is not.
    pub no_hedge: Option<NoHedge>,
    /// Classic timeout-and-retry instead of a hedge (`HEDGE_MODE=retry`):
    /// the timer abandons the primary, and the retry is not charged.
    pub retry: bool,
    /// The second leg must go to another origin, never the primary's own
    /// (an idempotency-keyed request, any method but GET and HEAD).
    pub peer_only: bool,
    /// Before the hedge delay, look once at this time whether the primary's
    /// origin has stalled (tail-aware policy; `None`: the delay comes first).
    pub stall_check_ms: Option<f64>,
}

impl RacePlan {
    /// When the race's timer first fires, ms after the start: the stall
    /// check, else the hedge delay; `None` without either.
    pub fn first_timer_ms(&self) -> Option<f64> {
        self.stall_check_ms.or(self.delay.map(|d| d.delay_ms))
    }
}

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

/// What one leg did, for headers, error bodies, logs and stats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LegRecord {
    /// The origin it went to.
    pub origin: usize,
    /// When it was sent.
    pub started_ms: Option<f64>,
    /// When its answer (or failure) arrived.
    pub finished_ms: Option<f64>,
    /// The answer's status.
    pub status: Option<u16>,
    /// The runtime's error, when it failed without an answer (logs only).
    pub error: Option<String>,
    /// Cut short (lost, timed out, client gone) before it answered.
    pub aborted: bool,
    /// Its id in the origin load tracker, once sent.
    pub load_id: Option<u64>,
}

impl LegRecord {
    /// Milliseconds from the leg's start to its answer (or to `now_ms` if unfinished).
    pub fn elapsed_ms(&self, now_ms: f64) -> Option<f64> {
        self.started_ms
            .map(|start| self.finished_ms.unwrap_or(now_ms) - start)
    }
}

/// How a race ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceEnd {
    /// This leg's answer goes to the client.
    Won(Leg),
    /// Only the primary ran and it failed retriably: its failure goes to the
    /// client as it is.
    PrimaryFailed,
    /// Both legs failed retriably. `answered` is the leg whose own HTTP
    /// answer (a 5xx, or a hedge's refusal) goes to the client, unchanged: the
    /// primary's when both answered, else the one that did; `None` when no
    /// origin answered at all (the Worker then says so in a 502).
    BothFailed {
        /// The leg whose answer is delivered.
        answered: Option<Leg>,
    },
    /// No leg answered within the timeout.
    TimedOut,
    /// The client went away first.
    ClientGone,
}

impl RaceEnd {
    /// The leg whose response goes to the client, if any; every other leg
    /// is aborted.
    pub fn kept_leg(self) -> Option<Leg> {
        match self {
            RaceEnd::Won(leg) => Some(leg),
            RaceEnd::PrimaryFailed => Some(Leg::Primary),
            RaceEnd::BothFailed { answered } => answered,
            RaceEnd::TimedOut | RaceEnd::ClientGone => None,
        }
    }
}

/// The I/O behind the Hedger's actions, which the Worker (real fetches) and
/// the simulator (modelled origins) each provide; [`Hedger::perform`] is the
/// one loop that drives it.
pub trait RaceIo {
    /// Cuts `leg` short (a no-op for a leg that never went out); a leg that
    /// already answered is cut too, so its unread body is released.
    fn abort(&mut self, leg: Leg);
    /// Sends the hedge to `origin`; `false` when it could not even be built
    /// (the origin was never asked).
    fn send_hedge(&mut self, origin: usize) -> bool;
}

/// One request's race: its plan, the state machine and what each leg did
/// (one record per leg, indexed by [`Leg::index`]).
#[derive(Debug, Clone)]
pub struct RaceState {
    /// The plan the race runs.
    pub plan: RacePlan,
    race: Race,
    /// What each leg did, by [`Leg::index`].
    pub legs: [LegRecord; 2],
    /// Why no hedge went out: the plan's reason, or the gate's refusal.
    pub no_hedge: Option<NoHedge>,
    /// How it ended, once it has.
    pub end: Option<RaceEnd>,
    /// Why the hedge was asked for, once it was.
    pub hedge_cause: Option<HedgeCause>,
    /// The stall check has not fired yet.
    stall_check_pending: bool,
    /// The timer must be set again, this many ms from now (after a stall
    /// check that found none, for the rest of the hedge delay).
    rearm_ms: Option<f64>,
}

impl RaceState {
    /// Takes a pending timer change: the driver sets its hedge timer to fire
    /// this many ms from now.
    pub fn take_rearm(&mut self) -> Option<f64> {
        self.rearm_ms.take()
    }

    /// What `leg` did.
    pub fn leg(&self, leg: Leg) -> &LegRecord {
        &self.legs[leg.index()]
    }

    /// Whether a hedge went out.
    pub fn hedge_sent(&self) -> bool {
        self.race.hedge_sent()
    }

    /// What the race contributes to the route counters, at `now_ms`.
    pub fn summary(&self, client_error: bool, now_ms: f64) -> RaceSummary {
        let elapsed = |l: &LegRecord| l.elapsed_ms(now_ms).unwrap_or(0.0);
        RaceSummary {
            hedge_sent: self.hedge_sent(),
            hedge_won: self.end == Some(RaceEnd::Won(Leg::Hedge)),
            error: client_error,
            wasted_ms: self.legs.iter().filter(|l| l.aborted).map(elapsed).sum(),
            origin_ms: self.legs.iter().map(elapsed).sum(),
        }
    }
}

/// What the Worker must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: wait for the next event.
    Wait,
    /// Send the hedge to this origin (first aborting the primary, in the
    /// retry mode), then report [`Hedger::hedge_sent`] or
    /// [`Hedger::hedge_not_sent`].
    SendHedge {
        /// The origin to send it to.
        origin: usize,
        /// Abort the primary first (retry mode: its time ran out).
        abort_primary: bool,
    },
    /// The race is over ([`RaceState::end`] says how): abort every leg but
    /// the winner, and answer.
    Finish(RaceEnd),
}

/// Per-isolate hedging state and decisions.
#[derive(Debug)]
pub struct Hedger {
    params: Rc<Params>,
    /// Latency per origin and route key.
    pub estimator: LatencyEstimator,
    /// Budget, origin health and the hedge target choice.
    pub gate: HedgeGate,
    /// The PoP aggregate as this isolate sees it.
    pub pop: PopClient,
    /// Per-route counters for the stats.
    pub route_stats: RouteStats,
    /// Which routes answer storably.
    pub cache_routes: CacheRoutes,
    /// Identical concurrent misses in flight.
    pub coalescer: Coalescer,
    /// Request-body bytes held for replay.
    pub held_bodies: HeldBodies,
    /// When each URL was last invalidated by a write.
    invalidations: Invalidations,
    /// Cache keys being refreshed in the background (stale-while-revalidate).
    refreshes: HashSet<String>,
    /// The delay by predicted benefit per (primary, route), recently computed.
    benefit: CappedMap<(usize, String), BenefitCache>,
    /// Recent share of hedgeable requests that needed an urgent hedge
    /// (stall, fast failure), averaged over about the last 1,000.
    urgent_share: f64,
}

/// A delay by predicted benefit and when it was computed.
#[derive(Debug, Clone, Copy)]
struct BenefitCache {
    at_ms: f64,
    choice: Option<BenefitChoice>,
}

/// How often a route's delay by predicted benefit is recomputed, ms.
const BENEFIT_REFRESH_MS: f64 = 1_000.0;
/// Samples a route needs before its 1% tail is trusted.
const BENEFIT_MIN_SAMPLES: u64 = 500;
/// Share of the budget that delay hedges may plan on; the rest is for
/// failure retries and stall hedges.
const BENEFIT_BUDGET_SHARE: f64 = 0.9;
/// Urgent hedges' recent share is reserved this many times over.
const URGENT_RESERVE: f64 = 1.5;
/// Weight of one request in `urgent_share`.
const URGENT_WEIGHT: f64 = 0.001;

/// Most background refreshes one isolate runs at once.
pub const MAX_REFRESHES: usize = 256;

/// Routes never seen to produce a storable response are looked up in the
/// cache one request in this many.
const CACHE_PROBE_EVERY: u64 = 64;

/// What a cacheable request does before any race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Lead a coalesced fetch, wait on one, or go alone.
    pub role: Role,
    /// Look in the cache first.
    pub look_up_cache: bool,
}

// === impl Hedger ===

impl Hedger {
    /// A Hedger for `params` at `now_ms`; `pop_enabled` when the aggregator
    /// is bound; `seed` draws its random choices (isolates need different ones).
    pub fn new(params: Params, pop_enabled: bool, now_ms: f64, seed: u64) -> Self {
        let params = Rc::new(params);
        Self {
            urgent_share: 0.0,
            benefit: CappedMap::new(
                params.estimator.max_route_keys,
                params.estimator.window.window_ms,
            ),
            estimator: LatencyEstimator::new(params.estimator),
            gate: HedgeGate::new(
                &GateParams {
                    seed,
                    ..params.gate()
                },
                now_ms,
            ),
            route_stats: RouteStats::new(params.estimator.max_route_keys),
            cache_routes: CacheRoutes::new(CACHE_PROBE_EVERY),
            coalescer: Coalescer::new(params.coalesce),
            held_bodies: HeldBodies::new(params.max_held_body_bytes),
            invalidations: Invalidations::new(),
            refreshes: HashSet::new(),
            pop: PopClient::new(PopClientParams {
                enabled: pop_enabled,
                ..params.pop.client
            }),
            params,
        }
    }

    /// The configuration it runs on (shared: cloning the `Rc` copies nothing).
    pub fn params(&self) -> &Rc<Params> {
        &self.params
    }

    /// A request for `url` on `route` arrives at `now_ms`; `cacheable` when
    /// it may be served from the cache. Identical concurrent misses share one
    /// fetch only on routes whose latest answer was storable: elsewhere a
    /// waiter would wait for the leader only to fetch for itself.
    pub fn arrive(&mut self, url: &str, route: &str, cacheable: bool, now_ms: f64) -> Arrival {
        if !cacheable {
            return Arrival {
                role: Role::Alone,
                look_up_cache: false,
            };
        }
        let role = if self.cache_routes.should_coalesce(route) {
            self.coalescer.join(url, now_ms)
        } else {
            Role::Alone
        };
        Arrival {
            role,
            look_up_cache: self.cache_routes.should_lookup(route),
        }
    }

    /// A cacheable request on `route` was answered with a response that was
    /// (or, for `false`, was not) storable; a cache hit counts as storable.
    pub fn cache_answer(&mut self, route: &str, storable: bool) {
        if storable {
            self.cache_routes.learn(route);
        } else {
            self.cache_routes.learn_unstorable(route);
        }
    }

    /// A write to `url` succeeded at `now_ms`: a fetch begun before it may
    /// not store its answer, and a coalesced flight for it takes no new
    /// waiters (they would get the answer from before the write).
    pub fn invalidate(&mut self, url: &str, now_ms: f64) {
        self.invalidations.record(url, now_ms);
        self.coalescer.forget(url);
    }

    /// Whether an answer for `url` requested at `requested_ms` may be
    /// stored: not when a write invalidated `url` since.
    pub fn may_store(&self, url: &str, requested_ms: f64) -> bool {
        !self.invalidations.since(url, requested_ms)
    }

    /// Claims the background refresh of cache key `key`; `false` when one
    /// is already running (a stale entry is refreshed once, however many
    /// requests it serves meanwhile) or too many are.
    pub fn begin_refresh(&mut self, key: &str) -> bool {
        if self.refreshes.len() >= MAX_REFRESHES || self.refreshes.contains(key) {
            return false;
        }
        self.refreshes.insert(key.to_string())
    }

    /// The background refresh of `key` is over.
    pub fn end_refresh(&mut self, key: &str) {
        self.refreshes.remove(key);
    }

    /// Its primary, hedge delay and (when it gets none) why.
    pub fn plan(&mut self, eligibility: Eligibility, route: &str, now_ms: f64) -> RacePlan {
        let primary = if self.params.origin_load.by_latency {
            self.gate.choose_primary_by_load(now_ms)
        } else {
            self.gate.choose_primary(now_ms)
        };
        let hedgeable = matches!(eligibility, Eligibility::Hedgeable { .. });
        let peer_only = matches!(
            eligibility,
            Eligibility::Hedgeable {
                peer_only: true,
                ..
            }
        );
        self.pop.note_request(primary, route, hedgeable);
        let (delay, no_hedge) = match eligibility {
            Eligibility::NotHedgeable(reason) => (None, Some(NoHedge::NotEligible(reason))),
            Eligibility::Hedgeable { .. } => self.choose_delay(primary, route, now_ms),
        };
        let retry = matches!(self.params.mode, HedgeMode::Retry { .. });
        let stall_check_ms = match (delay, retry) {
            (Some(d), false) => {
                (self.gate.load.stall_after_ms(primary)).filter(|&ms| ms < d.delay_ms)
            }
            _ => None,
        };
        RacePlan {
            primary,
            route: route.to_string(),
            delay,
            no_hedge,
            retry,
            peer_only,
            stall_check_ms,
        }
    }

    fn choose_delay(
        &mut self,
        primary: usize,
        route: &str,
        now_ms: f64,
    ) -> (Option<DelayChoice>, Option<NoHedge>) {
        let p = &self.params;
        // The PoP as a whole is over the budget: no hedging here until it is back under.
        if self.pop.over_budget(p.budget.percent / 100.0, now_ms) {
            return (None, Some(NoHedge::PopOverBudget));
        }
        // Only the adaptive mode reads the estimates.
        let estimates = match p.mode {
            HedgeMode::Adaptive => Estimates {
                pop: self.pop.estimate(primary, route, now_ms),
                ..self
                    .estimator
                    .estimates(primary, route, p.delay.quantile, now_ms)
            },
            _ => Estimates::default(),
        };
        let benefit = match (p.mode, p.policy) {
            (HedgeMode::Adaptive, HedgePolicy::TailAware) => {
                self.benefit_delay(primary, route, now_ms)
            }
            _ => None,
        };
        let p = &self.params;
        let choice = benefit.or_else(|| choose_delay(p.mode, &p.delay, &estimates));
        if choice.is_some() {
            self.gate.deposit(now_ms);
        }
        (choice, choice.is_none().then_some(NoHedge::Off))
    }

    /// The delay by predicted benefit for `primary`'s requests on `route`,
    /// when the route has the data for it; else `None` and the quantile
    /// decides.
    fn benefit_delay(&mut self, primary: usize, route: &str, now_ms: f64) -> Option<DelayChoice> {
        let (min_ms, max_ms) = (
            self.params.delay.min_delay_ms,
            self.params.delay.max_delay_ms,
        );
        self.benefit(primary, route, now_ms).map(|b| DelayChoice {
            delay_ms: b.delay_ms.clamp(min_ms, max_ms),
            basis: DelayBasis::Benefit,
        })
    }

    /// The delay by predicted benefit for `primary`'s requests on `route`
    /// and what it is predicted to do (recomputed at most once a second per
    /// key; also for the stats). `None` until the route, or its origin over
    /// all routes, has the data.
    pub fn benefit(&mut self, primary: usize, route: &str, now_ms: f64) -> Option<BenefitChoice> {
        let key = (primary, route.to_string());
        if let Some(cached) = self.benefit.get_mut(&key, now_ms) {
            if now_ms - cached.at_ms < BENEFIT_REFRESH_MS {
                return cached.choice;
            }
        }
        let p = &self.params;
        // Delay hedges plan on what urgent ones (stalls, failures) leave.
        let max_share = (p.budget.percent / 100.0 * BENEFIT_BUDGET_SHARE
            - URGENT_RESERVE * self.urgent_share)
            .max(0.0);
        let min_samples = p.delay.min_data_points.max(BENEFIT_MIN_SAMPLES);
        let target = self.gate.likely_target(primary, now_ms).unwrap_or(primary);
        // A target whose 5xx rate cut its share takes no more than that.
        let max_share =
            max_share.min(self.gate.target_share(target, now_ms) * BENEFIT_BUDGET_SHARE);
        // The route's own samples, else the origin's over all its routes
        // (as the quantile falls back), so a route with little traffic of
        // its own is not left on the quantile.
        let x = self
            .estimator
            .samples(primary, route, min_samples, now_ms)?;
        let y = self.estimator.samples(target, route, min_samples, now_ms);
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

    /// The primary is sent at `now_ms`: the race begins.
    pub fn start(&mut self, plan: RacePlan, now_ms: f64) -> RaceState {
        let hedge_possible = plan.delay.is_some();
        let race = if plan.retry {
            Race::retry(hedge_possible)
        } else {
            Race::new(hedge_possible)
        };
        let primary = LegRecord {
            origin: plan.primary,
            started_ms: Some(now_ms),
            load_id: Some(self.gate.load.leg_sent(plan.primary, now_ms)),
            ..LegRecord::default()
        };
        let hedge = LegRecord {
            origin: plan.primary,
            ..LegRecord::default()
        };
        RaceState {
            no_hedge: plan.no_hedge,
            stall_check_pending: plan.stall_check_ms.is_some(),
            plan,
            race,
            legs: [primary, hedge],
            end: None,
            hedge_cause: None,
            rearm_ms: None,
        }
    }

    /// The hedge delay (or retry timeout) ran out.
    pub fn timer_fired(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        if state.end.is_some() {
            return Action::Wait;
        }
        let cause = if std::mem::take(&mut state.stall_check_pending) {
            let primary = state.plan.primary;
            if !self.gate.load.stalled(primary, now_ms) {
                // No stall yet: look again at half the stall silence (a
                // stall that began after this request did shows up later),
                // up to the hedge delay.
                if let (Some(delay), Some(start)) = (state.plan.delay, state.legs[0].started_ms) {
                    let to_delay = (start + delay.delay_ms - now_ms).max(0.0);
                    let next_check = self.gate.load.stall_after_ms(primary).map(|ms| ms / 2.0);
                    state.rearm_ms = Some(match next_check {
                        Some(ms) if ms < to_delay => {
                            state.stall_check_pending = true;
                            ms
                        }
                        _ => to_delay,
                    });
                    return Action::Wait;
                }
            }
            HedgeCause::Stall
        } else if self.gate.load.stalled(state.plan.primary, now_ms) {
            // The delay ran out on a stalled origin: as urgent as a stall.
            HedgeCause::Stall
        } else {
            HedgeCause::Delay
        };
        let step = state.race.timer_fired();
        if step == Step::StartHedge {
            state.hedge_cause = Some(cause);
        }
        self.step(state, step, now_ms)
    }

    /// `leg` finished: `Ok(status)` for an answer, `Err(error)` for a failure
    /// without one (a connection error, with the runtime's text for the logs).
    pub fn leg_finished(
        &mut self,
        state: &mut RaceState,
        leg: Leg,
        answer: Result<u16, String>,
        now_ms: f64,
    ) -> Action {
        // Events after the end (a late answer) change nothing.
        if state.end.is_some() {
            return Action::Wait;
        }
        let record = &mut state.legs[leg.index()];
        record.finished_ms = Some(now_ms);
        let (health, outcome) = match answer {
            Ok(status) => {
                record.status = Some(status);
                (health_outcome(leg, status), classify_status(leg, status))
            }
            Err(error) => {
                record.error = Some(error);
                (Outcome::Unreachable, LegOutcome::RetriableFailure)
            }
        };
        let origin = record.origin;
        if let (Some(id), Some(elapsed)) = (record.load_id, record.elapsed_ms(now_ms)) {
            let failed = health != Outcome::Success;
            self.gate
                .load
                .leg_answered(origin, id, elapsed, failed, now_ms);
        }
        self.book(origin, health, now_ms);
        let step = state.race.leg_finished(leg, outcome);
        if step == Step::StartHedge && leg == Leg::Primary {
            state.hedge_cause = Some(HedgeCause::Failure);
        }
        self.step(state, step, now_ms)
    }

    /// Performs `action`, and any action that follows from it, through `io`:
    /// `None` while the race waits for its next event, `Some(end)` once it
    /// is over, with every leg but the kept one already aborted (first: every
    /// millisecond a loser runs is wasted origin work).
    pub fn perform(
        &mut self,
        state: &mut RaceState,
        mut action: Action,
        now_ms: f64,
        io: &mut impl RaceIo,
    ) -> Option<RaceEnd> {
        loop {
            match action {
                Action::Wait => return None,
                Action::SendHedge {
                    origin,
                    abort_primary,
                } => {
                    if abort_primary {
                        io.abort(Leg::Primary);
                    }
                    if io.send_hedge(origin) {
                        self.hedge_sent(state, now_ms);
                        return None;
                    }
                    action = self.hedge_not_sent(state, now_ms);
                }
                Action::Finish(end) => {
                    for leg in [Leg::Primary, Leg::Hedge] {
                        if Some(leg) != end.kept_leg() {
                            io.abort(leg);
                        }
                    }
                    return Some(end);
                }
            }
        }
    }

    /// The hedge went out at `now_ms`.
    pub fn hedge_sent(&mut self, state: &mut RaceState, now_ms: f64) {
        let hedge = &mut state.legs[Leg::Hedge.index()];
        hedge.started_ms = Some(now_ms);
        hedge.load_id = Some(self.gate.load.leg_sent(hedge.origin, now_ms));
        self.pop.record_hedge();
        state.race.hedge_started();
    }

    /// The Worker could not build the hedge: the origin was never asked, so
    /// it is not blamed, and a recovery trial the permit claimed is given back.
    pub fn hedge_not_sent(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        let target = state.legs[Leg::Hedge.index()].origin;
        self.gate.abandoned(target, now_ms);
        let step = state.race.hedge_declined();
        self.step(state, step, now_ms)
    }

    /// No answer within the timeout: every leg in flight is cut short, a
    /// failure of its origin.
    pub fn deadline_passed(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        if state.end.is_some() {
            return Action::Wait;
        }
        self.cut_pending(state, CutShort::TimedOut, now_ms);
        self.finish(state, RaceEnd::TimedOut)
    }

    /// The client went away: every leg in flight is cut short, which says
    /// nothing about its origin.
    pub fn client_gone(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        if state.end.is_some() {
            return Action::Wait;
        }
        self.cut_pending(state, CutShort::Lost, now_ms);
        self.finish(state, RaceEnd::ClientGone)
    }

    /// The request is done (its response went out): count it for the stats.
    /// `client_error` says the client got a 5xx or no origin answer.
    pub fn record_outcome(&mut self, state: &RaceState, client_error: bool, now_ms: f64) {
        let summary = state.summary(client_error, now_ms);
        self.route_stats
            .record(state.plan.primary, &state.plan.route, &summary);
    }

    fn step(&mut self, state: &mut RaceState, step: Step, now_ms: f64) -> Action {
        match step {
            Step::Wait => Action::Wait,
            Step::StartHedge => self.ask_for_hedge(state, false, now_ms),
            Step::AbandonPrimaryAndRetry => {
                // For a timeout-and-retry client, the timeout is the primary's failure.
                self.cut_short(state, Leg::Primary, CutShort::TimedOut, now_ms);
                self.ask_for_hedge(state, true, now_ms)
            }
            Step::Deliver(winner) => {
                let loser = winner.other();
                if state.race.is_pending(loser) {
                    self.cut_short(state, loser, CutShort::Lost, now_ms);
                }
                self.record_sample(state, winner, false, now_ms);
                self.finish(state, RaceEnd::Won(winner))
            }
            Step::DeliverPrimaryFailure => self.finish(state, RaceEnd::PrimaryFailed),
            Step::FailBoth => {
                // A proxy stays transparent: an origin's own failure answer
                // (its status, Retry-After, body) reaches the client.
                let answered = [Leg::Primary, Leg::Hedge]
                    .into_iter()
                    .find(|leg| state.leg(*leg).status.is_some());
                self.finish(state, RaceEnd::BothFailed { answered })
            }
        }
    }

    fn ask_for_hedge(&mut self, state: &mut RaceState, abort_primary: bool, now_ms: f64) -> Action {
        let plan = &state.plan;
        let urgency = match state.hedge_cause {
            _ if plan.retry || !self.params.policy.hedges_urgently() => None,
            Some(HedgeCause::Failure) => Some(Urgency::Failure),
            Some(HedgeCause::Stall) => Some(Urgency::Stall),
            Some(HedgeCause::Delay) | None => None,
        };
        let permit = if let Some(urgency) = urgency {
            self.gate
                .permit_urgent(plan.primary, now_ms, urgency, plan.peer_only)
        } else if plan.peer_only {
            self.gate.permit_to_peer(plan.primary, now_ms)
        } else {
            self.gate.permit(plan.primary, now_ms, !plan.retry)
        };
        match permit {
            Ok(origin) => {
                state.legs[Leg::Hedge.index()].origin = origin;
                Action::SendHedge {
                    origin,
                    abort_primary,
                }
            }
            Err(denied) => {
                state.no_hedge = Some(NoHedge::Denied(denied));
                let step = state.race.hedge_declined();
                self.step(state, step, now_ms)
            }
        }
    }

    fn finish(&mut self, state: &mut RaceState, end: RaceEnd) -> Action {
        state.end = Some(end);
        if state.plan.delay.is_some() {
            let urgent = state.race.hedge_sent()
                && matches!(
                    state.hedge_cause,
                    Some(HedgeCause::Stall | HedgeCause::Failure)
                );
            self.urgent_share += URGENT_WEIGHT * (f64::from(u8::from(urgent)) - self.urgent_share);
        }
        Action::Finish(end)
    }

    fn book(&mut self, origin: usize, outcome: Outcome, now_ms: f64) {
        self.gate.record(origin, outcome, now_ms);
        self.pop
            .record_response(origin, !matches!(outcome, Outcome::Success));
    }

    fn cut_pending(&mut self, state: &mut RaceState, why: CutShort, now_ms: f64) {
        for leg in [Leg::Primary, Leg::Hedge] {
            if state.race.is_pending(leg) {
                self.cut_short(state, leg, why, now_ms);
            }
        }
    }

    /// Books a leg cut short before it answered: its elapsed time as a
    /// censored latency sample, and what it says about its origin's health.
    fn cut_short(&mut self, state: &mut RaceState, leg: Leg, why: CutShort, now_ms: f64) {
        self.record_sample(state, leg, true, now_ms);
        let record = &mut state.legs[leg.index()];
        record.aborted = true;
        let origin = record.origin;
        if let Some(id) = record.load_id {
            self.gate.load.leg_cut(origin, id);
        }
        match why {
            CutShort::TimedOut => self.book(origin, Outcome::Unreachable, now_ms),
            CutShort::Lost => self.gate.abandoned(origin, now_ms),
        }
    }

    /// Records a leg's latency: a completion, or (cut short) a lower bound.
    fn record_sample(&mut self, state: &RaceState, leg: Leg, censored: bool, now_ms: f64) {
        let record = state.leg(leg);
        let Some(elapsed) = record.elapsed_ms(now_ms) else {
            return;
        };
        let sample = if censored {
            Sample::Censored(elapsed)
        } else {
            Sample::Completed(elapsed)
        };
        let route = &state.plan.route;
        self.estimator.record(record.origin, route, sample, now_ms);
        self.pop.record_sample(record.origin, route, sample);
    }
}

/// Why a leg in flight was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutShort {
    /// Its time ran out: a failure of its origin.
    TimedOut,
    /// The other leg won, or the client left: says nothing about its origin.
    Lost,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::hedge_gate::HedgeDenied;
    use crate::request::eligibility::NotHedgeableReason;
    use std::collections::BTreeMap;

    /// Two origins in two zones, a static 100 ms hedge delay, and a budget
    /// that a few requests fund (a new Hedger has earned no hedges).
    fn hedger(extra: &[(&str, &str)]) -> Hedger {
        let mut vars: BTreeMap<String, String> = BTreeMap::new();
        vars.insert(
            "HEDGE_ORIGINS".into(),
            r#"[{"name":"a","url":"http://a","zone":"z1"},{"name":"b","url":"http://b","zone":"z2"}]"#
                .into(),
        );
        vars.insert("HEDGE_MODE".into(), "static".into());
        vars.insert("HEDGE_STATIC_DELAY_MS".into(), "100".into());
        vars.insert("HEDGE_BUDGET_PERCENT".into(), "100".into());
        for (k, v) in extra {
            vars.insert(k.to_string(), v.to_string());
        }
        let params = crate::config::parse(&vars).expect("valid test config");
        let mut h = Hedger::new(params, false, 0.0, 1);
        // Earn a few tokens, as earlier requests would have.
        for _ in 0..5 {
            h.gate.deposit(0.0);
        }
        h
    }

    const GET: Eligibility = Eligibility::Hedgeable {
        buffer_body: false,
        peer_only: false,
    };

    fn start(h: &mut Hedger, now_ms: f64) -> RaceState {
        let plan = h.plan(GET, "/r", now_ms);
        h.start(plan, now_ms)
    }

    #[test]
    fn primary_answers_before_the_delay() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        assert_eq!(race.plan.delay.map(|d| d.delay_ms), Some(100.0));
        assert_eq!(
            h.leg_finished(&mut race, Leg::Primary, Ok(200), 40.0),
            Action::Finish(RaceEnd::Won(Leg::Primary))
        );
        assert_eq!(h.timer_fired(&mut race, 100.0), Action::Wait);
        assert!(!race.hedge_sent());
        assert_eq!(race.leg(Leg::Primary).elapsed_ms(40.0), Some(40.0));
    }

    #[test]
    fn hedge_wins_and_the_primary_is_cut_short() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        assert_eq!(
            h.timer_fired(&mut race, 100.0),
            Action::SendHedge {
                origin: 1,
                abort_primary: false
            }
        );
        h.hedge_sent(&mut race, 100.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(200), 130.0),
            Action::Finish(RaceEnd::Won(Leg::Hedge))
        );
        assert!(race.leg(Leg::Primary).aborted);
        let summary = race.summary(false, 130.0);
        assert!(summary.hedge_sent && summary.hedge_won);
        assert_eq!(summary.wasted_ms, 130.0);
        assert_eq!(summary.origin_ms, 160.0);
    }

    #[test]
    fn primary_answers_after_the_hedge_went_out() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        h.timer_fired(&mut race, 100.0);
        h.hedge_sent(&mut race, 100.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Primary, Ok(200), 120.0),
            Action::Finish(RaceEnd::Won(Leg::Primary))
        );
        assert!(race.leg(Leg::Hedge).aborted, "the hedge lost");
    }

    #[test]
    fn fast_failure_hedges_at_once() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Primary, Ok(503), 3.0),
            Action::SendHedge {
                origin: 1,
                abort_primary: false
            }
        );
        h.hedge_sent(&mut race, 3.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(200), 40.0),
            Action::Finish(RaceEnd::Won(Leg::Hedge))
        );
    }

    /// Teaches `h` that origin 0 answers in about 20 ms.
    fn learn_latency(h: &mut Hedger, at_ms: f64) {
        for i in 0..20 {
            let t = at_ms + f64::from(i);
            let mut race = start(h, t);
            h.leg_finished(&mut race, Leg::Primary, Ok(200), t + 20.0);
        }
    }

    #[test]
    fn a_stalled_origin_is_hedged_at_the_stall_check_before_the_delay() {
        let mut h = hedger(&[
            ("HEDGE_PRIMARY", "ordered"),
            ("HEDGE_STATIC_DELAY_MS", "1000"),
            ("HEDGE_STALL_FACTOR", "3"),
        ]);
        learn_latency(&mut h, 0.0);
        // Two requests go out at 100 ms and nothing answers: a 60 ms silence
        // (3 x 20 ms) with both in flight is a stall.
        let mut first = start(&mut h, 100.0);
        let mut second = start(&mut h, 100.0);
        assert_eq!(first.plan.first_timer_ms(), Some(60.0));
        assert_eq!(
            h.timer_fired(&mut first, 160.0),
            Action::SendHedge {
                origin: 1,
                abort_primary: false
            }
        );
        assert_eq!(first.hedge_cause, Some(HedgeCause::Stall));
        // New primaries avoid nothing in ordered mode, but the stall check
        // catches them too.
        assert!(matches!(
            h.timer_fired(&mut second, 160.0),
            Action::SendHedge { .. }
        ));
    }

    #[test]
    fn a_stall_check_that_finds_none_looks_again_then_waits_out_the_delay() {
        let mut h = hedger(&[
            ("HEDGE_PRIMARY", "ordered"),
            ("HEDGE_STATIC_DELAY_MS", "100"),
            ("HEDGE_STALL_FACTOR", "3"),
        ]);
        learn_latency(&mut h, 0.0);
        let mut slow = start(&mut h, 100.0);
        // Another request answers meanwhile: the origin is alive.
        let mut quick = start(&mut h, 120.0);
        h.leg_finished(&mut quick, Leg::Primary, Ok(200), 140.0);
        assert_eq!(h.timer_fired(&mut slow, 160.0), Action::Wait);
        // Half the silence later (30 ms) it looks again; then the delay.
        assert_eq!(slow.take_rearm(), Some(30.0));
        let mut another = start(&mut h, 170.0);
        h.leg_finished(&mut another, Leg::Primary, Ok(200), 185.0);
        assert_eq!(h.timer_fired(&mut slow, 190.0), Action::Wait);
        assert_eq!(slow.take_rearm(), Some(10.0));
        assert!(matches!(
            h.timer_fired(&mut slow, 200.0),
            Action::SendHedge { .. }
        ));
        assert_eq!(slow.hedge_cause, Some(HedgeCause::Delay));
    }

    #[test]
    fn a_fast_failure_is_retried_even_when_its_origin_budget_is_cut() {
        let vars = [("HEDGE_PRIMARY", "ordered"), ("HEDGE_BUDGET_PERCENT", "12")];
        for (policy, retried) in [("tail-aware", true), ("fixed-quantile", false)] {
            let mut h = hedger(&[vars[0], vars[1], ("HEDGE_POLICY", policy)]);
            // Origin 0 answers 503 to a quarter of 40 requests: its budget
            // is cut to the reduced share, whose bucket is then empty.
            for i in 0..40 {
                let t = f64::from(i);
                let mut race = start(&mut h, t);
                let status = if i % 4 == 0 { 503 } else { 200 };
                if let Action::SendHedge { .. } =
                    h.leg_finished(&mut race, Leg::Primary, Ok(status), t)
                {
                    h.hedge_sent(&mut race, t);
                    h.leg_finished(&mut race, Leg::Hedge, Ok(200), t + 1.0);
                }
            }
            let mut race = start(&mut h, 100.0);
            let action = h.leg_finished(&mut race, Leg::Primary, Ok(503), 101.0);
            assert_eq!(
                matches!(action, Action::SendHedge { .. }),
                retried,
                "{policy}: {action:?}"
            );
        }
    }

    #[test]
    fn shed_hedge_waits_for_the_primary() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        h.timer_fired(&mut race, 100.0);
        h.hedge_sent(&mut race, 100.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(503), 102.0),
            Action::Wait
        );
        assert_eq!(
            h.leg_finished(&mut race, Leg::Primary, Ok(200), 300.0),
            Action::Finish(RaceEnd::Won(Leg::Primary))
        );
    }

    #[test]
    fn both_fail() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        h.leg_finished(&mut race, Leg::Primary, Err("reset".into()), 2.0);
        h.hedge_sent(&mut race, 2.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(502), 5.0),
            Action::Finish(RaceEnd::BothFailed {
                answered: Some(Leg::Hedge)
            }),
            "the hedge's origin answered: its 502 goes to the client"
        );
        assert_eq!(race.leg(Leg::Primary).error.as_deref(), Some("reset"));
    }

    #[test]
    fn both_answer_with_errors_and_the_primary_answer_is_delivered() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        h.leg_finished(&mut race, Leg::Primary, Ok(503), 2.0);
        h.hedge_sent(&mut race, 2.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Ok(503), 5.0),
            Action::Finish(RaceEnd::BothFailed {
                answered: Some(Leg::Primary)
            })
        );
    }

    #[test]
    fn no_origin_answered_at_all() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        h.leg_finished(&mut race, Leg::Primary, Err("reset".into()), 2.0);
        h.hedge_sent(&mut race, 2.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Hedge, Err("refused".into()), 5.0),
            Action::Finish(RaceEnd::BothFailed { answered: None })
        );
    }

    #[test]
    fn timeout_cuts_every_leg_and_blames_their_origins() {
        let mut h = hedger(&[("HEDGE_HEALTH_CONSECUTIVE_FAILURES", "1")]);
        let mut race = start(&mut h, 0.0);
        h.timer_fired(&mut race, 100.0);
        h.hedge_sent(&mut race, 100.0);
        assert_eq!(
            h.deadline_passed(&mut race, 30_000.0),
            Action::Finish(RaceEnd::TimedOut)
        );
        assert!(race.legs.iter().all(|l| l.aborted));
        let degraded = |h: &mut Hedger, o| {
            !h.gate
                .origin_snapshot(o, 30_000.0)
                .is_some_and(|s| s.healthy)
        };
        assert!(degraded(&mut h, 0) && degraded(&mut h, 1));
    }

    #[test]
    fn client_gone_cuts_every_leg_and_blames_no_origin() {
        let mut h = hedger(&[("HEDGE_HEALTH_CONSECUTIVE_FAILURES", "1")]);
        let mut race = start(&mut h, 0.0);
        assert_eq!(
            h.client_gone(&mut race, 50.0),
            Action::Finish(RaceEnd::ClientGone)
        );
        assert!(race.leg(Leg::Primary).aborted);
        assert_eq!(
            h.timer_fired(&mut race, 100.0),
            Action::Wait,
            "no hedge for a gone client"
        );
        let healthy = h.gate.origin_snapshot(0, 50.0).is_some_and(|s| s.healthy);
        assert!(healthy);
    }

    #[test]
    fn a_hedge_the_worker_could_not_send_blames_no_origin() {
        let mut h = hedger(&[]);
        let mut race = start(&mut h, 0.0);
        h.timer_fired(&mut race, 100.0);
        assert_eq!(h.hedge_not_sent(&mut race, 100.0), Action::Wait);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Primary, Ok(200), 400.0),
            Action::Finish(RaceEnd::Won(Leg::Primary))
        );
        assert!(!race.hedge_sent());
    }

    #[test]
    fn no_budget_means_no_hedge_and_says_why() {
        let mut h = hedger(&[("HEDGE_BUDGET_PERCENT", "0")]);
        h.gate = HedgeGate::new(&h.params().gate(), 0.0);
        let mut race = start(&mut h, 0.0);
        assert_eq!(h.timer_fired(&mut race, 100.0), Action::Wait);
        assert_eq!(race.no_hedge, Some(NoHedge::Denied(HedgeDenied::Budget)));
        assert_eq!(race.no_hedge.map(|r| r.as_str()), Some("budget"));
    }

    #[test]
    fn an_ineligible_request_is_planned_without_a_hedge() {
        let mut h = hedger(&[]);
        let plan = h.plan(
            Eligibility::NotHedgeable(NotHedgeableReason::NotIdempotent),
            "/orders",
            0.0,
        );
        assert_eq!(plan.delay, None);
        assert_eq!(
            plan.no_hedge,
            Some(NoHedge::NotEligible(NotHedgeableReason::NotIdempotent))
        );
        let mut race = h.start(plan, 0.0);
        assert_eq!(
            h.leg_finished(&mut race, Leg::Primary, Ok(503), 5.0),
            Action::Finish(RaceEnd::PrimaryFailed),
            "a failing POST is not retried elsewhere"
        );
    }

    #[test]
    fn identical_misses_coalesce_only_once_the_route_answered_storably() {
        let mut h = hedger(&[]);
        let alone = h.arrive("https://e/x", "/r", true, 0.0);
        assert_eq!(alone.role, Role::Alone, "an unknown route is not coalesced");
        assert!(
            alone.look_up_cache,
            "the first request on a route probes the cache"
        );
        h.cache_answer("/r", true);
        assert!(matches!(
            h.arrive("https://e/x", "/r", true, 1.0).role,
            Role::Leader(_)
        ));
        assert!(matches!(
            h.arrive("https://e/x", "/r", true, 2.0).role,
            Role::Waiter(_)
        ));
        h.cache_answer("/r", false);
        assert_eq!(h.arrive("https://e/y", "/r", true, 3.0).role, Role::Alone);
        let uncacheable = h.arrive("https://e/x", "/r", false, 4.0);
        assert_eq!(uncacheable.role, Role::Alone);
        assert!(!uncacheable.look_up_cache);
    }

    #[test]
    fn retry_mode_abandons_the_primary_when_the_timer_fires() {
        let mut h = hedger(&[("HEDGE_MODE", "retry"), ("HEDGE_RETRY_TIMEOUT_MS", "1000")]);
        let mut race = start(&mut h, 0.0);
        assert_eq!(
            h.timer_fired(&mut race, 1_000.0),
            Action::SendHedge {
                origin: 1,
                abort_primary: true
            }
        );
        assert!(race.leg(Leg::Primary).aborted);
    }
}
