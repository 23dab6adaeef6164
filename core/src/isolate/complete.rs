//! What follows a finished race, decided in one place: what the client is
//! told (`x-hedge`, `Server-Timing`), whether a stale copy stands in for a
//! failure, what the cache keeps, and the request's log line.

use super::{Exchange, Isolate, RecentError, RECENT_ERRORS};
use crate::cache::entry::{store_plan, EntryHead, HeaderEdits, StorePlan};
use crate::cache::invalidation::{self, invalidates};
use crate::cache::policy::response_freshness;
use crate::config::Params;
use crate::header_list::HeaderList;
use crate::observe::metrics::Served;
use crate::observe::request_log::{LegLine, LogLevel, RequestLine, RequestRecord};
use crate::race::{Leg, LegRecord, RaceEnd, RaceState};
use crate::request::body_watch::fixed_length;
use crate::request::coalesce::{FlightId, Role};
use crate::request::outbound::hop_by_hop_fields;

/// The answer a race ended with, as the Worker sees it.
#[derive(Clone, Copy)]
pub struct Answer<'a> {
    /// The kept leg's response status (`None` without a response).
    pub status: Option<u16>,
    /// That response's header fields (none without a response).
    pub headers: &'a HeaderList,
    /// The request's header fields (they pick a stored variant).
    pub request: &'a HeaderList,
    /// The generation of the URL's stored variants a lookup found, if any
    /// (a varying answer is stored in it, else in a new one).
    pub generation: Option<&'a str>,
    /// A stale entry that `stale-if-error` lets stand in for a failure,
    /// when there is one: its status and its fields.
    pub stale_if_error: Option<(u16, &'a EntryHead)>,
    /// The stored entry the legs asked about with its validators (a
    /// revalidation, a refresh), when they did: its status and its fields.
    /// A `304` answers with this entry, updated by the `304`'s fields.
    pub revalidated: Option<(u16, &'a EntryHead)>,
    /// An analytics dataset is bound (it takes the log line's fields).
    pub analytics: bool,
}

impl Answer<'_> {
    fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).map(std::borrow::Cow::into_owned)
    }
}

impl std::fmt::Debug for Answer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Answer")
            .field("status", &self.status)
            .field(
                "stale_if_error",
                &self.stale_if_error.map(|(status, _)| status),
            )
            .finish_non_exhaustive()
    }
}

/// What the Worker does with a finished race.
#[derive(Debug)]
pub struct Completion {
    /// The status the client is answered (`answered_status`, or the stale
    /// entry's on a rescue).
    pub status: u16,
    /// Serve the stale entry instead of the failure (RFC 5861
    /// `stale-if-error`), with these edits to its stored fields (its
    /// current age among them).
    pub rescue: Option<HeaderEdits>,
    /// A `304` to the legs' validators: the answer is the revalidated
    /// entry with these edits to its stored fields (RFC 9111 section
    /// 4.3.4), and that is what is stored.
    pub merged: Option<HeaderEdits>,
    /// Store the answer: where, its fields as stored, and the ticket the
    /// glue hands back when the copy is put ([`Isolate::copy_stored`]).
    /// Its declared length is already claimed from the held-body cap.
    pub store: Option<(StorePlan, StoreTicket)>,
    /// A successful write: the URLs whose stored entries it invalidated
    /// (the isolate has recorded it; the cache deletes them before the
    /// client hears back). Empty otherwise.
    pub invalidate: Vec<String>,
    /// The `x-hedge` value: `none`, `primary`, `hedge`, `failed`, `stale`.
    pub x_hedge: &'static str,
    /// The `Server-Timing` value.
    pub server_timing: String,
    /// The kept answer's fields a proxy does not pass on: the client's
    /// copy leaves them out.
    pub drop_fields: Vec<String>,
    /// The kept answer's declared body length, when the runtime passes
    /// the body through unchanged (a body cut short must not pass as whole).
    pub body_length: Option<u64>,
    /// What is written of the request (with the status the client is
    /// answered), as the isolate billed it: the log line, the data point.
    pub record: RequestRecord,
    /// A PoP push to send in the background, encoded.
    pub push: Option<Vec<u8>>,
    /// What the glue does after the race, in order (only the steps that
    /// apply): the same steps for a client's request and a refresh, in
    /// each one's order.
    pub after_race: Vec<AfterRace>,
    /// The race's timeout, for the 504's message.
    pub timeout_ms: f64,
    /// How long the answer's body may stay silent (`HEDGE_BODY_IDLE_TIMEOUT_MS`).
    pub body_idle_timeout_ms: Option<f64>,
}

