//! The isolate: everything one Worker isolate knows and decides, behind a
//! few calls that make a request's pipeline.
//!
//! A proxied request crosses in at most a handful of places:
//! [`Isolate::admit`] (where it goes, its route, eligibility, cache use,
//! coalescing role and, when nothing is looked up first, its plan),
//! [`Isolate::judge_entry`] (only when the cache holds an entry for it),
//! [`Isolate::plan`] (when the plan had to wait for the cache or the body),
//! [`Isolate::start`] and [`Isolate::handle`] (the race, one call per event),
//! and [`Isolate::complete`] (what the client is told, what the cache keeps,
//! the log line, the PoP push). The Worker converts types and does the I/O.
//!
//! `admit.rs` holds the request rules, `complete.rs` what follows a race,
//! `stats.rs` the stats page's view.

mod admit;
mod complete;
mod metrics_view;
mod stats;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

pub use admit::{Admission, Admit, BodyPlan, RequestHead};
pub use complete::{leg_lines, public_leg, Answer, Completion};

use crate::cache::freshness::{StoredMeta, Verdict};
use crate::cache::invalidation::{self, invalidates, Invalidations};
use crate::cache::policy::{response_freshness, CacheRoutes};
use crate::config::{route_policy, Params};
use crate::estimation::delay_plan::RouteDelay;
use crate::observe::error_events::{Billed, ErrorEvents};
use crate::observe::exposition::Format;
use crate::observe::metrics::MetricCounts;
use crate::observe::request_log::{LogLevel, RequestLine};
use crate::observe::route_labels::RouteLabels;
use crate::pop::client::origin_rates;
use crate::pop::probes::STALE_AFTER_PROBES;
use crate::pop::push::{ErrorReport, PushReply, RouteDelayReport};
use crate::race::{Hedger, Leg, RaceEnd, RaceEvent, RaceIo, RacePlan, RaceState};
use crate::request::coalesce::{Coalescer, FlightId, FlightState, Role};
use crate::request::eligibility::{eligibility, Eligibility};
use crate::request::held_bodies::HeldBodies;
use crate::request::outbound::TraceContext;
use crate::request::route_key::route_key;

/// Most background refreshes one isolate runs at once.
pub const MAX_REFRESHES: usize = 256;

/// Routes never seen to produce a storable response are looked up in the
/// cache one request in this many.
const CACHE_PROBE_EVERY: u64 = 64;

/// What a stored entry may do for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryUse {
    /// Serve it at this age; `refresh` when it is stale within
    /// `stale-while-revalidate` and is refreshed in the background.
    Serve {
        /// Its age, seconds.
        age_s: u64,
        /// Stale, served while it is refreshed.
        refresh: bool,
    },
    /// Too stale to serve: revalidate it; `if_error` when it may stand in
    /// for a failed answer (`stale-if-error`).
    Stale {
        /// It may stand in for a failure.
        if_error: bool,
    },
}

