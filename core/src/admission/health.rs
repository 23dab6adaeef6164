//! Passive origin health, from the Worker's own results.
//!
//! An origin is marked *degraded* after `consecutive_failures` failures in a
//! row, or when at least `min_requests` requests in the window failed at a rate
//! of `failure_rate` or more (connection errors, timeouts and 5xx all count).
//! A degraded origin gets no hedges and is not chosen as primary while a
//! healthy one exists. After `cooldown_ms` it lets one trial request through;
//! a success restores it, a failure restarts the cool-down.
//!
//! Failures must be spread over routes to count against the origin: a client
//! that knows one URL answering 500 (or hanging until the timeout) must not
//! take the origin out for every route. A 5xx or a timeout on route `r` while
//! no other route failed within the window and another route succeeded in
//! it says that path is broken, not the origin: it counts neither toward the
//! streak, nor the failure and 5xx rates, nor the PoP's rate. A connection
//! error is always the origin's (no path can refuse a connection), and an
//! origin serving one route only is judged on that route. Envoy's outlier
//! detection, by contrast, ejects a host on consecutive 5xx whatever paths
//! they came from, so one failing endpoint ejects every host it reaches.
//!
//! The same window also drives the 5xx-adaptive budget: above
//! `reduce_above_5xx_rate` the origin's hedges are limited to
//! `reduced_budget_percent`, above `stop_above_5xx_rate` hedging to and from
//! it stops; as the rate falls (the window slides), the budget comes back.

use crate::estimation::window::{SlidingWindow, WindowParams, WindowSlot};

/// Settings for [`OriginHealth`] (defaults: the `health_*` and `5xx_*`
/// fields of `HEDGE_TUNING` in `config::TUNING`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthParams {
    /// The sliding window failure rates are measured over.
    pub window: WindowParams,
    /// Failures in a row that mark an origin degraded (default 5).
    pub consecutive_failures: u32,
    /// Failure rate over the window that marks it degraded (default 0.5).
    pub failure_rate: f64,
    /// Requests in the window before the rate is trusted (default 20).
    pub min_requests: u64,
    /// Time a degraded origin waits before a trial request (default 10 s).
    pub cooldown_ms: f64,
    /// Longest a trial request may stay unreported before it counts as lost
    /// and the next request may try (default 30 s, the request timeout): a
    /// trial whose outcome never arrives must not hold the origin out forever.
    pub trial_timeout_ms: f64,
    /// 5xx rate above which the hedge budget is reduced (default 0.02).
    pub reduce_above_5xx_rate: f64,
    /// The reduced hedge budget, in percent (default 5).
    pub reduced_budget_percent: f64,
    /// 5xx rate above which hedging to and from the origin stops (default 0.2).
    pub stop_above_5xx_rate: f64,
}

/// How sure a 5xx rate must be before it cuts hedges: the one-sided 95%
/// Wilson lower bound of the rate must pass the level. One 503 among twenty
/// requests is a 5% rate but says little: its lower bound is 0.9%. An
/// origin shedding exactly at a level is not cut by it; one well above is.
const Z_95: f64 = 1.645;

/// The one-sided lower confidence bound of `errors` in `requests`.
pub fn rate_lower_bound(errors: u64, requests: u64) -> f64 {
    if requests == 0 {
        return 0.0;
    }
    let n = requests as f64;
    let p = (errors as f64 / n).min(1.0);
    let z2 = Z_95 * Z_95;
    let centre = p + z2 / (2.0 * n);
    let spread = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - spread) / (1.0 + z2 / n)).max(0.0)
}

impl HealthParams {
    /// The hedge budget `server_errors` 5xx answers in `responses` allow
    /// (from this isolate's window or the PoP's), judged on the rate's lower
    /// confidence bound ([`rate_lower_bound`]).
    pub fn level_for_5xx(&self, server_errors: u64, responses: u64) -> BudgetLevel {
        let rate = rate_lower_bound(server_errors, responses);
        if rate > self.stop_above_5xx_rate {
            BudgetLevel::Stopped
        } else if rate > self.reduce_above_5xx_rate {
            BudgetLevel::Reduced(self.reduced_budget_percent)
        } else {
            BudgetLevel::Full
        }
    }
}

