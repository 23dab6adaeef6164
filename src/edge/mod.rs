//! The Worker layer: turns the incoming request into the core's inputs, runs
//! the race, and turns its result into the client's response.
//!
//! Modules: [`isolate`] holds per-isolate state, [`cache_policy`] and
//! [`coalesce`] serve from the cache and share concurrent misses, [`leg`]
//! sends one origin request, [`race`] runs the race, [`request_body`] reads a body that
//! may be sent twice, [`reply`] builds the response. It works on `web_sys`
//! types directly: the conversions into `worker::Request`/`Response` parse
//! and copy more than a proxy needs on its hot path.

mod abort_signal;
mod analytics;
mod body_watch;
mod cache;
mod coalesce;
mod fixed_length_body;
mod isolate;
mod leg;
mod pop;
mod race;
mod refresh;
mod reply;
mod request_body;
mod request_log;
mod stats_page;
mod websocket;

use worker::{console_error, event, js_sys, web_sys, Context, Env};

use hedgehog_core::cache::conditional::{not_modified, CONDITIONAL_REQUEST_HEADERS};
use hedgehog_core::cache::freshness::Verdict;
use hedgehog_core::cache::invalidation::{invalidates, same_origin_target};
use hedgehog_core::cache::policy::{is_reserved_host, request_cacheable, CacheRequestFacts};
use hedgehog_core::observe::request_log::LogLevel;
use hedgehog_core::request::coalesce::{FlightState, Role};
use hedgehog_core::request::eligibility::{eligibility, Eligibility, RequestFacts};
use hedgehog_core::request::outbound::{
    parse_traceparent, path_and_query, valid_request_id, TraceContext, REQUEST_ID_HEADER,
};
use hedgehog_core::request::route_key::route_key;
use leg::{OutboundBody, OutboundRequest};
use race::{Outcome, Target};
use reply::{CacheServe, Timing};
use request_body::BodyRead;

/// How much of a refused GET/HEAD body is read (and dropped) before the 400.
const REFUSED_BODY_DRAIN_BYTES: usize = 64 * 1024;

fn now_ms() -> f64 {
    js_sys::Date::now()
}

