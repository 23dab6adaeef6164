//! Emits the per-request JSON log line ([`hedgehog_core::observe::request_log`],
//! built by the isolate's completion) and, with the same fields, the
//! analytics data point.

use worker::{console_error, console_log, AnalyticsEngineDataset};

use hedgehog_core::observe::request_log::{analytics_weight, LogLevel, RequestLine};

/// Completes the line with the status sent, logs it if the level asks, and
/// writes an analytics data point if a dataset is bound and the request is
/// in the sample (`sample_percent`).
pub(crate) fn finish(
    mut line: RequestLine,
    status: u16,
    level: LogLevel,
    dataset: Option<&AnalyticsEngineDataset>,
    sample_percent: f64,
) {
    line.status = status;
    if let Some(dataset) = dataset {
        let draw = worker::js_sys::Math::random();
        if let Some(weight) = analytics_weight(status, sample_percent, draw) {
            super::analytics::write(dataset, &line, weight);
        }
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
