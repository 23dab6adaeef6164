//! Emits the per-request JSON log line ([`hedgehog_core::observe::request_log`],
//! built by the isolate's completion) and, with the same fields, the
//! analytics data point, as the isolate's cap on error events allows.

use worker::{console_error, console_log, AnalyticsEngineDataset};

use super::clock::now_ms;
use super::isolate::Shared;
use hedgehog_core::edge::RequestLine;

/// Completes the line with the status sent, and writes what the isolate
/// bills for it: the line (at the configured level) and a data point (a
/// dataset bound, the request in the sample), error events within the cap.
pub(crate) fn finish(
    isolate: &Shared,
    mut line: RequestLine,
    status: u16,
    dataset: Option<&AnalyticsEngineDataset>,
) {
    line.status = status;
    let billed = (isolate.borrow_mut()).bill(status, dataset.is_some(), now_ms());
    if let (Some(dataset), Some(weight)) = (dataset, billed.weight) {
        super::analytics::write(dataset, &line, weight);
    }
    if !billed.log {
        return;
    }
    line.error_lines_left_out = billed.lines_left_out;
    if status >= 500 {
        line.level = "error";
        console_error!("{}", line.to_json());
    } else {
        console_log!("{}", line.to_json());
    }
}