/// Everything an isolate knows and decides. One per isolate; the Worker
/// borrows it only between awaits.
#[derive(Debug)]
pub struct Isolate {
    params: Rc<Params>,
    /// The races' decisions and what they read and write.
    hedger: Hedger,
    /// The origins' names, for PoP pushes (built once, not per push).
    origin_names: Vec<String>,
    /// Which routes answer storably.
    cache_routes: CacheRoutes,
    /// Identical concurrent misses in flight.
    coalescer: Coalescer,
    /// Request-body bytes held for replay.
    held_bodies: HeldBodies,
    /// When URLs were last invalidated by a write.
    invalidations: Invalidations,
    /// Which route keys have a label of their own.
    route_labels: RouteLabels,
    /// Cache keys being refreshed in the background (stale-while-revalidate).
    refreshes: HashSet<String>,
    /// Keys that were invalid and run on their defaults (for the stats).
    config_errors: Vec<crate::config::ConfigError>,
    /// What it counted since it started (the metrics endpoint).
    metrics: MetricCounts,
    /// The counts as of the last push the aggregator took, and as of the
    /// push in flight: a push carries the difference, and a failed one is
    /// carried again by the next.
    metrics_pushed: MetricCounts,
    metrics_in_flight: Option<MetricCounts>,
    /// A random id and the start time (epoch ms), so a scraper can tell
    /// isolates apart and see their counters reset.
    /// The Worker version (the deployment's version id), empty when unknown.
    version: std::rc::Rc<str>,
    id: String,
    started_ms: f64,
    /// The last requests that ended in an error (the dashboard lists them).
    recent_errors: std::collections::VecDeque<RecentError>,
    /// The cap on error lines and unsampled data points.
    error_events: ErrorEvents,
    /// The newest error the aggregator has taken, and the newest in the push in flight.
    errors_pushed_ms: f64,
    errors_in_flight_ms: Option<f64>,
    /// The delay last pushed per (origin, route): (ms, basis, when). A
    /// report goes again only when it moved (a third of a push's bytes were
    /// unchanged reports); bounded by the route stats' keys.
    delays_pushed: HashMap<(String, String), (f64, String, f64)>,
}

/// A delay report is pushed again when it moved by this share...
const DELAY_REPORT_CHANGE: f64 = 0.05;
/// ...or is this old (the aggregator shows reports younger than its window).
const DELAY_REPORT_REFRESH_MS: f64 = 60_000.0;

/// Most recent errors kept.
const RECENT_ERRORS: usize = 20;

/// A request that ended in an error, for the operator.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RecentError {
    /// When it was answered (epoch ms).
    pub at_ms: f64,
    /// Its route key.
    pub route: String,
    /// The status the client got, or a refresh would have (`None`: the
    /// Worker's own 502/504).
    pub status: Option<u16>,
    /// What happened, in words.
    pub what: &'static str,
    /// The origin whose answer or silence it was, if one.
    pub origin: Option<String>,
}

// === impl Isolate ===

impl Isolate {
    /// An isolate for `params` at `now_ms`; `pop_enabled` when the PoP
    /// aggregator is bound; `seed` draws its random choices.
    pub fn new(params: Params, pop_enabled: bool, now_ms: f64, seed: u64) -> Self {
        let hedger = Hedger::new(params, pop_enabled, now_ms, seed);
        let params = Rc::clone(hedger.params());
        Self {
            origin_names: params.origins.iter().map(|o| o.name.clone()).collect(),
            cache_routes: CacheRoutes::new(CACHE_PROBE_EVERY),
            coalescer: Coalescer::new(params.coalesce),
            held_bodies: HeldBodies::new(params.max_held_body_bytes),
            invalidations: Invalidations::new(seed),
            route_labels: RouteLabels::new(params.configured_route_labels()),
            refreshes: HashSet::new(),
            config_errors: Vec::new(),
            metrics: MetricCounts::default(),
            metrics_pushed: MetricCounts::default(),
            metrics_in_flight: None,
            id: format!("{seed:016x}"),
            version: "".into(),
            started_ms: now_ms,
            recent_errors: std::collections::VecDeque::new(),
            error_events: ErrorEvents::new(now_ms),
            errors_pushed_ms: f64::NEG_INFINITY,
            errors_in_flight_ms: None,
            delays_pushed: HashMap::new(),
            hedger,
            params,
        }
    }

    /// What a request answered `status` writes (its log line, its data
    /// point with a dataset bound), within the isolate's cap on error events.
    pub fn bill(&mut self, status: u16, dataset: bool, draw: f64, now_ms: f64) -> Billed {
        let p = &self.params;
        (self.error_events).bill(
            status,
            p.log_level,
            dataset,
            p.analytics_sample_percent,
            draw,
            now_ms,
        )
    }

    /// The configuration (shared: cloning the `Rc` copies nothing).
    pub fn params(&self) -> &Rc<Params> {
        &self.params
    }

