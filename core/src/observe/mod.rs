//! What the Worker reports: the request log line, the error events, the route labels,
//! and the metrics (counters and histograms, and their text exposition).

pub mod error_events;
pub mod exposition;
pub mod latency_export;
pub mod metrics;
pub mod request_log;
pub mod route_labels;