impl BudgetLevel {
    /// A short name for stats: `full`, `reduced` or `stopped`.
    pub fn as_str(&self) -> &'static str {
        match self {
            BudgetLevel::Full => "full",
            BudgetLevel::Reduced(_) => "reduced",
            BudgetLevel::Stopped => "stopped",
        }
    }

    /// The stricter of two levels: stopped over reduced over full.
    pub fn stricter(self, other: BudgetLevel) -> BudgetLevel {
        let rank = |l: &BudgetLevel| match l {
            BudgetLevel::Full => 0,
            BudgetLevel::Reduced(_) => 1,
            BudgetLevel::Stopped => 2,
        };
        if rank(&other) > rank(&self) {
            other
        } else {
            self
        }
    }
}

/// What one request to an origin came to, for health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// An answer that is not a 5xx.
    Success,
    /// A 5xx answer.
    ServerError,
    /// No answer: a connection error (always the origin's own).
    Unreachable,
    /// No answer within the race's timeout: a slow path can cause it, so it
    /// is judged like a 5xx, by route.
    TimedOut,
    /// A 503 to a hedge: the origin declining optional work. It counts
    /// toward the 5xx rate (the origin is busy) but is not a failure that
    /// degrades the origin.
    Shed,
}

/// How much hedging an origin's error rate allows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BudgetLevel {
    /// The configured budget.
    Full,
    /// At most this percentage of requests.
    Reduced(f64),
    /// No hedges to or from this origin.
    Stopped,
}

/// An origin's results over the health window, for stats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HealthWindow {
    /// Requests recorded in the window.
    pub requests: u64,
    /// 5xx answers (shed hedges included) per request; `None` without requests.
    pub server_error_rate: Option<f64>,
    /// Failures (connection errors, timeouts, 5xx) per request.
    pub failure_rate: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    requests: u64,
    failures: u64,
    server_errors: u64,
}

impl WindowSlot for Counts {
    fn add(&mut self, other: &Self) {
        self.requests += other.requests;
        self.failures += other.failures;
        self.server_errors += other.server_errors;
    }
    fn subtract(&mut self, other: &Self) {
        self.requests = self.requests.saturating_sub(other.requests);
        self.failures = self.failures.saturating_sub(other.failures);
        self.server_errors = self.server_errors.saturating_sub(other.server_errors);
    }
    fn is_empty(&self) -> bool {
        self.requests == 0
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    Healthy,
    Degraded {
        since_ms: f64,
    },
    /// Degraded, cool-down over, one trial request in flight since `since_ms`.
    Trial {
        since_ms: f64,
    },
}

/// Health of one origin.
#[derive(Debug, Clone)]
pub struct OriginHealth {
    params: HealthParams,
    counts: SlidingWindow<Counts>,
    consecutive_failures: u32,
    state: State,
    /// The PoP's active probes' latest verdict, while fresh.
    probe: Option<ProbeSeen>,
    /// Which routes failed and succeeded lately.
    spread: RouteSpread,
}

/// The latest success and failure with their routes, and the latest of each
/// on a route other than that one: enough to tell, in constant space,
/// whether a failure on route `r` is the only route failing while another
/// route succeeds.
#[derive(Debug, Clone, Copy)]
struct RouteSpread {
    ok: Latest,
    failed: Latest,
}

#[derive(Debug, Clone, Copy)]
struct Latest {
    /// The latest event's route and time.
    last: Option<(u64, f64)>,
    /// The latest event on a route other than `last`'s.
    other_ms: f64,
}

impl Latest {
    const NONE: Latest = Latest {
        last: None,
        other_ms: f64::NEG_INFINITY,
    };

    fn note(&mut self, route: u64, now_ms: f64) {
        if let Some((r, t)) = self.last {
            if r != route {
                self.other_ms = t;
            }
        }
        self.last = Some((route, now_ms));
    }