    /// Where a request arriving at `now_ms` goes and, for the proxy, what
    /// it may do before its race.
    pub fn admit(&mut self, head: &RequestHead<'_>, now_ms: f64) -> Admit {
        let target = match admit::target(head) {
            Ok(target) => target,
            Err(refused) => return refused,
        };
        let request_id = target.request_id;
        let p = Rc::clone(&self.params);
        if let Some(page) = p.stats.page(&target.host, target.path, target.query) {
            return Admit::Operator { page, request_id };
        }
        let policy = route_policy(&p.routes, target.path);
        if admit::is_websocket(head) {
            // Its own route's origins, never the previous request's.
            let origin = (self.hedger).choose_primary_for(policy.map(|(i, _)| i), now_ms);
            let url = p.origin_url(origin, target.path, target.query);
            return Admit::WebSocket {
                request_id,
                url,
                strip_authorization: admit::carries_operator_token(head, &p.stats),
            };
        }
        let body = match admit::body_facts(head) {
            Ok(body) => body,
            Err(message) => {
                return Admit::Refused {
                    message,
                    request_id,
                }
            }
        };
        let facts = admit::request_facts(head, &body, p.eligibility.idempotency_header.as_deref());
        let rules = (policy.and_then(|(i, _)| p.route_eligibility.get(i)))
            .and_then(Option::as_ref)
            .unwrap_or(&p.eligibility);
        let decision = eligibility(&facts, rules);
        let route = match policy {
            Some((_, r)) => r.name.clone(),
            None => self.label(route_key(target.path, &p.route_keys), now_ms),
        };
        // A request that may run another method is never answered from, or
        // stored in, the cache.
        let use_cache =
            policy.and_then(|(_, r)| r.cache).unwrap_or(p.cache) && !facts.method_override;
        let cache = match use_cache {
            true => admit::cache_directives(head, body.has_body),
            false => None,
        };
        let body_plan = match (decision, body.body) {
            (
                Eligibility::Hedgeable {
                    buffer_body: true, ..
                },
                BodyPlan::Stream,
            ) => BodyPlan::Hold {
                cap: p.eligibility.max_body_bytes,
            },
            (_, plan) => plan,
        };
        let (role, look_up_cache) = self.arrive(head.url, &route, cache.is_some(), now_ms);
        let mut admission = Admission {
            request_id,
            trace: admit::trace(head),
            method: head.method.to_string(),
            path: target.path.to_string(),
            query: target.query.map(str::to_string),
            route,
            route_policy: policy.map(|(i, _)| i),
            eligibility: decision,
            cache,
            role,
            look_up_cache,
            body: body_plan,
            declared_length: body.content_length,
            strip_authorization: admit::carries_operator_token(head, &p.stats),
            plan: None,
            started_ms: now_ms,
            refresh: false,
        };
        // Nothing to look up or read first: planned now, one call less.
        if role == Role::Alone && !look_up_cache && body_plan == BodyPlan::Empty {
            admission.plan = Some(self.plan(&admission));
        }
        Admit::Proxy(Box::new(admission))
    }

    /// The label `key` is counted under; labels given up now fold into
    /// `_other` in every count that holds them (the pushed and in-flight
    /// copies too, so the next push's difference stays right).
    fn label(&mut self, key: String, now_ms: f64) -> String {
        let (label, gone) = self.route_labels.label(key, now_ms);
        for g in &gone {
            self.metrics.fold_route(g);
            self.metrics_pushed.fold_route(g);
            if let Some(m) = &mut self.metrics_in_flight {
                m.fold_route(g);
            }
            self.hedger.route_stats.fold_route(g);
        }
        label
    }

    /// Identical concurrent misses share one fetch only on routes whose
    /// latest answer was storable: elsewhere a waiter would wait for the
    /// leader only to fetch for itself.
    fn arrive(&mut self, url: &str, route: &str, cacheable: bool, now_ms: f64) -> (Role, bool) {
        if !cacheable {
            return (Role::Alone, false);
        }
        let role = if self.cache_routes.should_coalesce(route) {
            self.coalescer.join(url, now_ms)
        } else {
            Role::Alone
        };
        (role, self.cache_routes.should_lookup(route))
    }