#[event(fetch)]
async fn fetch(req: web_sys::Request, env: Env, ctx: Context) -> worker::Result<web_sys::Response> {
    console_error_panic_hook::set_once();
    let start_ms = now_ms();
    let params = match isolate::params(&env, start_ms) {
        Ok(params) => params,
        Err(errors) => {
            for e in errors.iter() {
                console_error!("hedgehog-edge: invalid configuration: {e}");
            }
            return reply::config_error_response(&errors);
        }
    };
    let client_headers = req.headers();
    let header = |name: &str| client_headers.get(name).ok().flatten();
    let request_id =
        valid_request_id(header(REQUEST_ID_HEADER).as_deref()).unwrap_or_else(new_request_id);
    let url = req.url();
    let Some((path, query)) = path_and_query(&url) else {
        return reply::bad_request("the request URL could not be parsed", &request_id);
    };
    // The Worker keys its own cache entries under `.invalid` hosts: a request
    // naming one could read or plant them, so none gets near the cache or an origin.
    if is_reserved_host(&url) {
        return reply::bad_request("the request names a reserved host (.invalid)", &request_id);
    }
    let method = req.method();
    if path == params.stats.path {
        if let Some(response) = stats_page::respond(
            &params,
            &method,
            header("authorization").as_deref(),
            &request_id,
            start_ms,
        ) {
            return response;
        }
    }

    // A WebSocket upgrade is one long-lived exchange: passed through to the
    // primary as it is, never hedged, cached or coalesced.
    if header("upgrade").is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket")) {
        return websocket::pass_through(&params, &req, path, query, &request_id).await;
    }

    let content_length = match header("content-length") {
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => return reply::bad_request("Content-Length is not a number", &request_id),
        },
        None => None,
    };
    // GET and HEAD carry no body. Clients often send `Content-Length: 0` or
    // an empty chunked body anyway: that is dropped. A real body is the
    // client's error, answered 400 here, never sent on to blame an origin.
    let bodyless_method = method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD");
    let mut has_body = req.body().is_some();
    if bodyless_method && has_body {
        let had_bytes = request_body::drain_up_to(&req, REFUSED_BODY_DRAIN_BYTES).await;
        if had_bytes || content_length.is_some_and(|n| n > 0) {
            return reply::bad_request("a GET or HEAD request must not carry a body", &request_id);
        }
        has_body = false;
    }
    let facts = RequestFacts {
        method: &method,
        has_idempotency_key: params
            .eligibility
            .idempotency_header
            .as_deref()
            .and_then(header)
            .is_some_and(|v| !v.trim().is_empty()),
        content_length,
        has_body,
        is_upgrade: header("upgrade").is_some(),
    };
    let mut decision = eligibility(&facts, &params.eligibility);
    let route = route_key(path, &params.route_keys);
    // A client that goes away mid-race stops the race (workerd aborts the
    // incoming request's signal on disconnect).
    let client_signal = req.signal();
    let client_gone = {
        let signal = client_signal.clone();
        move || signal.aborted()
    };

    // Cache first: a fresh hit needs no origin, so it is never hedged.
    let cache_request = if params.cache && !has_body {
        request_cacheable(&CacheRequestFacts {
            method: &method,
            has_credentials: header("authorization").is_some() || header("cookie").is_some(),
            cache_control: header("cache-control").as_deref(),
            pragma: header("pragma").as_deref(),
        })
    } else {
        None
    };
    let cacheable = cache_request.is_some();
    let Some(hedger) = isolate::hedger() else {
        // Parsed above; gone only if the isolate state was reset meanwhile.
        return reply::internal_error(&request_id);
    };
    // Identical concurrent misses share one origin fetch: the first leads,
    // the rest wait for its response to land in the cache.
    let arrival = hedger
        .borrow_mut()
        .arrive(&url, &route, cacheable, start_ms);
    let mut leader = None;
    let mut found = cache::Lookup::default();
    let mut serve_as = CacheServe::Hit;
    match arrival.role {
        Role::Waiter(id) => {
            let Some(outcome) = coalesce::wait_for(&url, id, &client_gone).await else {
                return reply::client_gone(&request_id);
            };
            if matches!(outcome, FlightState::Stored | FlightState::Unknown) {
                found = cache::lookup(&url, &client_headers).await;
                serve_as = CacheServe::Coalesced;
            }
            // Nothing shared (or another variant): fetch as if this request had come alone.
        }
        Role::Leader(id) => leader = Some(coalesce::LeaderGuard::new(&url, id)),
        Role::Alone => {}
    }
    // A waiter that found nothing in the cache does not look again.
    if arrival.look_up_cache && serve_as == CacheServe::Hit {
        found = cache::lookup(&url, &client_headers).await;
    }
    // What the core says this request may do with the entry found.
    let mut stale = None;
    if let (Some(entry), Some(directives)) = (found.entry.take(), &cache_request) {
        // The request's arrival time: one clock read less on the hit path.
        let verdict = entry.meta.freshness.verdict(directives, start_ms / 1000.0);
        let fresh_or_swr = match verdict {
            Verdict::Fresh { age_s } => Some((age_s, serve_as)),
            Verdict::StaleWhileRevalidate { age_s } => {
                Some((age_s, CacheServe::StaleWhileRevalidate))
            }
            Verdict::Stale { .. } => None,
        };
        if let Some((age_s, how)) = fresh_or_swr {
            hedger.borrow_mut().cache_answer(&route, true);
            // Waiters can use what is stored (fresh, or stale while it is
            // refreshed) at once.
            if let Some(leader) = leader.take() {
                leader.stored();
            }
            if how == CacheServe::StaleWhileRevalidate {
                refresh::spawn(refresh::Refresh {
                    ctx: &ctx,
                    hedger: &hedger,
                    url: &url,
                    path,
                    query,
                    route: &route,
                    client_headers: &client_headers,
                    request_id: &request_id,
                    decision,
                    entry: &entry,
                });
            }
            // Only an entry with a validator can answer 304; its validators
            // are read only for a conditional request.
            let validated = how == CacheServe::Hit && entry.meta.freshness.has_validator;
            let (inm, ims) = match validated {
                true => (header("if-none-match"), header("if-modified-since")),
                false => (None, None),
            };
            let conditional_hit = (inm.is_some() || ims.is_some())
                && not_modified(
                    inm.as_deref(),
                    ims.as_deref(),
                    entry.header("etag").as_deref(),
                    entry.header("last-modified").as_deref(),
                );
            let served = cache::served(&entry, age_s, conditional_hit)?;
            let timing = Timing {
                start_ms,
                now_ms: now_ms(),
            };
            return reply::cache_hit_response(served, how, &request_id, timing);
        }
        stale = Some((entry, verdict));
    }

    // A body held for the hedge; one that outgrows a cap goes once, streamed.
    // Read before an origin is chosen: a client that hangs up mid-upload has
    // then claimed nothing (no recovery trial) from any origin.
    let mut held_claim = request_body::HeldClaim::default();
    let body = match decision {
        Eligibility::Hedgeable {
            buffer_body: true, ..
        } => {
            match request_body::read_up_to(&req, params.eligibility.max_body_bytes, &mut held_claim)
                .await?
            {
                BodyRead::Held(bytes) => OutboundBody::Buffered(bytes),
                BodyRead::Streamed(stream, reason) => {
                    decision = Eligibility::NotHedgeable(reason);
                    OutboundBody::Stream(Some(stream))
                }
            }
        }
        _ if !has_body => OutboundBody::Empty,
        _ => match req.body() {
            Some(stream) => OutboundBody::Stream(Some(stream)),
            None => OutboundBody::Empty,
        },
    };
    if client_gone() {
        return reply::client_gone(&request_id);
    }
    let plan = hedger.borrow_mut().plan(decision, &route, start_ms);

    // The client's trace if it sent a valid one; else a new, unsampled trace.
    let trace =
        parse_traceparent(header("traceparent").as_deref()).unwrap_or_else(|| TraceContext {
            trace_id: random_hex(4),
            flags: "00".to_string(),
        });
    let mut outbound = OutboundRequest {
        method,
        headers: leg::outbound_headers(&client_headers, &request_id)?,
        body,
        trace,
    };
    // A stale entry with a validator is revalidated: a 304 then refreshes it
    // (unless the client's request is conditional itself: the origin then
    // answers the client's own question).
    let client_conditional = || {
        CONDITIONAL_REQUEST_HEADERS
            .iter()
            .any(|name| client_headers.has(name).unwrap_or(false))
    };
    let revalidating = match &stale {
        Some((entry, _)) if !client_conditional() => entry.add_validators(&outbound.headers)?,
        _ => false,
    };
    let target = Target { path, query };
    let mut report = match race::run(
        &hedger,
        plan,
        &target,
        &mut outbound,
        &client_signal,
        now_ms,
    )
    .await
    {
        Ok(report) => report,
        Err(e) => {
            // The Worker's own failure: no origin was asked or is blamed.
            console_error!("hedgehog-edge: request {request_id}: could not send: {e}");
            return reply::internal_error(&request_id);
        }
    };
    drop(held_claim);
    // A 304 to the Worker's own revalidation: the client gets the stored
    // entry, updated by the 304's headers, and the cache keeps that.
    if let (true, Some((entry, _)), Outcome::Won(_, response)) =
        (revalidating, &stale, &mut report.outcome)
    {
        if response.status() == 304 {
            *response = cache::updated_by(entry, response)?;
        }
    }
    let (client_error, origin_failed) = match &report.outcome {
        Outcome::ClientGone => return reply::client_gone(&request_id),
        // RFC 5861: the errors a stale-if-error copy may stand in for.
        Outcome::Won(_, response) => (
            response.status() >= 500,
            matches!(response.status(), 500 | 502 | 503 | 504),
        ),
        _ => (true, true),
    };
    // No good answer, and a stale copy that may stand in for it.
    let rescue = match &stale {
        Some((
            entry,
            Verdict::Stale {
                serve_on_error: true,
                ..
            },
        )) if origin_failed => Some(entry),
        _ => None,
    };
    hedger
        .borrow_mut()
        .record_outcome(&report.state, client_error && rescue.is_none(), now_ms());
    if let Outcome::Won(_, response) = &report.outcome {
        if invalidates(&outbound.method, response.status()) {
            invalidate(&hedger, &url, response).await?;
        }
    }
    if let (true, None, Outcome::Won(_, response)) = (cacheable, rescue, &report.outcome) {
        let fresh = cache::freshness_of(response, start_ms, now_ms())
            .filter(|_| hedger.borrow().may_store(&url, start_ms));
        let stored = fresh.is_some_and(|(meta, keep_secs)| {
            let target = cache::StoreTarget {
                url: &url,
                request_headers: &client_headers,
                generation: found.generation.take(),
                meta,
                keep_secs,
            };
            cache::store(&ctx, target, response, {
                let leader = leader.take();
                move || {
                    if let Some(leader) = leader {
                        leader.stored();
                    }
                }
            })
        });
        hedger
            .borrow_mut()
            .cache_answer(&report.state.plan.route, stored);
    }
    // Not stored: waiters are released now, as the headers say so, not later.
    drop(leader);
    let timing = Timing {
        start_ms,
        now_ms: now_ms(),
    };
    let dataset = analytics::dataset(&env);
    let line = (params.log_level != LogLevel::Off || dataset.is_some()).then(|| {
        request_log::begin(
            &params,
            &report,
            &request_id,
            &outbound.trace,
            &outbound.method,
            timing.now_ms,
        )
    });
    let response = match rescue {
        Some(entry) => {
            // The failed answer's body is not read: its fetch is cut.
            if let Some(controller) = report.winner_controller.take() {
                controller.abort();
            }
            let age_s = entry.meta.freshness.current_age_s(timing.now_ms / 1000.0) as u64;
            cache::served(entry, age_s, false).and_then(|served| {
                reply::cache_hit_response(served, CacheServe::StaleIfError, &request_id, timing)
            })
        }
        None => reply::race_response(&params, report, &request_id, timing),
    };
    if let (Some(line), Ok(response)) = (line, &response) {
        let total_ms = timing.now_ms - start_ms;
        request_log::finish(line, response, params.log_level, total_ms, dataset.as_ref());
    }
    pop::client::maybe_push(&ctx, &env, &req, &params);
    response
}

