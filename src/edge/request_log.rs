//! Builds and emits the per-request JSON log line ([`hedgehog_core::observe::request_log`])
//! and, with the same fields, the analytics data point.

use worker::{console_error, console_log, web_sys, AnalyticsEngineDataset};

use super::race::RaceReport;
use super::reply::HEDGE_HEADER;
use hedgehog_core::config::Params;
use hedgehog_core::hedger::LegRecord;
use hedgehog_core::observe::request_log::{LegLine, LogLevel, RequestLine};
use hedgehog_core::race::Leg;
use hedgehog_core::request::outbound::TraceContext;

/// What is known before the response is built (the report is consumed by it).
pub(crate) fn begin(
    params: &Params,
    report: &RaceReport,
    request_id: &str,
    trace: &TraceContext,
    method: &str,
    now_ms: f64,
) -> RequestLine {
    let state = &report.state;
    let plan = &state.plan;
    let leg = |leg: Leg| {
        let l: &LegRecord = state.leg(leg);
        LegLine {
            leg: leg.as_str(),
            origin: params
                .origins
                .get(l.origin)
                .map_or_else(String::new, |o| o.name.clone()),
            status: l.status,
            error: l.error.clone(),
            elapsed_ms: l.elapsed_ms(now_ms),
            aborted: l.aborted,
        }
    };
    let mut legs = vec![leg(Leg::Primary)];
    if state.hedge_sent() {
        legs.push(leg(Leg::Hedge));
    }
    RequestLine {
        level: "info",
        request_id: request_id.to_string(),
        trace_id: trace.trace_id.clone(),
        method: method.to_string(),
        route: plan.route.clone(),
        status: 0,
        answered_by: String::new(),
        total_ms: 0.0,
        hedge_delay_ms: plan.delay.map(|d| d.delay_ms),
        delay_basis: plan.delay.map(|d| d.basis.as_str()),
        hedge_sent: state.hedge_sent(),
        hedge_cause: (state.hedge_cause)
            .filter(|_| state.hedge_sent())
            .map(|cause| cause.as_str()),
        hedge_skip: state.no_hedge.map(|reason| reason.as_str()),
        legs,
    }
}

/// Completes the line from the response, logs it if the level asks, and
/// writes an analytics data point if a dataset is bound.
pub(crate) fn finish(
    mut line: RequestLine,
    response: &web_sys::Response,
    level: LogLevel,
    total_ms: f64,
    dataset: Option<&AnalyticsEngineDataset>,
) {
    let status = response.status();
    line.status = status;
    line.total_ms = total_ms;
    line.answered_by = response
        .headers()
        .get(HEDGE_HEADER)
        .ok()
        .flatten()
        .unwrap_or_default();
    if let Some(dataset) = dataset {
        super::analytics::write(dataset, &line);
    }
    if !level.logs(status) {
        return;
    }
    if status >= 500 {
        line.level = "error";
        console_error!("{}", line.to_json());
    } else {
        console_log!("{}", line.to_json());
    }
}