    /// Plans the admitted request's race (for its arrival time), when
    /// admission could not (the cache or the body came first).
    pub fn plan(&mut self, admission: &Admission) -> RacePlan {
        (self.hedger).plan_for(
            admission.eligibility,
            &admission.route,
            admission.started_ms,
            admission.route_policy,
        )
    }

    /// What the stored entry with `freshness` may do for the admitted
    /// request; an entry that may be served counts as a storable answer.
    /// `None` for a request the cache may not answer.
    pub fn judge_entry(
        &mut self,
        admission: &Admission,
        freshness: &StoredMeta,
    ) -> Option<EntryUse> {
        let directives = admission.cache.as_ref()?;
        // The request's arrival time: one clock read less on the hit path.
        let (age_s, refresh) = match freshness.verdict(directives, admission.started_ms / 1000.0) {
            Verdict::Fresh { age_s } => (age_s, false),
            Verdict::StaleWhileRevalidate { age_s } => (age_s, true),
            Verdict::Stale { serve_on_error, .. } => {
                return Some(EntryUse::Stale {
                    if_error: serve_on_error,
                })
            }
        };
        self.cache_routes.learn(&admission.route);
        Some(EntryUse::Serve { age_s, refresh })
    }

    /// The primary is sent at `now_ms`: the race begins. The configuration
    /// comes along (the driver builds each leg's URL from it).
    pub fn start(&mut self, plan: RacePlan, now_ms: f64) -> (RaceState, Rc<Params>) {
        (self.hedger.start(plan, now_ms), Rc::clone(&self.params))
    }

    /// The primary of a started race could not be built (the Worker's own
    /// failure): no origin is blamed.
    pub fn primary_not_sent(&mut self, state: &mut RaceState, now_ms: f64) {
        self.hedger.primary_not_sent(state, now_ms);
    }

    /// One event of a race, and what follows through `io`; `Some(end)` once
    /// the race is over.
    pub fn handle(
        &mut self,
        state: &mut RaceState,
        event: RaceEvent,
        now_ms: f64,
        io: &mut impl RaceIo,
    ) -> Option<RaceEnd> {
        self.hedger.handle(state, event, now_ms, io)
    }

    /// What follows the admitted request's race (not for a client that
    /// left), at `now_ms`, for `url`.
    pub fn complete(
        &mut self,
        admission: &Admission,
        state: &RaceState,
        answer: &Answer<'_>,
        url: &str,
        now_ms: f64,
    ) -> Completion {
        let won = matches!(state.end, Some(RaceEnd::Won(_)));
        let (client_error, origin_failed) = match (won, answer.status) {
            // RFC 5861: the errors a stale-if-error copy may stand in for.
            (true, Some(s)) => (s >= 500, matches!(s, 500 | 502 | 503 | 504)),
            _ => (true, true),
        };
        let rescue = answer.stale_if_error && origin_failed;
        // Computed once: the stats' counters and the metrics both take it.
        // A refresh's failure reached no client (it had the stale copy), but
        // it is the origin's, and shows among the recent errors.
        let summary = state.summary(client_error && !rescue && !admission.refresh, now_ms);
        self.hedger.record_outcome(state, &summary);
        let total_ms = now_ms - admission.started_ms;
        if summary.error || (admission.refresh && client_error) {
            self.note_error(state, answer.status, admission.refresh, now_ms);
        }
        (self.metrics).record(&self.origin_names, state, &summary, total_ms, now_ms);
        let status = answer.status.filter(|_| won);
        let invalidate = match status {
            Some(s) if invalidates(&admission.method, s) => {
                let targets = invalidation::targets(url, answer.header);
                self.invalidate(&targets, now_ms);
                targets
            }
            _ => Vec::new(),
        };
        let store = match (admission.cache.is_some() && !rescue, status) {
            (true, Some(s)) => {
                let fresh = response_freshness(s, answer.header, admission.started_ms, now_ms)
                    .filter(|_| self.may_store(url, admission.started_ms));
                self.learn_storable(&admission.route, fresh.is_some());
                fresh
            }
            _ => None,
        };
        let x_hedge = complete::x_hedge(state, rescue);
        let log = (self.params.log_level != LogLevel::Off || answer.analytics)
            .then(|| {
                let request = (&*admission.request_id, &admission.trace, &*admission.method);
                complete::log_line(
                    &self.params,
                    state,
                    request,
                    x_hedge,
                    total_ms,
                    &self.version,
                    now_ms,
                )
            })
            .map(|line| RequestLine {
                refresh: admission.refresh,
                ..line
            });
        // A refresh runs where no push can go out (after its client's
        // response, in the background): the next request's completion takes it.
        let push = (!admission.refresh && self.hedger.pop.push_due(now_ms))
            .then(|| self.take_push(now_ms));
        Completion {
            timeout_ms: state.plan.timeout_ms,
            body_idle_timeout_ms: self.params.body_idle_timeout_ms,
            rescue,
            store,
            invalidate,
            x_hedge,
            server_timing: complete::server_timing(
                &self.params,
                state,
                admission.started_ms,
                now_ms,
            ),
            log,
            push,
        }
    }