/// One thing the glue does after a race, in the order
/// [`Completion::after_race`] lists: a client's request and a refresh run
/// the same steps through one driver, and differ only in the list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterRace {
    /// The kept answer becomes the entry a `304` updated (`merged`); when
    /// it cannot be rebuilt, the store's claim is given back and the steps
    /// stop (never the bare `304` stored or served).
    Merge,
    /// Delete the stored entries a write invalidated (`invalidate`), before
    /// the client hears back.
    Invalidate,
    /// Take the store's copy of the kept answer (`store`) and release the
    /// flight's waiters either way (not stored: released now, as the
    /// headers say so, not later).
    Store,
    /// Send the PoP push (`push`) in the background.
    Push,
    /// Answer the client: the stale entry (`rescue`) or the kept answer;
    /// when no response can be built, the steps stop.
    Respond,
    /// Write the log line and data point (`record`).
    Log,
    /// Nobody reads the answer: cancel its unread branch (the store reads
    /// its own copy).
    Discard,
    /// Run the store's put to its end: a refresh's claim on the key holds
    /// until the entry is replaced, so a stale hit meanwhile starts no
    /// second one. (A client's store is handed to the invocation instead.)
    AwaitStore,
}

impl Completion {
    /// What the glue does after the race, in order. A client's request:
    /// the cache first (a write's deletions before the client hears back),
    /// then the push, the response and, once it is built, the log line. A
    /// refresh (`refresh`, nobody waiting): the log line first, the cache,
    /// and its store awaited.
    fn steps_after_race(&self, refresh: bool) -> Vec<AfterRace> {
        use AfterRace::*;
        let merge = self.merged.as_ref().map(|_| Merge);
        let invalidate = (!self.invalidate.is_empty()).then_some(Invalidate);
        let cache = [merge, invalidate, Some(Store)];
        if refresh {
            let await_store = self.store.as_ref().map(|_| AwaitStore);
            let rest = [Some(Discard), await_store];
            [Some(Log)]
                .into_iter()
                .chain(cache)
                .chain(rest)
                .flatten()
                .collect()
        } else {
            let push = self.push.as_ref().map(|_| Push);
            let rest = [push, Some(Respond), Some(Log)];
            cache.into_iter().chain(rest).flatten().collect()
        }
    }
}

/// What the isolate needs back when a store's copy is put: its body's
/// declared length (the copy is kept only whole), the bytes claimed for it,
/// the route, and the coalesced flight it ends.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreTicket {
    pub(super) url: String,
    pub(super) route: String,
    pub(super) refresh: bool,
    pub(super) flight: Option<FlightId>,
    pub(super) expected_len: Option<u64>,
    pub(super) held_bytes: u64,
}

/// The status the client is answered after a race that ended `end`, the
/// kept leg's response `kept` (the origin's own answer reaches the client
/// as it is; without one the Worker says 504 for a timeout, 499 to a
/// client gone, 502 for an origin not reached).
fn answered_status(end: Option<RaceEnd>, kept: Option<u16>) -> u16 {
    match (end, kept) {
        (_, Some(status)) => status,
        (Some(RaceEnd::TimedOut), None) => 504,
        (Some(RaceEnd::ClientGone), None) => 499,
        _ => 502,
    }
}

/// The leg whose HTTP answer goes to the client, if any.
pub(super) fn answered_leg(state: &RaceState) -> Option<Leg> {
    (state.end)
        .and_then(RaceEnd::kept_leg)
        .filter(|leg| state.leg(*leg).status.is_some())
}

/// `x-hedge` for a race that ended with `end`.
pub(super) fn x_hedge(state: &RaceState, rescue: bool) -> &'static str {
    match (state.end, state.hedge_sent()) {
        _ if rescue => "stale",
        (Some(RaceEnd::Won(leg)), true) => leg.as_str(),
        (Some(RaceEnd::BothFailed { .. } | RaceEnd::TimedOut), true) => "failed",
        _ => "none",
    }
}

