//! Writes the per-request JSON log line ([`hedgehog_core::observe::request_log`],
//! built and billed by the isolate's completion) and, with the same fields,
//! the analytics data point.

use worker::{console_error, console_log, AnalyticsEngineDataset};

use hedgehog_core::edge::{Billed, RequestLine};

/// Writes what the isolate billed for `line`: the line itself (at the
/// configured level, error events within the cap) and its data point (a
/// dataset bound, the request in the sample).
pub(crate) fn write(line: RequestLine, billed: Billed, dataset: Option<&AnalyticsEngineDataset>) {
    if let (Some(dataset), Some(weight)) = (dataset, billed.weight) {
        super::analytics::write(dataset, &line, weight);
    }
    if !billed.log {
        return;
    }
    // The completion made a 5xx's line an error.
    if line.level == "error" {
        console_error!("{}", line.to_json());
    } else {
        console_log!("{}", line.to_json());
    }
}