    /// The push that is due: the PoP client's delta, the metrics' difference
    /// since the last accepted push, each busy route's delay now and the
    /// errors since the last accepted push.
    fn take_push(&mut self, now_ms: f64) -> Vec<u8> {
        let reports = self.route_delay_reports(now_ms);
        let route_delays = self.delay_reports_to_push(reports, now_ms);
        let quantile = self.params.delay.quantile;
        let mut push = (self.hedger.pop).take_push(now_ms, quantile, &self.origin_names);
        push.route_delays = route_delays;
        push.worker_version = self.version.to_string();
        let delta = self.metrics.minus(&self.metrics_pushed);
        if !delta.is_empty() {
            push.metrics = Some(delta);
            self.metrics_in_flight = Some(self.metrics.clone());
        }
        let since = self.errors_pushed_ms;
        push.errors = (self.recent_errors.iter())
            .filter(|e| e.at_ms > since)
            .map(|e| ErrorReport {
                at_ms: e.at_ms,
                route: e.route.clone(),
                status: e.status,
                what: e.what.to_string(),
                origin: e.origin.clone(),
            })
            .collect();
        self.errors_in_flight_ms = push.errors.last().map(|e| e.at_ms);
        push.encode()
    }

    /// Each tracked (primary, route)'s delay now, for the PoP's dashboard.
    fn route_delay_reports(&mut self, now_ms: f64) -> Vec<RouteDelayReport> {
        let keys: Vec<(usize, String)> = (self.hedger.route_stats.keys())
            .map(|(k, _)| k.clone())
            .collect();
        let mut reports = Vec::new();
        for (origin, route) in keys {
            let RouteDelay { choice, benefit } = self.hedger.route_delay(origin, &route, now_ms);
            let (Some(choice), Some(name)) = (choice, self.origin_names.get(origin)) else {
                continue;
            };
            reports.push(RouteDelayReport {
                origin: name.clone(),
                route,
                delay_ms: choice.delay_ms,
                basis: choice.basis.as_str().to_string(),
                predicted_share: benefit.map(|b| b.hedge_share),
                predicted_tail_ms: benefit.map(|b| b.tail_ms),
                unhedged_tail_ms: benefit.map(|b| b.unhedged_tail_ms),
            });
        }
        reports
    }

