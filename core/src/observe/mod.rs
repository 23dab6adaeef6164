//! What the Worker reports: per-route stats counters and the request log line.

pub mod request_log;
pub mod route_stats;
