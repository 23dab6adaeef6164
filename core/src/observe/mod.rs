//! What the Worker reports: per-route stats counters, the request log line,
//! and the metrics (counters and histograms, and their text exposition).

pub mod error_events;
pub mod exposition;
pub mod latency_export;
pub mod metrics;
pub mod request_log;
pub mod route_labels;
pub mod route_stats;