    /// Of `reports`, those that moved since they were last pushed (or were
    /// pushed over [`DELAY_REPORT_REFRESH_MS`] ago).
    fn delay_reports_to_push(
        &mut self,
        reports: Vec<RouteDelayReport>,
        now_ms: f64,
    ) -> Vec<RouteDelayReport> {
        let pushed = &mut self.delays_pushed;
        pushed.retain(|_, (_, _, at_ms)| now_ms - *at_ms < DELAY_REPORT_REFRESH_MS);
        reports
            .into_iter()
            .filter(|r| {
                let key = (r.origin.clone(), r.route.clone());
                let unchanged = pushed.get(&key).is_some_and(|(ms, basis, _)| {
                    *basis == r.basis && (r.delay_ms - ms).abs() <= DELAY_REPORT_CHANGE * ms
                });
                if !unchanged {
                    pushed.insert(key, (r.delay_ms, r.basis.clone(), now_ms));
                }
                !unchanged
            })
            .collect()
    }

    fn note_error(&mut self, state: &RaceState, status: Option<u16>, refresh: bool, now_ms: f64) {
        let what = match state.end {
            _ if refresh => "a background refresh failed; the stale copy stays",
            Some(RaceEnd::Won(_)) => "the origin answered 5xx",
            Some(RaceEnd::PrimaryFailed) => "the primary failed; its answer was passed on",
            Some(RaceEnd::BothFailed { answered: Some(_) }) => {
                "every leg failed; an origin's answer was passed on"
            }
            Some(RaceEnd::BothFailed { answered: None }) => "no origin answered (502)",
            Some(RaceEnd::TimedOut) => "no answer within HEDGE_TIMEOUT_MS (504)",
            Some(RaceEnd::ClientGone) | None => "the client went away",
        };
        let leg = complete::answered_leg(state).unwrap_or(Leg::Primary);
        let origin = (self.origin_names.get(state.leg(leg).origin)).cloned();
        if self.recent_errors.len() >= RECENT_ERRORS {
            self.recent_errors.pop_front();
        }
        self.recent_errors.push_back(RecentError {
            at_ms: now_ms,
            route: state.plan.route.clone(),
            status,
            what,
            origin,
        });
    }

    /// Whether a cacheable request on `route` was answered storably (a
    /// store the cache then refused counts as not).
    pub fn learn_storable(&mut self, route: &str, storable: bool) {
        if storable {
            self.cache_routes.learn(route);
        } else {
            self.cache_routes.learn_unstorable(route);
        }
    }

    /// A write to each of `urls` succeeded at `now_ms`: a fetch begun before
    /// it may not store its answer, and a coalesced flight for it takes no
    /// new waiters (they would get the answer from before the write).
    fn invalidate(&mut self, urls: &[String], now_ms: f64) {
        for url in urls {
            self.invalidations.record(url, now_ms);
            self.coalescer.forget(url);
        }
    }

    /// Whether an answer for `url` requested at `requested_ms` may be
    /// stored: not when a write invalidated `url` since.
    pub fn may_store(&self, url: &str, requested_ms: f64) -> bool {
        !self.invalidations.since(url, requested_ms)
    }

    /// Claims the background refresh of cache key `key`, served stale to
    /// `client`'s request, and admits it at `now_ms` as a request of its own
    /// (a new id and a new unsampled trace, each from `new_id`), planned: a GET of the same
    /// path on the same route, ended by [`Isolate::complete`] like any race.
    /// `None` when one is already running (a stale entry is refreshed once,
    /// however many requests it serves meanwhile) or too many are.
    pub fn begin_refresh(
        &mut self,
        key: &str,
        client: &Admission,
        new_id: &dyn Fn() -> String,
        now_ms: f64,
    ) -> Option<Admission> {
        if self.refreshes.len() >= MAX_REFRESHES || self.refreshes.contains(key) {
            return None;
        }
        self.refreshes.insert(key.to_string());
        let plan = (self.hedger).plan_for(
            client.eligibility,
            &client.route,
            now_ms,
            client.route_policy,
        );
        Some(Admission {
            request_id: new_id(),
            trace: TraceContext {
                trace_id: new_id(),
                flags: "00".to_string(),
            },
            method: "GET".to_string(),
            path: client.path.clone(),
            query: client.query.clone(),
            route: client.route.clone(),
            route_policy: client.route_policy,
            eligibility: client.eligibility,
            cache: client.cache,
            role: Role::Alone,
            look_up_cache: false,
            body: BodyPlan::Empty,
            declared_length: None,
            strip_authorization: client.strip_authorization,
            plan: Some(plan),
            started_ms: now_ms,
            refresh: true,
        })
    }

