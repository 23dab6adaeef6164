//! Workers Analytics Engine data points for a sample of proxied requests
//! (`HEDGE_ANALYTICS_SAMPLE_PERCENT`, every 5xx), when the optional
//! `ANALYTICS` binding is configured (nothing is written, and nothing breaks,
//! without it).
//!
//! Index: route key. Blobs: origin that answered, route key, what answered
//! (`primary`, `hedge`, `none`, ...), delay basis, Worker version id.
//! Doubles: total ms, hedge delay ms (-1 without one), status, hedge sent
//! (0/1), weight (the requests the row stands for).

use worker::{console_warn, AnalyticsEngineDataPointBuilder, AnalyticsEngineDataset, Env};

use hedgehog_core::edge::RequestLine;

/// The optional dataset binding.
pub(crate) const ANALYTICS_BINDING: &str = "ANALYTICS";

/// The dataset, if bound.
pub(crate) fn dataset(env: &Env) -> Option<AnalyticsEngineDataset> {
    env.analytics_engine(ANALYTICS_BINDING).ok()
}

/// Writes one data point for a finished request.
pub(crate) fn write(dataset: &AnalyticsEngineDataset, line: &RequestLine, weight: f64) {
    // `answered_by` is the x-hedge value: the hedge's answer for "hedge";
    // the primary's for "none" and "primary"; for "failed", the first leg
    // whose origin answered at all (its answer went to the client).
    let leg = match line.answered_by.as_str() {
        "hedge" => line.legs.iter().find(|l| l.leg == "hedge"),
        "failed" => line.legs.iter().find(|l| l.status.is_some()),
        _ => line.legs.iter().find(|l| l.leg == "primary"),
    };
    let origin = leg.map_or("", |l| l.origin.as_str());
    let point = AnalyticsEngineDataPointBuilder::new()
        .indexes([line.route.as_str()])
        .blobs([
            origin,
            line.route.as_str(),
            line.answered_by.as_str(),
            line.delay_basis.unwrap_or(""),
            &line.version,
        ])
        .doubles([
            line.total_ms,
            line.hedge_delay_ms.unwrap_or(-1.0),
            f64::from(line.status),
            f64::from(u8::from(line.hedge_sent)),
            weight,
        ]);
    if let Err(e) = point.write_to(dataset) {
        console_warn!("hedgehog-edge: analytics data point not written: {e}");
    }
}
