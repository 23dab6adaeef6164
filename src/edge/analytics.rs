//! Workers Analytics Engine data points for a sample of proxied requests
//! (`HEDGE_ANALYTICS_SAMPLE_PERCENT`, every 5xx), when the optional
//! `ANALYTICS` binding is configured (nothing is written, and nothing breaks,
//! without it).
//!
//! The point's fields are the core's (`RequestLine::data_point`): index
//! route key; blobs origin that answered, route key, what answered, delay
//! basis, Worker version id; doubles total ms, hedge delay ms, status,
//! hedge sent, weight (the requests the row stands for).

use worker::{console_warn, AnalyticsEngineDataPointBuilder, AnalyticsEngineDataset, Env};

use hedgehog_core::edge::DataPoint;

/// The optional dataset binding.
pub(crate) const ANALYTICS_BINDING: &str = "ANALYTICS";

/// The dataset, if bound.
pub(crate) fn dataset(env: &Env) -> Option<AnalyticsEngineDataset> {
    env.analytics_engine(ANALYTICS_BINDING).ok()
}

/// Writes one data point (the core's [`DataPoint`]: which fields, in which order).
pub(crate) fn write(dataset: &AnalyticsEngineDataset, point: &DataPoint) {
    let blobs: Vec<&str> = point.blobs.iter().map(String::as_str).collect();
    let builder = AnalyticsEngineDataPointBuilder::new()
        .indexes([point.index.as_str()])
        .blobs(blobs)
        .doubles(point.doubles.to_vec());
    if let Err(e) = builder.write_to(dataset) {
        console_warn!("hedgehog-edge: analytics data point not written: {e}");
    }
}