/// The `Server-Timing` value of a race that ended at `now_ms`.
pub(super) fn server_timing(
    params: &Params,
    state: &RaceState,
    started_ms: f64,
    now_ms: f64,
) -> String {
    let mut parts = Vec::new();
    let answered = answered_leg(state);
    if let Some(leg) = answered {
        let winner = state.leg(leg);
        if let (Some(elapsed), Some(origin)) =
            (winner.elapsed_ms(now_ms), params.origins.get(winner.origin))
        {
            parts.push(format!("origin;dur={elapsed:.1};desc=\"{}\"", origin.name));
        }
    }
    // Every leg failed and this is an origin's own failure answer: whose.
    let failed = matches!(
        state.end,
        Some(RaceEnd::BothFailed { .. } | RaceEnd::PrimaryFailed)
    );
    if let (true, Some(leg)) = (failed, answered) {
        parts.push(format!("origin-failure;desc=\"{}\"", leg.as_str()));
    }
    if let Some(choice) = state.plan.delay {
        parts.push(format!(
            "hedge-delay;dur={:.1};desc=\"{}\"",
            choice.delay_ms,
            choice.basis.as_str()
        ));
    }
    if let (true, Some(cause)) = (state.hedge_sent(), state.hedge_cause) {
        parts.push(format!("hedge;desc=\"{}\"", cause.as_str()));
    }
    if state.third_attempt_sent() {
        parts.push("third-attempt".to_string());
    }
    if let Some(reason) = state.no_hedge {
        parts.push(format!("hedge-skip;desc=\"{}\"", reason.as_str()));
    }
    parts.push(format!("total;dur={:.1}", now_ms - started_ms));
    parts.join(", ")
}

/// One leg as a log line and in a public error body (`error` and `url` are
/// dropped there with [`public_leg`]).
fn leg_line(params: &Params, leg: Leg, record: &LegRecord, now_ms: f64) -> LegLine {
    let origin = params.origins.get(record.origin);
    LegLine {
        leg: leg.as_str(),
        origin: origin.map_or_else(String::new, |o| o.name.clone()),
        status: record.status,
        failure: record.failure_kind(),
        error: record.error.clone(),
        url: origin
            .filter(|_| record.error.is_some())
            .map(|o| o.base_url.clone()),
        elapsed_ms: record.elapsed_ms(now_ms),
        aborted: record.aborted,
    }
}

/// A leg for a public body: the runtime's text stays in the logs.
pub fn public_leg(mut line: LegLine) -> LegLine {
    line.error = None;
    line.url = None;
    line
}

/// The legs that ran, as lines.
pub fn leg_lines(params: &Params, state: &RaceState, now_ms: f64) -> Vec<LegLine> {
    let mut legs = vec![leg_line(
        params,
        Leg::Primary,
        state.leg(Leg::Primary),
        now_ms,
    )];
    if let Some(first) = &state.failed_hedge {
        legs.push(leg_line(params, Leg::Hedge, first, now_ms));
    }
    if state.hedge_sent() {
        let mut line = leg_line(params, Leg::Hedge, state.leg(Leg::Hedge), now_ms);
        if state.failed_hedge.is_some() {
            line.leg = "third";
        }
        legs.push(line);
    }
    legs
}

/// What the request is known for when its race ends (`request_id`, its
/// trace and method given); the status is filled in once the response is built.
pub(super) fn log_line(
    params: &Params,
    state: &RaceState,
    exchange: &Exchange,
    answered_by: &'static str,
    total_ms: f64,
    version: &std::rc::Rc<str>,
    now_ms: f64,
) -> RequestLine {
    let plan = &state.plan;
    RequestLine {
        level: "info",
        request_id: exchange.request_id.clone(),
        trace_id: exchange.trace.trace_id.clone(),
        method: exchange.method.clone(),
        route: plan.route.key.clone(),
        status: 0,
        answered_by: answered_by.to_string(),
        total_ms,
        hedge_delay_ms: plan.delay.map(|d| d.delay_ms),
        delay_basis: plan.delay.map(|d| d.basis.as_str()),
        hedge_sent: state.hedge_sent(),
        hedge_cause: (state.hedge_cause)
            .filter(|_| state.hedge_sent())
            .map(|cause| cause.as_str()),
        hedge_skip: state.no_hedge.map(|reason| reason.as_str()),
        legs: leg_lines(params, state, now_ms),
        version: std::rc::Rc::clone(version),
        refresh: exchange.refresh,
        error_lines_left_out: 0,
    }
}

