//! What a request may do, decided once when it arrives: where it goes (the
//! stats page, a WebSocket pass-through, the proxy), whether it is refused,
//! and for the proxy its route, eligibility, cache use, coalescing role, how
//! its body is handled and, when nothing has to be looked up first, its plan.

use super::Step;
use crate::cache::conditional::CONDITIONAL_REQUEST_HEADERS;
use crate::cache::directives::Directives;
use crate::cache::policy::{is_reserved_host, request_cacheable, url_host, CacheRequestFacts};
use crate::config::{OperatorPage, StatsParams};
use crate::header_list::HeaderList;
use crate::race::Route;
use crate::request::coalesce::Role;
use crate::request::eligibility::{
    Eligibility, NotHedgeableReason, RequestFacts, METHOD_OVERRIDE_HEADERS,
};
use crate::request::ids::IdSource;
use crate::request::outbound::{
    connection_tokens, is_dropped_request_header, parse_traceparent, path_and_query,
    valid_request_id, TraceContext, REQUEST_ID_HEADER,
};

/// The request as the Worker received it, its head handed in as a value.
pub struct RequestHead<'a> {
    /// The full request URL.
    pub url: &'a str,
    /// The method, as sent.
    pub method: &'a str,
    /// The runtime gave the request a body stream (possibly empty).
    pub has_body: bool,
    /// Its header fields, read from the runtime once.
    pub headers: &'a HeaderList,
}

impl std::fmt::Debug for RequestHead<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestHead")
            .field("url", &self.url)
            .field("method", &self.method)
            .field("has_body", &self.has_body)
            .finish_non_exhaustive()
    }
}

/// What the isolate makes of a request head ([`super::Isolate::accept`]):
/// where the request goes.
#[derive(Debug)]
pub enum Intake {
    /// Refused before any origin or the cache is asked: a `400`.
    Refused {
        /// What is wrong, for the client.
        message: &'static str,
        /// The request's id.
        request_id: String,
    },
    /// The stats, metrics or dashboard (configured, with a token).
    Operator {
        /// Which.
        page: OperatorPage,
        /// The request's id.
        request_id: String,
    },
    /// A WebSocket upgrade: passed through to the primary as it is, never
    /// hedged, cached or coalesced.
    WebSocket {
        /// The request's id.
        request_id: String,
        /// The URL on that origin.
        url: String,
        /// Its `Authorization` carries an operator token: dropped.
        strip_authorization: bool,
    },
    /// Proxied (boxed: it is large, the others small), with what it does
    /// first.
    Proxy(Box<Exchange>, Step),
}

/// How a proxied request's body is handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyPlan {
    /// No body to forward.
    Empty,
    /// A GET or HEAD with a body stream: read and dropped; any byte in it
    /// (or `refuse` already, for a `Content-Length` above zero) makes it a `400`.
    Drain {
        /// Refused whatever the stream holds.
        refuse: bool,
    },
    /// Held in memory up to `cap` bytes for the hedge to resend.
    Hold {
        /// At most this many bytes (`HEDGE_TUNING.max_body_bytes`).
        cap: u64,
    },
    /// Forwarded once, streamed.
    Stream,
}

/// A proxied request (a client's, or a background refresh) from its intake
/// to its completion: what it may do before its race, and the race's plan.
#[derive(Debug)]
pub struct Exchange {
    /// The request's id (the client's, if valid; else new).
    pub request_id: String,
    /// The client's trace, or a new unsampled one.
    pub trace: TraceContext,
    /// The method, as sent.
    pub method: String,
    /// The client's path.
    pub path: String,
    /// The client's query, without `?`.
    pub query: Option<String>,
    /// The route it runs under.
    pub route: Route,
    /// Whether, and how, it may be hedged.
    pub eligibility: Eligibility,
    /// The request's cache directives, when the cache may answer it.
    pub cache: Option<Directives>,
    /// Lead a coalesced fetch, wait on one, or go alone.
    pub role: Role,
    /// Look in the cache first.
    pub look_up_cache: bool,
    /// How its body is handled.
    pub body: BodyPlan,
    /// The body's declared `Content-Length`: a body that ends short of it
    /// broke off on the client's side.
    pub declared_length: Option<u64>,
    /// Its `Authorization` carries an operator token: dropped before any
    /// origin sees the request (a scraper aimed at the wrong host or path).
    pub strip_authorization: bool,
    /// When it arrived.
    pub started_ms: f64,
    /// A background refresh of a stale entry (RFC 5861), not a client's
    /// request: nobody waits on its answer.
    pub refresh: bool,
    /// The client's header fields no leg carries, by name (lower case).
    pub dropped_headers: Vec<String>,
}

/// The names of the client's fields (`head`) that stay out of an exchange's
/// legs: what no leg carries ([`is_dropped_request_header`]), an
/// `Authorization` carrying an operator token (`strip_authorization`), and,
/// on a `refresh`, the client's own conditionals: a refresh asks about the
/// stored entry (its validators go instead), and a `304` to the client's
/// question would refresh an entry it says nothing about.
pub(super) fn dropped_headers(
    head: &HeaderList,
    strip_authorization: bool,
    refresh: bool,
) -> Vec<String> {
    let tokens = connection_tokens(head.get("connection").as_deref());
    let mut dropped: Vec<String> = (head.names())
        .filter(|&name| {
            is_dropped_request_header(name, &tokens)
                || (strip_authorization && name == "authorization")
                || (refresh && CONDITIONAL_REQUEST_HEADERS.contains(&name))
        })
        .map(str::to_string)
        .collect();
    // A field that came twice is dropped once.
    dropped.dedup();
    dropped
}

