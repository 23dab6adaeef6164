//! Turns a race report into the client's response: the winner's response with
//! hedge headers added, or a JSON error saying what each leg got.

use serde::Serialize;
use worker::{web_sys, Response};

use super::body_watch;
use super::head::null_body_status;
use super::isolate::Shared;
use super::race::{Outcome, RaceReport};
use hedgehog_core::edge::{
    leg_lines, public_leg, Completion, ConfigError, LegLine, Served, REQUEST_ID_HEADER,
};

/// Response header saying which leg answered: `none`, `primary` or `hedge`
/// (`cache` for a cache hit, `coalesced` for a response shared with a
/// concurrent identical request).
pub(crate) const HEDGE_HEADER: &str = "x-hedge";

#[derive(Serialize)]
struct ErrorJson<'a> {
    error: &'static str,
    message: String,
    request_id: &'a str,
    /// Which origin each leg went to (by its configured name), what it
    /// answered, and only the *kind* of failure: the runtime's text can
    /// carry the origin's URL, so it stays in the logs.
    legs: Vec<LegLine>,
}

/// The public body for a bad configuration: the keys at fault, never their
/// values or the reasons (which quote values: origin URLs, tokens); those go
/// to the logs.
#[derive(Serialize)]
struct ConfigErrorJson<'a> {
    error: &'static str,
    message: &'static str,
    invalid_keys: Vec<&'a str>,
}

/// Request-level times for `Server-Timing`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// When the Worker received the request.
    pub(crate) start_ms: f64,
    /// When the race ended.
    pub(crate) now_ms: f64,
}

/// What the client gets for a finished race, as the isolate's completion says.
pub(crate) fn race_response(
    isolate: &Shared,
    report: RaceReport,
    request_id: &str,
    done: &Completion,
    timing: Timing,
) -> worker::Result<web_sys::Response> {
    let error = |status, error, message: String| {
        let legs = {
            let isolate = isolate.borrow();
            leg_lines(isolate.params(), &report.state, timing.now_ms)
        };
        let body = ErrorJson {
            error,
            message,
            request_id,
            legs: legs.into_iter().map(public_leg).collect(),
        };
        json_response(
            status,
            &body,
            &[
                (HEDGE_HEADER, done.x_hedge),
                ("server-timing", &done.server_timing),
                (REQUEST_ID_HEADER, request_id),
            ],
        )
    };
    match &report.outcome {
        Outcome::Won(response)
        | Outcome::PrimaryFailed(Some(response))
        | Outcome::BothFailed(Some((_, response))) => {
            let body = match (response.body(), done.body_idle_timeout_ms) {
                (Some(body), Some(idle_ms)) => Some(body_watch::watch(
                    done.body_length,
                    body,
                    idle_ms,
                    report.winner_controller.clone(),
                )?),
                (body, _) => body,
            };
            decorate(response, body, done, request_id)
        }
        Outcome::PrimaryFailed(None) => error(
            done.status,
            "origin_unreachable",
            "the origin could not be reached and no hedge was allowed".into(),
        ),
        Outcome::BothFailed(None) => error(
            done.status,
            "all_legs_failed",
            "both the primary and the hedge failed".into(),
        ),
        Outcome::ClientGone => Failure::ClientGone.response(request_id),
        Outcome::TimedOut => error(
            done.status,
            "origin_timeout",
            format!(
                "no origin answered within {} ms (HEDGE_TIMEOUT_MS)",
                done.timeout_ms
            ),
        ),
    }
}

/// A response served from the edge cache (built by the cache glue, so its
/// headers are the Worker's own to add to): no origin request, no hedge.
pub(crate) fn cache_hit_response(
    served: web_sys::Response,
    how: Served,
    request_id: &str,
    timing: Timing,
) -> worker::Result<web_sys::Response> {
    let total = timing.now_ms - timing.start_ms;
    let headers = served.headers();
    headers.set(HEDGE_HEADER, how.x_hedge())?;
    headers.append(
        "server-timing",
        &format!("cache;desc=\"{}\", total;dur={total:.1}", how.as_str()),
    )?;
    headers.set(REQUEST_ID_HEADER, request_id)?;
    Ok(served)
}

#[derive(Serialize)]
struct SimpleErrorJson<'a> {
    error: &'static str,
    message: &'a str,
    request_id: &'a str,
}