impl Isolate {
    /// What follows the exchange's race (not for a client that
    /// left), at `now_ms`, for `url`.
    pub fn complete(
        &mut self,
        exchange: &Exchange,
        state: &RaceState,
        answer: &Answer<'_>,
        url: &str,
        now_ms: f64,
    ) -> Completion {
        let won = matches!(state.end, Some(RaceEnd::Won(_)));
        // A 304 to the Worker's own validators: every rule below reads the
        // entry it updated.
        let merged = match (won, answer.status, answer.revalidated) {
            (true, Some(304), Some((_, entry))) => Some(entry.merged_edits(answer.headers)),
            _ => None,
        };
        let merged_fields = (merged.as_ref().zip(answer.revalidated))
            .map(|(edits, (status, entry))| (status, edits.applied_to(&entry.stored)));
        let answer = &match &merged_fields {
            Some((status, fields)) => Answer {
                status: Some(*status),
                headers: fields,
                ..*answer
            },
            None => *answer,
        };
        let mut done = Completion {
            merged,
            ..self.complete_answer(exchange, state, answer, url, now_ms)
        };
        done.after_race = done.steps_after_race(exchange.refresh);
        done
    }

    /// [`Isolate::complete`] of `answer` as it stands (a `304` merged).
    fn complete_answer(
        &mut self,
        exchange: &Exchange,
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
        let rescue = answer.stale_if_error.is_some() && origin_failed;
        // Computed once, for the metrics (whose counters the stats page reads).
        // A refresh's failure reached no client (it had the stale copy), but
        // it is the origin's, and shows among the recent errors.
        let summary = state.summary(client_error && !rescue && !exchange.refresh, now_ms);
        let total_ms = now_ms - exchange.started_ms;
        if summary.error || (exchange.refresh && client_error) {
            self.note_error(state, answer.status, exchange.refresh, now_ms);
        }
        let served = match () {
            _ if exchange.refresh => Served::Refresh,
            _ if rescue => Served::StaleIfError,
            _ => Served::Origin,
        };
        let names = &self.origin_names;
        (self.metrics).record(names, state, &summary, served, total_ms, now_ms);
        let status = answer.status.filter(|_| won);
        let (invalidate, store) = self.cache_effects(exchange, answer, status, rescue, url, now_ms);
        let x_hedge = x_hedge(state, rescue);
        let stale = answer.stale_if_error.filter(|_| rescue);
        let answered = match stale {
            Some((status, _)) => status,
            None => answered_status(state.end, answer.status),
        };
        let record = match self.params.log_level != LogLevel::Off || answer.analytics {
            true => self.record(
                state,
                exchange,
                x_hedge,
                answered,
                total_ms,
                answer.analytics,
                now_ms,
            ),
            false => RequestRecord::default(),
        };
        // A refresh runs where no push can go out (after its client's
        // response, in the background): the next request's completion takes it.
        let push =
            (!exchange.refresh && self.hedger.pop.push_due(now_ms)).then(|| self.take_push(now_ms));
        Completion {
            status: answered,
            timeout_ms: state.plan.timeout_ms,
            body_idle_timeout_ms: self.params.body_idle_timeout_ms,
            merged: None,
            rescue: stale.map(|(_, entry)| {
                let age_s = entry.meta.freshness.current_age_s(now_ms / 1000.0) as u64;
                entry.served_edits(Some(age_s), false)
            }),
            store,
            invalidate,
            x_hedge,
            server_timing: server_timing(&self.params, state, exchange.started_ms, now_ms),
            drop_fields: (hop_by_hop_fields(answer.headers).into_iter())
                .map(str::to_string)
                .collect(),
            body_length: fixed_length(
                answer.headers.get("content-length").as_deref(),
                answer.headers.get("content-encoding").as_deref(),
            ),
            record,
            push,
            after_race: Vec::new(),
        }
    }

