//! The isolate: everything one Worker isolate knows and decides, behind a
//! few calls that make a request's pipeline.
//!
//! A proxied request crosses in at most a handful of places:
//! [`Isolate::accept`] (where it goes, its route, eligibility, cache use,
//! coalescing role, and its first [`Step`]), the steps before its race,
//! each handed back with what the driver found ([`Isolate::body_read`],
//! [`Isolate::flight_polled`], [`Isolate::found`]: serve the entry, or race
//! planned), [`Isolate::start`] and [`Isolate::handle`] (the race, one call
//! per event), and [`Isolate::complete`] (what the client is told, what the
//! cache keeps, the log line, the PoP push). The Worker converts types and
//! does the I/O.
//!
//! `intake.rs` holds the request rules, `step.rs` the steps before the
//! race, `complete.rs` what follows a race, `cache_use.rs` the isolate's
//! part in the shared cache (stores, writes, refreshes, flights),
//! `pop_push.rs` the PoP push, `stats.rs` the stats page's view.

mod cache_use;
mod complete;
mod intake;
mod metrics_view;
mod pop_push;
mod stats;
mod step;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

pub use cache_use::CopyEnd;
pub use complete::{leg_lines, public_leg, AfterRace, Answer, Completion, StoreTicket};
pub use intake::{BodyPlan, Exchange, Intake, RequestHead};
pub use step::{Refresh, ServeEntry, StaleEntry, Step};

use crate::cache::invalidation::Invalidations;
use crate::cache::policy::CacheRoutes;
use crate::config::{route_policy, Params};
use crate::observe::error_events::{Billed, ErrorEvents};
use crate::observe::exposition::Format;
use crate::observe::latency_export::LatencyExport;
use crate::observe::metrics::MetricCounts;
use crate::observe::route_labels::RouteLabels;
use crate::race::{Action, Hedger, Leg, RaceEnd, RaceEvent, RacePlan, RaceState, Route};
use crate::request::coalesce::{Coalescer, Role};
use crate::request::eligibility::eligibility;
use crate::request::held_bodies::HeldBodies;
use crate::request::ids::IdSource;
use crate::request::outbound::traceparent;
use crate::request::route_key::route_key;

/// Most background refreshes one isolate runs at once.
pub const MAX_REFRESHES: usize = 256;

/// Routes never seen to produce a storable response are looked up in the
/// cache one request in this many.
const CACHE_PROBE_EVERY: u64 = 64;

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
    /// Request, trace and span ids, and the log's sampling draws.
    ids: IdSource,
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

/// One leg's request as the Worker sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegRequest {
    /// The origin it goes to (by index).
    pub origin: usize,
    /// Its URL: the origin's base with the client's path and query.
    pub url: String,
    /// Its `traceparent`: the exchange's trace, the leg's own span.
    pub traceparent: String,
}

