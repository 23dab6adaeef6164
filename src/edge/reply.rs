//! Turns a race report into the client's response: the winner's response with
//! hedge headers added, or a JSON error saying what each leg got.

use serde::Serialize;
use worker::{web_sys, Response};

use super::body_watch;
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
        Outcome::ClientGone => client_gone(request_id),
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

/// A 500 naming every bad configuration key.
pub(crate) fn config_error_response(errors: &[ConfigError]) -> worker::Result<web_sys::Response> {
    let body = ConfigErrorJson {
        error: "invalid_config",
        message:
            "the Worker's HEDGE_ORIGINS is unusable; no request is proxied until it is fixed (the Worker's logs say why)",
        invalid_keys: {
            let mut keys: Vec<&str> = errors.iter().map(|e| e.key.as_str()).collect();
            keys.dedup();
            keys
        },
    };
    json_response(500, &body, &[])
}

#[derive(Serialize)]
struct SimpleErrorJson<'a> {
    error: &'static str,
    message: &'static str,
    request_id: &'a str,
}

/// A 401 for an operator page without the right bearer token.
pub(crate) fn unauthorized(request_id: &str) -> worker::Result<web_sys::Response> {
    let body = SimpleErrorJson {
        error: "unauthorized",
        message: "this path needs Authorization: Bearer <HEDGE_STATS_TOKEN>",
        request_id,
    };
    json_response(
        401,
        &body,
        &[
            ("www-authenticate", "Bearer"),
            ("cache-control", "no-store"),
        ],
    )
}

/// A 405 naming the allowed method.
pub(crate) fn method_not_allowed(
    allow: &'static str,
    request_id: &str,
) -> worker::Result<web_sys::Response> {
    let body = SimpleErrorJson {
        error: "method_not_allowed",
        message: "the operator pages answer GET only",
        request_id,
    };
    json_response(405, &body, &[("allow", allow)])
}

/// A 500 for the Worker's own failure (an outbound request it could not
/// build): no origin was asked, none is blamed, and the detail is logged.
pub(crate) fn internal_error(request_id: &str) -> worker::Result<web_sys::Response> {
    simple_error(
        500,
        "internal_error",
        "the Worker could not forward this request",
        request_id,
    )
}

/// A 502 for an origin that could not be reached (outside a race).
pub(crate) fn origin_unreachable(request_id: &str) -> worker::Result<web_sys::Response> {
    simple_error(
        502,
        "origin_unreachable",
        "the origin could not be reached",
        request_id,
    )
}

/// What a request whose client disconnected returns: nobody reads it, so it
/// is as small as possible (499, nginx's "client closed request").
pub(crate) fn client_gone(request_id: &str) -> worker::Result<web_sys::Response> {
    simple_error(
        499,
        "client_closed_request",
        "the client went away",
        request_id,
    )
}

pub(crate) fn simple_error(
    status: u16,
    error: &'static str,
    message: &'static str,
    request_id: &str,
) -> worker::Result<web_sys::Response> {
    let body = SimpleErrorJson {
        error,
        message,
        request_id,
    };
    json_response(status, &body, &[(REQUEST_ID_HEADER, request_id)])
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

/// A 400 for a request the Worker cannot forward.
pub(crate) fn bad_request(message: &str, request_id: &str) -> worker::Result<web_sys::Response> {
    let body = ErrorJson {
        error: "bad_request",
        message: message.to_string(),
        request_id,
        legs: Vec::new(),
    };
    json_response(400, &body, &[(REQUEST_ID_HEADER, request_id)])
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

/// Statuses whose responses carry no body (Fetch standard "null body status").
pub(crate) fn null_body_status(status: u16) -> bool {
    matches!(status, 101 | 103 | 204 | 205 | 304)
}