    /// What a race's answer (`status` when it won, `rescue` when a stale
    /// copy stands in for it) does to the shared cache: the URLs a
    /// successful write invalidates (recorded now), and the freshness it is
    /// stored with.
    fn cache_effects(
        &mut self,
        exchange: &Exchange,
        answer: &Answer<'_>,
        status: Option<u16>,
        rescue: bool,
        url: &str,
        now_ms: f64,
    ) -> (Vec<String>, Option<(StorePlan, StoreTicket)>) {
        let invalidate = match status {
            Some(s) if invalidates(&exchange.method, s) => {
                let targets = invalidation::targets(url, &|n| answer.header(n));
                self.invalidate(&targets, now_ms);
                targets
            }
            _ => Vec::new(),
        };
        let store = match (exchange.cache.is_some() && !rescue, status) {
            (true, Some(s)) => {
                let fresh =
                    response_freshness(s, &|n| answer.header(n), exchange.started_ms, now_ms)
                        .filter(|_| self.may_store(url, exchange.started_ms));
                self.learn_storable(&exchange.route.key, fresh.is_some());
                let ids = &mut self.ids;
                let generation = || answer.generation.map_or_else(|| ids.hex(2), str::to_string);
                let plan = fresh.and_then(|(meta, keep_secs)| {
                    store_plan(
                        url,
                        answer.request,
                        answer.headers,
                        generation,
                        meta,
                        keep_secs,
                    )
                });
                // A storable answer whose `Vary` gives no key: the route stays
                // known (looked up), its latest answer unstorable (not coalesced).
                if fresh.is_some() && plan.is_none() {
                    self.learn_storable(&exchange.route.key, false);
                }
                plan.and_then(|plan| self.ticket(exchange, url, plan))
            }
            _ => None,
        };
        (invalidate, store)
    }

    /// The ticket for storing `plan`: a declared length is claimed from
    /// the held-body cap now (the copy is a tee, and what the cache has read
    /// and the client has not is held). `None` when it does not fit: not
    /// stored, and a client's route learns its answer was not storable.
    fn ticket(
        &mut self,
        exchange: &Exchange,
        url: &str,
        plan: StorePlan,
    ) -> Option<(StorePlan, StoreTicket)> {
        let held_bytes = plan.expected_len.unwrap_or(0);
        if !self.held_bodies.try_hold(held_bytes) {
            if !exchange.refresh {
                self.learn_storable(&exchange.route.key, false);
            }
            return None;
        }
        let ticket = StoreTicket {
            url: url.to_string(),
            route: exchange.route.key.clone(),
            refresh: exchange.refresh,
            flight: match exchange.role {
                Role::Leader(id) => Some(id),
                _ => None,
            },
            expected_len: plan.expected_len,
            held_bytes,
        };
        Some((plan, ticket))
    }

    /// The request's log line and data point, as billed for its status.
    #[allow(clippy::too_many_arguments)]
    fn record(
        &mut self,
        state: &RaceState,
        exchange: &Exchange,
        x_hedge: &'static str,
        answered: u16,
        total_ms: f64,
        analytics: bool,
        now_ms: f64,
    ) -> RequestRecord {
        let params = &self.params;
        let mut line = log_line(
            params,
            state,
            exchange,
            x_hedge,
            total_ms,
            &self.version,
            now_ms,
        );
        line.status = answered;
        let billed = self.bill(line.status, analytics, now_ms);
        line.error_lines_left_out = billed.lines_left_out;
        let error = line.status >= 500;
        if error {
            line.level = "error";
        }
        RequestRecord {
            line: billed.log.then(|| line.to_json()),
            error,
            point: billed.weight.map(|weight| line.data_point(weight)),
        }
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
        let leg = answered_leg(state).unwrap_or(Leg::Primary);
        let origin = (self.origin_names.get(state.leg(leg).origin)).cloned();
        if self.recent_errors.len() >= RECENT_ERRORS {
            self.recent_errors.pop_front();
        }
        self.recent_errors.push_back(RecentError {
            at_ms: now_ms,
            route: state.plan.route.key.clone(),
            status,
            what,
            origin,
        });
    }
}