    /// The latest event on a route other than `route`.
    fn other_than(&self, route: u64) -> f64 {
        match self.last {
            Some((r, t)) if r != route => t,
            _ => self.other_ms,
        }
    }
}

impl RouteSpread {
    /// Whether a failure on `route` now is that route's alone: no other
    /// route failed within `horizon_ms`, and another one succeeded.
    fn confined(&self, route: u64, horizon_ms: f64, now_ms: f64) -> bool {
        now_ms - self.failed.other_than(route) > horizon_ms
            && now_ms - self.ok.other_than(route) <= horizon_ms
    }
}

/// A route key's tag for [`OriginHealth::record`] (FNV-1a: a few dozen
/// bytes per request, no allocation).
pub fn route_tag(route: &str) -> u64 {
    route.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// A probe verdict as an isolate heard it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ProbeSeen {
    up: bool,
    at_ms: f64,
    fresh_ms: f64,
}

// === impl OriginHealth ===

impl OriginHealth {
    /// A healthy origin with no history.
    pub fn new(params: HealthParams, now_ms: f64) -> Self {
        Self {
            params,
            counts: SlidingWindow::new(params.window, now_ms),
            consecutive_failures: 0,
            state: State::Healthy,
            probe: None,
            spread: RouteSpread {
                ok: Latest::NONE,
                failed: Latest::NONE,
            },
        }
    }

    /// The PoP's probes say the origin is `up` (or not), heard at `now_ms`
    /// and good for `fresh_ms`. Failing probes degrade it at once (no new
    /// primaries or hedges, and no trial while they keep failing); passing
    /// probes after failing ones bring it back without a user request's
    /// trial. An origin degraded by user requests while its probes pass
    /// still recovers through a trial: a probe path can pass while real
    /// requests fail.
    pub fn note_probe(&mut self, up: bool, fresh_ms: f64, now_ms: f64) {
        let was_down = self.probe_down(now_ms);
        self.probe = Some(ProbeSeen {
            up,
            at_ms: now_ms,
            fresh_ms,
        });
        if !up {
            if !matches!(self.state, State::Degraded { .. }) {
                self.state = State::Degraded { since_ms: now_ms };
            }
        } else if was_down {
            self.state = State::Healthy;
            self.consecutive_failures = 0;
        }
    }

    /// Whether fresh probes say the origin is down.
    pub fn probe_down(&self, now_ms: f64) -> bool {
        self.probe
            .is_some_and(|p| !p.up && now_ms - p.at_ms <= p.fresh_ms)
    }

    /// Records the outcome of a request on route `route` (a [`route_tag`])
    /// that reached an answer or failed. Returns whether it counted against
    /// the origin: `false` for a success, and for a failure confined to its
    /// route (see the module docs), which says nothing of the origin.
    pub fn record(&mut self, outcome: Outcome, route: u64, now_ms: f64) -> bool {
        let confinable = matches!(outcome, Outcome::ServerError | Outcome::TimedOut);
        let confined =
            confinable && (self.spread).confined(route, self.params.window.window_ms, now_ms);
        match outcome {
            Outcome::Success => self.spread.ok.note(route, now_ms),
            Outcome::Shed => {}
            _ => self.spread.failed.note(route, now_ms),
        }
        let failure = !confined
            && matches!(
                outcome,
                Outcome::ServerError | Outcome::Unreachable | Outcome::TimedOut
            );
        let server_error = !confined && matches!(outcome, Outcome::ServerError | Outcome::Shed);
        self.counts.update(now_ms, |c| {
            c.requests += 1;
            c.failures += u64::from(failure);
            c.server_errors += u64::from(server_error);
        });
        match outcome {
            Outcome::Shed => {}
            // A trial that hit the broken path proved nothing either way.
            _ if confined => self.abandon_trial(now_ms),
            Outcome::Success => {
                self.consecutive_failures = 0;
                if self.state != State::Healthy {
                    // A trial (or any request) succeeded: back in service.
                    self.state = State::Healthy;
                }
            }
            Outcome::ServerError | Outcome::Unreachable | Outcome::TimedOut => {
                self.consecutive_failures += 1;
                match self.state {
                    State::Trial { .. } => self.state = State::Degraded { since_ms: now_ms },
                    State::Degraded { .. } => {}
                    State::Healthy => {
                        if self.should_degrade() {
                            self.state = State::Degraded { since_ms: now_ms };
                        }
                    }
                }
            }
        }
        failure || server_error
    }

    /// Whether the origin may take a request now. A degraded origin past its
    /// cool-down admits exactly one trial: this call claims it.
    pub fn admit(&mut self, now_ms: f64) -> bool {
        if self.probe_down(now_ms) {
            return false;
        }
        match self.state {
            State::Healthy => true,
            // A trial nobody reported on (its request vanished) is lost: try again.
            State::Trial { since_ms } if now_ms - since_ms >= self.params.trial_timeout_ms => {
                self.state = State::Trial { since_ms: now_ms };
                true
            }
            State::Trial { .. } => false,
            State::Degraded { since_ms } => {
                if now_ms - since_ms >= self.params.cooldown_ms {
                    self.state = State::Trial { since_ms: now_ms };
                    true
                } else {
                    false
                }
            }
        }
    }

