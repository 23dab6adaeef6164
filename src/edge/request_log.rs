//! Writes what the isolate's completion billed of a request
//! ([`RequestRecord`]): its JSON log line, and its Analytics Engine data point.

use worker::{console_error, console_log, AnalyticsEngineDataset};

use hedgehog_core::edge::RequestRecord;

/// Writes `record`: the line at its level, the data point when a dataset
/// is bound.
pub(crate) fn write(record: RequestRecord, dataset: Option<&AnalyticsEngineDataset>) {
    if let (Some(dataset), Some(point)) = (dataset, &record.point) {
        super::analytics::write(dataset, point);
    }
    match (record.line, record.error) {
        (Some(line), true) => console_error!("{line}"),
        (Some(line), false) => console_log!("{line}"),
        (None, _) => {}
    }
}