/// What the Worker's race driver does after an event, in this order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RaceOrder {
    /// Abort these legs now: the primary before a retry's hedge, or every
    /// leg but [`RaceEnd::kept_leg`] once the race is over (every
    /// millisecond a loser runs is wasted origin work).
    pub abort: Vec<Leg>,
    /// Send this hedge, then report [`Isolate::hedge_sent`] or
    /// [`Isolate::hedge_not_sent`].
    pub send_hedge: Option<LegRequest>,
    /// The race is over: answer (after the aborts).
    pub end: Option<RaceEnd>,
    /// Set the hedge timer to fire this many ms from now (a stall check
    /// that found none).
    pub rearm_ms: Option<f64>,
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
            // Its own stream: drawing ids moves no decision's draws.
            ids: IdSource::new(seed ^ 0x1D5_1D5_1D5_1D5),
            hedger,
            params,
        }
    }

    /// What a request answered `status` writes (its log line, its data
    /// point with a dataset bound), within the isolate's cap on error events.
    fn bill(&mut self, status: u16, dataset: bool, now_ms: f64) -> Billed {
        let draw = self.ids.uniform();
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
    pub fn accept(&mut self, head: &RequestHead<'_>, now_ms: f64) -> Intake {
        let target = match intake::target(head, &mut self.ids) {
            Ok(target) => target,
            Err(refused) => return refused,
        };
        let request_id = target.request_id;
        let p = Rc::clone(&self.params);
        if let Some(page) = p.stats.page(&target.host, target.path, target.query) {
            return Intake::Operator { page, request_id };
        }
        let policy = route_policy(&p.routes, target.path);
        if intake::is_websocket(head) {
            // Its own route's origins, never the previous request's.
            let origin = (self.hedger).choose_primary_for(policy.map(|(i, _)| i), now_ms);
            return Intake::WebSocket {
                request_id,
                url: p.origin_url(origin, target.path, target.query),
                strip_authorization: intake::carries_operator_token(head, &p.stats),
            };
        }
        let body = match intake::body_facts(head) {
            Ok(body) => body,
            Err(message) => {
                return Intake::Refused {
                    message,
                    request_id,
                }
            }
        };
        let facts = intake::request_facts(head, &body, p.eligibility.idempotency_header.as_deref());
        let rules = (policy.and_then(|(i, _)| p.route_eligibility.get(i)))
            .and_then(Option::as_ref)
            .unwrap_or(&p.eligibility);
        let decision = eligibility(&facts, rules);
        let route = Route {
            key: match policy {
                Some((_, r)) => r.name.clone(),
                None => self.label(route_key(target.path, &p.route_keys), now_ms),
            },
            policy: policy.map(|(i, _)| i),
        };
        // A request that may run another method is never answered from, or
        // stored in, the cache.
        let use_cache =
            policy.and_then(|(_, r)| r.cache).unwrap_or(p.cache) && !facts.method_override;
        let cache = match use_cache {
            true => intake::cache_directives(head, body.has_body),
            false => None,
        };
        let body_plan = intake::body_plan(decision, body.body, p.eligibility.max_body_bytes);
        let (role, look_up_cache) = self.arrive(head.url, &route.key, cache.is_some(), now_ms);
        let strip_authorization = intake::carries_operator_token(head, &p.stats);
        let exchange = Exchange {
            request_id,
            trace: intake::trace(head, &mut self.ids),
            method: head.method.to_string(),
            path: target.path.to_string(),
            query: target.query.map(str::to_string),
            route,
            eligibility: decision,
            cache,
            role,
            look_up_cache,
            body: body_plan,
            declared_length: body.content_length,
            strip_authorization,
            started_ms: now_ms,
            refresh: false,
            dropped_headers: intake::dropped_headers(head.headers, strip_authorization, false),
        };
        // Nothing to look up or read first: planned now, one call less.
        let first = self.first_step(&exchange);
        Intake::Proxy(Box::new(exchange), first)
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

    /// `exchange`'s primary is sent at `now_ms`: the race begins, with the
    /// primary's request.
    pub fn start(
        &mut self,
        plan: RacePlan,
        exchange: &Exchange,
        now_ms: f64,
    ) -> (RaceState, LegRequest) {
        let primary = self.leg_request(exchange, plan.primary);
        (self.hedger.start(plan, now_ms), primary)
    }

    /// The request a leg of `exchange` sends to `origin`: its URL, and its
    /// own span of the exchange's trace (a hedge is a sibling of the primary).
    fn leg_request(&mut self, exchange: &Exchange, origin: usize) -> LegRequest {
        let path = &exchange.path;
        LegRequest {
            origin,
            url: self
                .params
                .origin_url(origin, path, exchange.query.as_deref()),
            traceparent: traceparent(&exchange.trace, &self.ids.span()),
        }
    }

    /// The Hedger's `action` as the Worker's driver carries it out.
    fn order(&mut self, exchange: &Exchange, state: &mut RaceState, action: Action) -> RaceOrder {
        let mut order = RaceOrder {
            rearm_ms: state.take_rearm(),
            ..RaceOrder::default()
        };
        match action {
            Action::Wait => {}
            Action::SendHedge {
                origin,
                abort_primary,
            } => {
                if abort_primary {
                    order.abort.push(Leg::Primary);
                }
                order.send_hedge = Some(self.leg_request(exchange, origin));
            }
            Action::Finish(end) => {
                order.abort = [Leg::Primary, Leg::Hedge]
                    .into_iter()
                    .filter(|&leg| Some(leg) != end.kept_leg())
                    .collect();
                order.end = Some(end);
            }
        }
        order
    }

    /// The hedge `order` asked for went out at `now_ms`.
    pub fn hedge_sent(&mut self, state: &mut RaceState, now_ms: f64) {
        self.hedger.hedge_sent(state, now_ms);
    }

    /// The hedge `order` asked for could not go out (no connection free, or
    /// the Worker could not build it): its origin was never asked. What the
    /// driver does instead.
    pub fn hedge_not_sent(
        &mut self,
        exchange: &Exchange,
        state: &mut RaceState,
        now_ms: f64,
    ) -> RaceOrder {
        let action = self.hedger.hedge_not_sent(state, now_ms);
        self.order(exchange, state, action)
    }

    /// The primary of a started race could not be built (the Worker's own
    /// failure): no origin is blamed.
    pub fn primary_not_sent(&mut self, state: &mut RaceState, now_ms: f64) {
        self.hedger.primary_not_sent(state, now_ms);
    }

    /// One event of `exchange`'s race at `now_ms`: what the driver does next.
    pub fn handle(
        &mut self,
        exchange: &Exchange,
        state: &mut RaceState,
        event: RaceEvent,
        now_ms: f64,
    ) -> RaceOrder {
        let action = self.hedger.handle(state, event, now_ms);
        self.order(exchange, state, action)
    }

    /// Claims `bytes` more of the isolate's held-body cap; `false` when full.
    pub fn hold_body_bytes(&mut self, bytes: u64) -> bool {
        self.held_bodies.try_hold(bytes)
    }

    /// Gives back `bytes` of held body.
    pub fn release_body_bytes(&mut self, bytes: u64) {
        self.held_bodies.release(bytes);
    }

    /// What the stats page shows at `now_ms`.
    pub fn stats(&mut self, wasm_memory_bytes: f64, now_ms: f64) -> serde_json::Value {
        stats::stats(self, wasm_memory_bytes, now_ms)
    }

    /// What the advisor reads of this isolate at `now_ms` (the stats page
    /// appends it).
    pub fn latency_export(&mut self, now_ms: f64) -> LatencyExport {
        stats::latency_export(self, now_ms)
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

/// What the simulator reads and drives of an isolate (native only).
#[cfg(not(target_arch = "wasm32"))]
impl Isolate {
    /// Its Hedger: the simulator drives races through it directly.
    pub(crate) fn hedger_mut(&mut self) -> &mut Hedger {
        &mut self.hedger
    }

    /// ... and reads it.
    pub(crate) fn hedger(&self) -> &Hedger {
        &self.hedger
    }

    /// Requests by how they were served, over every route (the metrics'
    /// counters, in [`crate::observe::metrics::Served`] order).
    pub(crate) fn served_counts(&self) -> [u64; 6] {
        let mut served = [0; 6];
        for route in self.metrics.routes.values() {
            for (sum, n) in served.iter_mut().zip(route.served) {
                *sum += n;
            }
        }
        served
    }
}

#[cfg(test)]
mod tests;