    /// The trial request was abandoned (aborted) before it answered: it
    /// proved nothing, so the next request may try again at once.
    pub fn abandon_trial(&mut self, now_ms: f64) {
        if matches!(self.state, State::Trial { .. }) {
            self.state = State::Degraded {
                since_ms: now_ms - self.params.cooldown_ms,
            };
        }
    }

    /// Whether the origin is healthy (not degraded, not on trial).
    pub fn is_healthy(&self) -> bool {
        self.state == State::Healthy
    }

    /// The hedge budget this origin's 5xx rate allows.
    pub fn budget_level(&mut self, now_ms: f64) -> BudgetLevel {
        let totals = *self.counts.total(now_ms);
        if totals.requests < self.params.min_requests {
            return BudgetLevel::Full;
        }
        let level = |c: Counts| self.params.level_for_5xx(c.server_errors, c.requests);
        // The newest sub-windows with enough requests count too: when an
        // origin starts failing after its traffic moved elsewhere (its
        // primaries went to a faster peer), its few recent 5xx would drown
        // in the window's older successes.
        let min = self.params.min_requests;
        match self.counts.recent(|c| c.requests >= min) {
            Some(recent) => level(totals).stricter(level(recent)),
            None => level(totals),
        }
    }

    /// What the window holds now (for stats).
    pub fn window(&mut self, now_ms: f64) -> HealthWindow {
        let totals = *self.counts.total(now_ms);
        let rate = |n: u64| (totals.requests > 0).then(|| n as f64 / totals.requests as f64);
        HealthWindow {
            requests: totals.requests,
            server_error_rate: rate(totals.server_errors),
            failure_rate: rate(totals.failures),
        }
    }