/// A successful write to `url` (RFC 9111 section 4.4): the stored entries
/// for it and for the same-origin `Location` / `Content-Location` it names
/// are deleted before the client hears back, so its next read cannot get the
/// old copy; fetches begun before the write will not store theirs.
async fn invalidate(
    hedger: &std::cell::RefCell<hedgehog_core::hedger::Hedger>,
    url: &str,
    response: &web_sys::Response,
) -> worker::Result<()> {
    let mut targets = vec![url.to_string()];
    for name in ["location", "content-location"] {
        if let Some(target) = response
            .headers()
            .get(name)?
            .and_then(|value| same_origin_target(url, &value))
        {
            if !targets.contains(&target) {
                targets.push(target);
            }
        }
    }
    {
        let mut hedger = hedger.borrow_mut();
        let now = now_ms();
        for target in &targets {
            hedger.invalidate(target, now);
        }
    }
    futures::future::join_all(targets.iter().map(|t| cache::delete(t))).await;
    Ok(())
}

/// A random 128-bit request id in hex.
fn new_request_id() -> String {
    random_hex(4)
}

/// `words` random 32-bit words as lowercase hex (never all zero, which
/// trace context forbids).
pub(crate) fn random_hex(words: usize) -> String {
    let mut id = String::with_capacity(words * 8);
    for i in 0..words {
        let mut word = (js_sys::Math::random() * f64::from(u32::MAX)) as u32;
        if i == 0 && word == 0 {
            word = 1;
        }
        id.push_str(&format!("{word:08x}"));
    }
    id
}