/// Every way a request ends without a race's answer, turned into a
/// response in one place ([`Failure::response`]): its status, its JSON
/// error body with the request id, and its fields. A race's own failures
/// (an origin unreachable or timed out, with what each leg got) are
/// [`race_response`]'s; a panic's 500 is `src/entry.mjs`'s.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Failure<'a> {
    /// The configuration is unusable (500): the keys at fault, never their
    /// values or the reasons (which quote values: origin URLs, tokens);
    /// those go to the logs. Before any request id exists.
    Config(&'a [ConfigError]),
    /// A request the Worker cannot forward (400), saying why.
    BadRequest(&'a str),
    /// The client went away (499, nginx's "client closed request"):
    /// nobody reads it, so it is as small as possible.
    ClientGone,
    /// The Worker's own failure (500): an outbound request it could not
    /// build. No origin was asked, none is blamed; the detail is logged.
    Internal,
    /// An origin that could not be reached outside a race (502).
    OriginUnreachable,
    /// An operator page without the right bearer token (401).
    Unauthorized,
    /// An operator page asked with another method than the one it answers (405).
    MethodNotAllowed(&'static str),
    /// An operator page whose source is not there (503): its error name and
    /// what to do about it.
    Unavailable(&'static str, &'static str),
}

impl Failure<'_> {
    /// The response for this failure of request `request_id`.
    pub(crate) fn response(self, request_id: &str) -> worker::Result<web_sys::Response> {
        let (status, error, message) = match self {
            Self::Config(errors) => {
                let mut keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
                keys.dedup();
                let body = ConfigErrorJson {
                    error: "invalid_config",
                    message: "the Worker's HEDGE_ORIGINS is unusable; no request is proxied until it is fixed (the Worker's logs say why)",
                    invalid_keys: keys,
                };
                return json_response(500, &body, &[]);
            }
            Self::BadRequest(message) => (400, "bad_request", message),
            Self::ClientGone => (499, "client_closed_request", "the client went away"),
            Self::Internal => (
                500,
                "internal_error",
                "the Worker could not forward this request",
            ),
            Self::OriginUnreachable => {
                (502, "origin_unreachable", "the origin could not be reached")
            }
            Self::Unauthorized => (
                401,
                "unauthorized",
                "this path needs Authorization: Bearer <HEDGE_STATS_TOKEN>",
            ),
            Self::MethodNotAllowed(_) => (
                405,
                "method_not_allowed",
                "the operator pages answer GET only",
            ),
            Self::Unavailable(error, message) => (503, error, message),
        };
        let body = SimpleErrorJson {
            error,
            message,
            request_id,
        };
        let response = json_response(status, &body, &[(REQUEST_ID_HEADER, request_id)])?;
        let headers = response.headers();
        match self {
            Self::Unauthorized => {
                headers.set("www-authenticate", "Bearer")?;
                headers.set("cache-control", "no-store")?;
            }
            Self::MethodNotAllowed(allow) => headers.set("allow", allow)?,
            _ => {}
        }
        Ok(response)
    }
}

/// A text body (the metrics) of `content_type`, never cached.
pub(crate) fn text_response(
    status: u16,
    text: &str,
    content_type: &str,
) -> worker::Result<web_sys::Response> {
    let response: web_sys::Response = Response::ok(text)?.with_status(status).into();
    let h = response.headers();
    h.set("content-type", content_type)?;
    h.set("cache-control", "no-store")?;
    Ok(response)
}

/// An HTML page with its content security policy, never framed or cached.
pub(crate) fn page_response(
    html: Option<web_sys::ReadableStream>,
    csp: &str,
) -> worker::Result<web_sys::Response> {
    let response = web_sys::Response::new_with_opt_readable_stream(html.as_ref())?;
    let h = response.headers();
    h.set("content-type", "text/html; charset=utf-8")?;
    h.set("content-security-policy", csp)?;
    h.set("x-content-type-options", "nosniff")?;
    h.set("referrer-policy", "no-referrer")?;
    h.set("cache-control", "no-store")?;
    Ok(response)
}

pub(crate) fn json_response<T: Serialize>(
    status: u16,
    body: &T,
    headers: &[(&str, &str)],
) -> worker::Result<web_sys::Response> {
    let response: web_sys::Response = Response::from_json(body)?.with_status(status).into();
    let h = response.headers();
    for (name, value) in headers {
        h.set(name, value)?;
    }
    Ok(response)
}

/// The origin's response, body streaming, with our headers added and the
/// fields a proxy does not pass on left out (`done.drop_fields`). A
/// fetched response's headers are immutable, so it is re-wrapped: the
/// runtime copies status and headers natively and the body stream passes
/// through untouched.
fn decorate(
    response: &web_sys::Response,
    body: Option<web_sys::ReadableStream>,
    done: &Completion,
    request_id: &str,
) -> worker::Result<web_sys::Response> {
    let init = web_sys::ResponseInit::new();
    init.set_status(response.status());
    init.set_status_text(&response.status_text());
    init.set_headers_headers(&response.headers());
    // A 204, 205 or 304 may not be built with a body, even an empty one.
    let body = body.filter(|_| !null_body_status(response.status()));
    let out = web_sys::Response::new_with_opt_readable_stream_and_init(body.as_ref(), &init)?;
    let headers = out.headers();
    // Only those present: one call into JavaScript each (most answers have none).
    for name in &done.drop_fields {
        headers.delete(name)?;
    }
    headers.set(HEDGE_HEADER, done.x_hedge)?;
    headers.append("server-timing", &done.server_timing)?;
    headers.set(REQUEST_ID_HEADER, request_id)?;
    Ok(out)
}