    fn should_degrade(&self) -> bool {
        if self.consecutive_failures >= self.params.consecutive_failures {
            return true;
        }
        let totals = self.counts.total_as_of_last_update();
        totals.requests >= self.params.min_requests
            && totals.failures as f64 / totals.requests as f64 >= self.params.failure_rate
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn health() -> OriginHealth {
        OriginHealth::new(crate::config::defaults().health, 0.0)
    }

    fn record_n(h: &mut OriginHealth, n: usize, outcome: Outcome, now_ms: f64) {
        for _ in 0..n {
            h.record(outcome, 0, now_ms);
        }
    }

    #[test]
    fn one_paths_failures_degrade_neither_the_origin_nor_its_rates() {
        let (ok, boom, other) = (route_tag("/ok"), route_tag("/boom"), route_tag("/x"));
        let mut h = health();
        h.record(Outcome::Success, ok, 0.0);
        for k in 0..30 {
            assert!(!h.record(Outcome::ServerError, boom, 1.0 + f64::from(k)));
            assert!(!h.record(Outcome::TimedOut, boom, 1.5 + f64::from(k)));
        }
        assert!(h.is_healthy(), "a path that fails is that path's problem");
        assert_eq!(h.window(40.0).failure_rate, Some(0.0));
        assert_eq!(h.budget_level(40.0), BudgetLevel::Full);
        // Once a second route fails too, failures count again.
        assert!(h.record(Outcome::ServerError, other, 41.0));
        for k in 0..4 {
            h.record(Outcome::ServerError, boom, 42.0 + f64::from(k));
        }
        assert!(!h.is_healthy(), "failures spread over routes degrade");
    }

    #[test]
    fn an_origin_down_on_its_only_route_or_refusing_connections_degrades() {
        let only = route_tag("/");
        let mut h = health();
        for _ in 0..10 {
            h.record(Outcome::Success, only, 0.0);
        }
        for k in 0..5 {
            h.record(Outcome::ServerError, only, 1.0 + f64::from(k));
        }
        assert!(
            !h.is_healthy(),
            "no other route succeeds: the route is the origin"
        );
        let mut h = health();
        h.record(Outcome::Success, route_tag("/ok"), 0.0);
        for k in 0..5 {
            h.record(Outcome::Unreachable, route_tag("/boom"), 1.0 + f64::from(k));
        }
        assert!(!h.is_healthy(), "no path refuses a connection");
        // A success on another route long ago does not shield a failing origin.
        let mut h = health();
        h.record(Outcome::Success, route_tag("/ok"), 0.0);
        for k in 0..5 {
            h.record(
                Outcome::ServerError,
                route_tag("/boom"),
                70_000.0 + f64::from(k),
            );
        }
        assert!(!h.is_healthy());
    }

    #[test]
    fn failing_probes_take_an_origin_out_and_passing_ones_bring_it_back() {
        let mut h = health();
        h.note_probe(false, 3_500.0, 1_000.0);
        assert!(!h.is_healthy());
        assert!(!h.admit(2_000.0), "no trial while fresh probes fail");
        h.note_probe(false, 3_500.0, 12_000.0);
        assert!(
            !h.admit(13_000.0),
            "past the cool-down, still no trial: the probes are the trial"
        );
        h.note_probe(true, 3_500.0, 14_000.0);
        assert!(
            h.is_healthy(),
            "a pass after failing probes brings it back at once"
        );
        assert!(h.admit(14_000.0));
    }

    #[test]
    fn passing_probes_do_not_override_what_user_requests_showed() {
        let mut h = health();
        h.note_probe(true, 3_500.0, 0.0);
        record_n(&mut h, 5, Outcome::ServerError, 1.0);
        assert!(!h.is_healthy());
        h.note_probe(true, 3_500.0, 2.0);
        assert!(
            !h.is_healthy(),
            "the probe path passing while requests fail proves nothing"
        );
        assert!(!h.admit(3.0));
        assert!(h.admit(10_001.0), "the usual trial after the cool-down");
    }

    #[test]
    fn stale_probe_verdicts_fall_back_to_passive_health() {
        let mut h = health();
        h.note_probe(false, 3_500.0, 0.0);
        assert!(!h.admit(3_000.0));
        // The aggregator went quiet: past freshness and the cool-down, a trial.
        assert!(h.admit(10_000.0));
    }

    #[test]
    fn the_window_reports_rates_and_forgets_what_slid_out() {
        let mut h = health();
        assert_eq!(h.window(0.0).server_error_rate, None);
        record_n(&mut h, 18, Outcome::Success, 1.0);
        h.record(Outcome::Shed, 0, 1.0);
        h.record(Outcome::Unreachable, 0, 1.0);
        let w = h.window(2.0);
        assert_eq!(w.requests, 20);
        assert_eq!(w.server_error_rate, Some(0.05));
        assert_eq!(w.failure_rate, Some(0.05), "a shed hedge is not a failure");
        assert_eq!(h.window(61_000.0).requests, 0);
    }

    #[test]
    fn consecutive_failures_degrade_and_a_success_resets_the_count() {
        let mut h = health();
        record_n(&mut h, 4, Outcome::Unreachable, 1.0);
        h.record(Outcome::Success, 0, 1.0);
        record_n(&mut h, 4, Outcome::Unreachable, 1.0);
        assert!(h.is_healthy());
        h.record(Outcome::ServerError, 0, 1.0);
        assert!(!h.is_healthy());
        assert!(!h.admit(2.0));
    }

    #[test]
    fn a_high_failure_rate_degrades_without_a_streak() {
        let mut h = health();
        for _ in 0..20 {
            h.record(Outcome::Success, 0, 1.0);
            h.record(Outcome::ServerError, 0, 1.0);
        }
        assert!(!h.is_healthy());
    }

    #[test]
    fn recovery_takes_a_cool_down_and_one_successful_trial() {
        let mut h = health();
        record_n(&mut h, 5, Outcome::Unreachable, 0.0);
        assert!(!h.admit(9_999.0));
        assert!(
            h.admit(10_000.0),
            "the trial is admitted after the cool-down"
        );
        assert!(!h.admit(10_001.0), "only one trial at a time");
        h.record(Outcome::Success, 0, 10_050.0);
        assert!(h.is_healthy());
        assert!(h.admit(10_051.0));
    }

    #[test]
    fn a_trial_that_never_reports_is_lost_after_the_trial_timeout() {
        let mut h = health();
        record_n(&mut h, 5, Outcome::Unreachable, 0.0);
        assert!(h.admit(10_000.0), "the trial is claimed");
        // Its request vanished (a client that hung up mid-upload, a hedge
        // whose send failed): no outcome, no abandon.
        assert!(!h.admit(39_999.0), "still in trial before the timeout");
        assert!(h.admit(40_000.0), "a new trial once the old one is lost");
        assert!(!h.admit(40_001.0), "and again one at a time");
    }

    #[test]
    fn a_failed_trial_restarts_the_cool_down() {
        let mut h = health();
        record_n(&mut h, 5, Outcome::Unreachable, 0.0);
        assert!(h.admit(10_000.0));
        h.record(Outcome::Unreachable, 0, 10_100.0);
        assert!(!h.admit(19_000.0));
        assert!(h.admit(20_100.0));
    }

    #[test]
    fn the_lower_bound_is_wilsons() {
        assert_eq!(rate_lower_bound(0, 0), 0.0);
        assert_eq!(rate_lower_bound(0, 100), 0.0);
        // One 503 in 20 requests: a 5% rate that says little.
        assert!((rate_lower_bound(1, 20) - 0.0112).abs() < 1e-4);
        assert!((rate_lower_bound(10, 40) - 0.1557).abs() < 1e-4);
        // Many requests: close to the rate itself.
        let lb = rate_lower_bound(2_000, 100_000);
        assert!(lb > 0.0192 && lb < 0.02, "{lb}");
    }

    #[test]
    fn budget_shrinks_with_the_5xx_rate_and_comes_back() {
        let mut h = health();
        // 4 in 100 is above the 2% level but not surely (lower bound 1.8%);
        // 6 in 100 surely is (3.1%).
        record_n(&mut h, 94, Outcome::Success, 0.0);
        record_n(&mut h, 4, Outcome::ServerError, 0.0);
        assert_eq!(h.budget_level(1.0), BudgetLevel::Full);
        record_n(&mut h, 2, Outcome::ServerError, 0.0);
        assert_eq!(h.budget_level(1.0), BudgetLevel::Reduced(5.0));
        // 36 in 130: surely past the 20% stop level (21.7%).
        record_n(&mut h, 30, Outcome::ServerError, 0.0);
        assert_eq!(h.budget_level(1.0), BudgetLevel::Stopped);
        // A minute later the window has slid past the errors.
        record_n(&mut h, 50, Outcome::Success, 61_000.0);
        assert_eq!(h.budget_level(61_000.0), BudgetLevel::Full);
    }

    #[test]
    fn recent_5xx_count_after_the_traffic_moved_away() {
        // 2,000 successes while the origin took half the primaries, then it
        // gets a few requests (its primaries went elsewhere) and fails 1 in 4.
        let mut h = health();
        record_n(&mut h, 2_000, Outcome::Success, 1_000.0);
        for k in 0..40 {
            let outcome = if k % 4 == 0 {
                Outcome::ServerError
            } else {
                Outcome::Success
            };
            h.record(outcome, 0, 45_000.0 + f64::from(k) * 100.0);
        }
        // The window's rate is 0.5%; the newest sub-window's is 25% of 40
        // requests: surely past the 2% level (lower bound 15.6%), not
        // surely past the 20% one.
        assert_eq!(h.window(50_000.0).server_error_rate, Some(10.0 / 2_040.0));
        assert_eq!(h.budget_level(50_000.0), BudgetLevel::Reduced(5.0));
        // A quiet newest sub-window with too few requests says nothing.
        let mut quiet = health();
        record_n(&mut quiet, 2_000, Outcome::Success, 1_000.0);
        record_n(&mut quiet, 5, Outcome::ServerError, 45_000.0);
        assert_eq!(quiet.budget_level(50_000.0), BudgetLevel::Full);
    }

    #[test]
    fn shed_hedges_count_toward_the_5xx_rate_but_do_not_degrade() {
        let mut h = health();
        record_n(&mut h, 90, Outcome::Success, 0.0);
        record_n(&mut h, 10, Outcome::Shed, 0.0);
        assert!(h.is_healthy());
        assert_eq!(h.budget_level(1.0), BudgetLevel::Reduced(5.0));
    }

    #[test]
    fn too_few_requests_never_cut_the_budget() {
        let mut h = health();
        record_n(&mut h, 3, Outcome::ServerError, 0.0);
        assert_eq!(h.budget_level(1.0), BudgetLevel::Full);
    }
}
