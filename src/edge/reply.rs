//! Turns a race report into the client's response: the winner's response with
//! hedge headers added, or a JSON error saying what each leg got.

use serde::Serialize;
use worker::{Headers, Response};

use super::hedged_fetch::{LegReport, RaceEnd, RacePlan, RaceReport};
use crate::config::{ConfigError, Params};
use crate::outbound::{forwarded_response_headers, REQUEST_ID_HEADER};
use crate::race::Leg;

/// Response header saying which leg answered: `none`, `primary` or `hedge`.
pub(crate) const HEDGE_HEADER: &str = "x-hedge";

#[derive(Serialize)]
struct LegJson<'a> {
    leg: &'static str,
    origin: &'a str,
    status: Option<u16>,
    error: Option<&'a str>,
    elapsed_ms: Option<f64>,
    aborted: bool,
}

#[derive(Serialize)]
struct ErrorJson<'a> {
    error: &'static str,
    message: String,
    request_id: &'a str,
    legs: Vec<LegJson<'a>>,
}

#[derive(Serialize)]
struct ConfigErrorJson<'a> {
    error: &'static str,
    message: &'static str,
    problems: Vec<ProblemJson<'a>>,
}

#[derive(Serialize)]
struct ProblemJson<'a> {
    key: &'a str,
    reason: &'a str,
}

/// What the client gets for a finished race.
pub(crate) fn race_response(
    params: &Params,
    plan: &RacePlan,
    report: RaceReport,
    request_id: &str,
    timing: Timing,
) -> worker::Result<Response> {
    let x_hedge = match (&report.end, report.hedge_sent) {
        (RaceEnd::Won(leg, _), true) => leg.as_str(),
        _ => "none",
    };
    let server_timing = server_timing(params, plan, &report, timing);
    let now_ms = timing.now_ms;
    match report.end {
        RaceEnd::Won(_, response) => decorate(response, x_hedge, &server_timing, request_id),
        RaceEnd::PrimaryFailed(Some(response)) => {
            decorate(response, x_hedge, &server_timing, request_id)
        }
        RaceEnd::PrimaryFailed(None) => error_response(
            502,
            "origin_unreachable",
            "the origin could not be reached and no hedge was allowed".into(),
            params,
            &report.primary,
            None,
            request_id,
            now_ms,
            &server_timing,
        ),
        RaceEnd::BothFailed => error_response(
            502,
            "all_legs_failed",
            "both the primary and the hedge failed".into(),
            params,
            &report.primary,
            Some(&report.hedge),
            request_id,
            now_ms,
            &server_timing,
        ),
        RaceEnd::TimedOut => error_response(
            504,
            "origin_timeout",
            format!(
                "no origin answered within {} ms (HEDGE_TIMEOUT_MS)",
                params.timeout_ms
            ),
            params,
            &report.primary,
            report.hedge_sent.then_some(&report.hedge),
            request_id,
            now_ms,
            &server_timing,
        ),
    }
}

/// Request-level times for `Server-Timing`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing {
    /// When the Worker received the request.
    pub(crate) start_ms: f64,
    /// When the race ended.
    pub(crate) now_ms: f64,
}

/// A 500 naming every bad configuration key.
pub(crate) fn config_error_response(errors: &[ConfigError]) -> worker::Result<Response> {
    let body = ConfigErrorJson {
        error: "invalid_config",
        message:
            "the Worker's HEDGE_* configuration is invalid; no request is proxied until it is fixed",
        problems: errors
            .iter()
            .map(|e| ProblemJson {
                key: &e.key,
                reason: &e.reason,
            })
            .collect(),
    };
    Ok(Response::from_json(&body)?.with_status(500))
}

/// A JSON error for a request the Worker refuses (bad URL and the like).
pub(crate) fn bad_request(message: &str, request_id: &str) -> worker::Result<Response> {
    let body = ErrorJson {
        error: "bad_request",
        message: message.to_string(),
        request_id,
        legs: Vec::new(),
    };
    Ok(Response::from_json(&body)?.with_status(400))
}

fn server_timing(params: &Params, plan: &RacePlan, report: &RaceReport, timing: Timing) -> String {
    let mut parts = Vec::new();
    if let RaceEnd::Won(leg, _) = &report.end {
        let winner = report.leg(*leg);
        if let Some(elapsed) = winner.elapsed_ms(timing.now_ms) {
            parts.push(format!(
                "origin;dur={elapsed:.1};desc=\"{}\"",
                params.origins[winner.origin].name
            ));
        }
    }
    match (plan.delay, plan.hedge_skip) {
        (Some(choice), _) => {
            parts.push(format!(
                "hedge-delay;dur={:.1};desc=\"{}\"",
                choice.delay_ms,
                choice.basis.as_str()
            ));
        }
        (None, Some(reason)) => parts.push(format!("hedge-skip;desc=\"{reason}\"")),
        (None, None) => {}
    }
    if report.hedge_denied {
        parts.push("hedge-skip;desc=\"budget\"".to_string());
    }
    parts.push(format!("total;dur={:.1}", timing.now_ms - timing.start_ms));
    parts.join(", ")
}

/// The winner's response with our headers added. Fetched responses have
/// immutable headers, so the headers are copied into a new set.
fn decorate(
    response: Response,
    x_hedge: &str,
    server_timing: &str,
    request_id: &str,
) -> worker::Result<Response> {
    let origin_headers: Vec<(String, String)> = response.headers().entries().collect();
    let headers = Headers::new();
    for (name, value) in forwarded_response_headers(&origin_headers) {
        headers.append(&name, &value)?;
    }
    headers.set(HEDGE_HEADER, x_hedge)?;
    headers.append("server-timing", server_timing)?;
    headers.set(REQUEST_ID_HEADER, request_id)?;
    Ok(response.with_headers(headers))
}

#[allow(clippy::too_many_arguments)]
fn error_response(
    status: u16,
    error: &'static str,
    message: String,
    params: &Params,
    primary: &LegReport,
    hedge: Option<&LegReport>,
    request_id: &str,
    now_ms: f64,
    server_timing: &str,
) -> worker::Result<Response> {
    let mut legs = vec![leg_json(params, Leg::Primary, primary, now_ms)];
    if let Some(h) = hedge {
        legs.push(leg_json(params, Leg::Hedge, h, now_ms));
    }
    let body = ErrorJson {
        error,
        message,
        request_id,
        legs,
    };
    let response = Response::from_json(&body)?.with_status(status);
    let headers = response.headers();
    headers.set(
        HEDGE_HEADER,
        if hedge.is_some() { "failed" } else { "none" },
    )?;
    headers.set("server-timing", server_timing)?;
    headers.set(REQUEST_ID_HEADER, request_id)?;
    Ok(response)
}

fn leg_json<'a>(params: &'a Params, leg: Leg, report: &'a LegReport, now_ms: f64) -> LegJson<'a> {
    LegJson {
        leg: leg.as_str(),
        origin: &params.origins[report.origin].name,
        status: report.status,
        error: report.error.as_deref(),
        elapsed_ms: report.elapsed_ms(now_ms),
        aborted: report.aborted,
    }
}