impl Exchange {
    /// The body outgrew a cap: it goes once, streamed, and is not hedged.
    pub fn not_hedgeable(&mut self, reason: NotHedgeableReason) {
        self.eligibility = Eligibility::NotHedgeable(reason);
        self.body = BodyPlan::Stream;
    }
}

/// The request's id, and its path and query: the facts every route needs.
pub(super) struct Target<'a> {
    pub(super) request_id: String,
    /// The host it names (lowercase, no port).
    pub(super) host: String,
    pub(super) path: &'a str,
    pub(super) query: Option<&'a str>,
}

/// Reads the request id and splits the URL; `Err` for a request refused
/// before anything else (an unparsable URL, a reserved host).
pub(super) fn target<'a>(head: &RequestHead<'a>, ids: &mut IdSource) -> Result<Target<'a>, Intake> {
    let header = |name: &str| head.headers.get(name);
    let request_id =
        valid_request_id(header(REQUEST_ID_HEADER).as_deref()).unwrap_or_else(|| ids.id());
    let Some((path, query)) = path_and_query(head.url) else {
        return Err(Intake::Refused {
            message: "the request URL could not be parsed",
            request_id,
        });
    };
    // The Worker keys its own cache entries under `.invalid` hosts: a request
    // naming one could read or plant them, so none gets near the cache or an origin.
    if is_reserved_host(head.url) {
        return Err(Intake::Refused {
            message: "the request names a reserved host (.invalid)",
            request_id,
        });
    }
    Ok(Target {
        request_id,
        host: url_host(head.url),
        path,
        query,
    })
}

/// The facts of a proxied request's body and its eligibility rules' input.
pub(super) struct BodyFacts {
    pub(super) content_length: Option<u64>,
    pub(super) body: BodyPlan,
    /// Whether a body is forwarded at all (GET/HEAD bodies never are).
    pub(super) has_body: bool,
}

/// GET and HEAD carry no body. Clients often send `Content-Length: 0` or an
/// empty chunked body anyway: that is dropped. A real body is the client's
/// error, answered 400, never sent on to blame an origin.
pub(super) fn body_facts(head: &RequestHead<'_>) -> Result<BodyFacts, &'static str> {
    let content_length = match head.headers.get("content-length") {
        Some(v) => match v.trim().parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => return Err("Content-Length is not a number"),
        },
        None => None,
    };
    let bodyless =
        head.method.eq_ignore_ascii_case("GET") || head.method.eq_ignore_ascii_case("HEAD");
    let body = match (bodyless, head.has_body) {
        (true, true) => BodyPlan::Drain {
            refuse: content_length.is_some_and(|n| n > 0),
        },
        (_, false) => BodyPlan::Empty,
        (false, true) => BodyPlan::Stream,
    };
    Ok(BodyFacts {
        content_length,
        body,
        has_body: head.has_body && !bodyless,
    })
}

/// The eligibility rules' input for `head`.
pub(super) fn request_facts<'a>(
    head: &'a RequestHead<'a>,
    body: &BodyFacts,
    idempotency_header: Option<&str>,
) -> RequestFacts<'a> {
    RequestFacts {
        method: head.method,
        has_idempotency_key: idempotency_header
            .and_then(|name| head.headers.get(name))
            .is_some_and(|v| !v.trim().is_empty()),
        content_length: body.content_length,
        has_body: body.has_body,
        is_upgrade: head.headers.has("upgrade"),
        method_override: METHOD_OVERRIDE_HEADERS
            .iter()
            .any(|name| head.headers.has(name)),
    }
}

/// The request's cache directives when the cache may answer it.
pub(super) fn cache_directives(head: &RequestHead<'_>, has_body: bool) -> Option<Directives> {
    let header = |name: &str| head.headers.get(name);
    if has_body {
        return None;
    }
    request_cacheable(&CacheRequestFacts {
        method: head.method,
        has_credentials: head.headers.has("authorization") || head.headers.has("cookie"),
        cache_control: header("cache-control").as_deref(),
        pragma: header("pragma").as_deref(),
    })
}

/// How a request's body (as read: `read`) is handled under `decision`: a
/// hedgeable one that must be replayed is held, up to `max_body_bytes`.
pub(super) fn body_plan(decision: Eligibility, read: BodyPlan, max_body_bytes: u64) -> BodyPlan {
    match (decision, read) {
        (
            Eligibility::Hedgeable {
                buffer_body: true, ..
            },
            BodyPlan::Stream,
        ) => BodyPlan::Hold {
            cap: max_body_bytes,
        },
        (_, plan) => plan,
    }
}

/// The client's trace if it sent a valid one; else a new, unsampled trace.
pub(super) fn trace(head: &RequestHead<'_>, ids: &mut IdSource) -> TraceContext {
    parse_traceparent(head.headers.get("traceparent").as_deref()).unwrap_or_else(|| TraceContext {
        trace_id: ids.id(),
        flags: "00".to_string(),
    })
}

/// Whether the request's `Authorization` carries an operator token (read
/// only when one is configured): such a header never goes to an origin.
pub(super) fn carries_operator_token(head: &RequestHead<'_>, stats: &StatsParams) -> bool {
    !stats.withheld.is_empty()
        && head
            .headers
            .get("authorization")
            .is_some_and(|a| stats.carries_token(&a))
}

/// A WebSocket upgrade request.
pub(super) fn is_websocket(head: &RequestHead<'_>) -> bool {
    head.headers
        .get("upgrade")
        .is_some_and(|u| u.trim().eq_ignore_ascii_case("websocket"))
}