    /// The background refresh of `key` is over.
    pub fn end_refresh(&mut self, key: &str) {
        self.refreshes.remove(key);
    }

    /// The leader of flight `id` for `key` stored its answer; waiters read it.
    pub fn flight_stored(&mut self, key: &str, id: FlightId) {
        self.coalescer.stored(key, id);
    }

    /// The leader of flight `id` is done without storing (no effect after
    /// [`Isolate::flight_stored`]): waiters fetch for themselves.
    pub fn flight_released(&mut self, key: &str, id: FlightId) {
        self.coalescer.release(key, id);
    }

    /// How flight `id` for `key` stands at `now_ms`.
    pub fn flight_state(&self, key: &str, id: FlightId, now_ms: f64) -> FlightState {
        self.coalescer.state(key, id, now_ms)
    }

    /// Claims `bytes` more of the isolate's held-body cap; `false` when full.
    pub fn hold_body_bytes(&mut self, bytes: u64) -> bool {
        self.held_bodies.try_hold(bytes)
    }

    /// Gives back `bytes` of held body.
    pub fn release_body_bytes(&mut self, bytes: u64) {
        self.held_bodies.release(bytes);
    }

    /// The PoP aggregator answered a push of `bytes` bytes.
    pub fn push_succeeded(&mut self, reply: &PushReply, bytes: usize, now_ms: f64) {
        let names = &self.origin_names;
        (self.hedger.pop).push_succeeded(reply, bytes, now_ms, names);
        (self.hedger.gate).note_pop_rates(&origin_rates(reply, names), now_ms);
        let verdicts: Vec<(usize, bool)> = (reply.probes.iter())
            .filter_map(|v| Some((names.iter().position(|n| *n == v.origin)?, v.up)))
            .collect();
        let probes = &self.params.pop.probes;
        let fresh_ms = STALE_AFTER_PROBES * probes.interval_ms + probes.timeout_ms;
        (self.hedger.gate).note_probes(&verdicts, fresh_ms, now_ms);
        if let Some(pushed) = self.metrics_in_flight.take() {
            self.metrics_pushed = pushed;
        }
        if let Some(at_ms) = self.errors_in_flight_ms.take() {
            self.errors_pushed_ms = at_ms;
        }
    }

    /// A push failed; how many have failed in a row.
    pub fn push_failed(&mut self, now_ms: f64) -> u32 {
        self.hedger.pop.push_failed(now_ms);
        self.metrics_in_flight = None;
        self.errors_in_flight_ms = None;
        self.hedger.pop.counts().failing_in_a_row
    }

    /// What the stats page shows at `now_ms`.
    pub fn stats(&mut self, wasm_memory_bytes: f64, now_ms: f64) -> serde_json::Value {
        let params = &self.params;
        stats::stats(
            params,
            &mut self.hedger,
            &self.held_bodies,
            &self.config_errors,
            &self.recent_errors,
            wasm_memory_bytes,
            now_ms,
        )
    }

    /// The isolate-scope metrics at `now_ms`, as text in `format`.
    pub fn metrics_text(&mut self, format: Format, now_ms: f64) -> String {
        metrics_view::metrics_text(self, format, now_ms)
    }

    /// The Worker version this isolate runs (the deployment's version id,
    /// from the runtime): in its log lines, its analytics rows, its info
    /// metric and its pushes, so two versions live at once can be told apart.
    pub fn set_version(&mut self, version: &str) {
        self.version = version.into();
    }

    /// The Worker version, empty when unknown.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The keys that were invalid and run on their defaults
    /// ([`crate::config::parse_lenient`]), for the stats page.
    pub fn note_config_errors(&mut self, errors: Vec<crate::config::ConfigError>) {
        self.config_errors = errors;
    }
}

#[cfg(test)]
mod tests;
