//! One structured JSON log line per request, at a configured level.
//!
//! `off`: nothing; `error` (the default): requests that ended in a 5xx, a
//! timeout or without an origin answer; `info`: every proxied request. A
//! line is one JSON object so Workers Logs (or `wrangler tail`) can filter
//! and aggregate on its fields.

use serde::Serialize;

/// How much is logged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    /// Nothing.
    Off,
    /// Failed requests only.
    Error,
    /// Every request.
    Info,
}

/// The weight an Analytics Engine row of a request that ended with
/// `status` is written with, or `None` when it is not written: every 5xx
/// (weight 1, so errors are counted exactly), and of the rest one in
/// `weight` = 100 / `sample_percent` (rounded: the weighted quantiles take
/// whole weights) by `draw` (uniform in [0, 1)), each standing for `weight`
/// requests. Queries sum `_sample_interval * weight`.
pub fn analytics_weight(status: u16, sample_percent: f64, draw: f64) -> Option<f64> {
    if status >= 500 {
        return Some(1.0);
    }
    if sample_percent <= 0.0 {
        return None;
    }
    let weight = (100.0 / sample_percent).round().max(1.0);
    (draw * weight < 1.0).then_some(weight)
}

impl LogLevel {
    /// Parses `off`, `error` or `info` (any case).
    pub fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "off" => Some(LogLevel::Off),
            "error" => Some(LogLevel::Error),
            "info" => Some(LogLevel::Info),
            _ => None,
        }
    }

    /// Whether a request answered with `status` is logged at this level.
    pub fn logs(self, status: u16) -> bool {
        match self {
            LogLevel::Off => false,
            LogLevel::Error => status >= 500,
            LogLevel::Info => true,
        }
    }
}

/// One leg in the log line.
#[derive(Debug, Clone, Serialize)]
pub struct LegLine {
    /// `primary` or `hedge`.
    pub leg: &'static str,
    /// Origin name.
    pub origin: String,
    /// Response status, if it answered.
    pub status: Option<u16>,
    /// The kind of failure without an answer (`unreachable`, `invalid_status`).
    pub failure: Option<&'static str>,
    /// The runtime's error text (logs only: it can carry an origin's URL).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The origin's configured URL, when the leg failed without an answer
    /// (logs only, so an unreachable origin can be told apart at a glance).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Milliseconds to its response headers (or until cut short).
    pub elapsed_ms: Option<f64>,
    /// Cut short (lost the race or timed out).
    pub aborted: bool,
}

/// The log line of one request.
#[derive(Debug, Clone, Serialize)]
pub struct RequestLine {
    /// `error` for a 5xx, else `info`.
    pub level: &'static str,
    /// Request id (also sent to the origins and the client).
    pub request_id: String,
    /// W3C trace id.
    pub trace_id: String,
    /// Request method.
    pub method: String,
    /// Route key.
    pub route: String,
    /// Status sent to the client.
    pub status: u16,
    /// What answered: `primary`, `hedge`, `none`, `cache`, `coalesced` or an error kind.
    pub answered_by: String,
    /// Milliseconds from receipt to the response headers.
    pub total_ms: f64,
    /// The hedge delay, when one was armed.
    pub hedge_delay_ms: Option<f64>,
    /// Where the delay came from (`route`, `pop`, `cold`, ...).
    pub delay_basis: Option<&'static str>,
    /// Whether a hedge went out.
    pub hedge_sent: bool,
    /// Why it went out: `delay`, `stall` or `failure`.
    pub hedge_cause: Option<&'static str>,
    /// Why no hedge was armed or sent, if so.
    pub hedge_skip: Option<&'static str>,
    /// Each leg that ran.
    pub legs: Vec<LegLine>,
    /// A background refresh of a stale entry, not a client's request (left
    /// out when false).
    #[serde(skip_serializing_if = "is_false")]
    pub refresh: bool,
    /// The Worker version that served it (the deployment's version id;
    /// empty, and left out, when the runtime gives none).
    #[serde(skip_serializing_if = "no_version", serialize_with = "version_text")]
    pub version: std::rc::Rc<str>,
    /// Error lines this isolate left out (over its cap) since the last one
    /// it wrote ([`super::error_events`]); left out when none were.
    #[serde(skip_serializing_if = "is_zero")]
    pub error_lines_left_out: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn no_version(version: &std::rc::Rc<str>) -> bool {
    version.is_empty()
}

fn version_text<S: serde::Serializer>(version: &std::rc::Rc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(version)
}

impl RequestLine {
    /// The line as JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The request's Analytics Engine data point, standing for `weight`
    /// requests. Index: route key. Blobs: the origin that answered, route
    /// key, what answered (`primary`, `hedge`, `none`, ...), delay basis,
    /// Worker version id. Doubles: total ms, hedge delay ms (-1 without
    /// one), status, hedge sent (0/1), weight.
    pub fn data_point(&self, weight: f64) -> DataPoint {
        // `answered_by` is the x-hedge value: the hedge's answer for
        // "hedge"; the primary's for "none" and "primary"; for "failed",
        // the first leg whose origin answered at all (its answer went to
        // the client).
        let leg = match self.answered_by.as_str() {
            "hedge" => self.legs.iter().find(|l| l.leg == "hedge"),
            "failed" => self.legs.iter().find(|l| l.status.is_some()),
            _ => self.legs.iter().find(|l| l.leg == "primary"),
        };
        DataPoint {
            index: self.route.clone(),
            blobs: [
                leg.map_or_else(String::new, |l| l.origin.clone()),
                self.route.clone(),
                self.answered_by.clone(),
                self.delay_basis.unwrap_or("").to_string(),
                self.version.to_string(),
            ],
            doubles: [
                self.total_ms,
                self.hedge_delay_ms.unwrap_or(-1.0),
                f64::from(self.status),
                f64::from(u8::from(self.hedge_sent)),
                weight,
            ],
        }
    }
}

/// One Analytics Engine data point: an index, five blobs, five doubles
/// ([`RequestLine::data_point`] says which).
#[derive(Debug, Clone, PartialEq)]
pub struct DataPoint {
    /// The index (the route key).
    pub index: String,
    /// The blobs, in order.
    pub blobs: [String; 5],
    /// The doubles, in order.
    pub doubles: [f64; 5],
}

/// What the Worker writes of one request, each part when it is billed: its
/// log line as JSON (at error level or not) and its data point.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestRecord {
    /// The log line's text.
    pub line: Option<String>,
    /// The line is an error line (`console.error`, not `console.log`).
    pub error: bool,
    /// The data point.
    pub point: Option<DataPoint>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn analytics_rows_are_sampled_with_their_weight_and_every_error_is_kept() {
        assert_eq!(analytics_weight(503, 1.0, 0.99), Some(1.0));
        assert_eq!(analytics_weight(200, 1.0, 0.005), Some(100.0));
        assert_eq!(analytics_weight(200, 1.0, 0.5), None);
        assert_eq!(analytics_weight(200, 100.0, 0.999), Some(1.0));
        assert_eq!(analytics_weight(404, 0.0, 0.0), None);
        // Over many draws the weights add up to the requests.
        let total: f64 = (0..100_000)
            .filter_map(|i| analytics_weight(200, 5.0, f64::from(i) / 100_000.0))
            .sum();
        assert!((total - 100_000.0).abs() < 1.0, "{total}");
    }

    use super::*;

    #[test]
    fn levels_parse_and_filter_by_status() {
        assert_eq!(LogLevel::parse(" INFO "), Some(LogLevel::Info));
        assert_eq!(LogLevel::parse("verbose"), None);
        assert!(!LogLevel::Off.logs(500));
        assert!(LogLevel::Error.logs(502) && !LogLevel::Error.logs(404));
        assert!(LogLevel::Info.logs(200));
    }

    /// A hedged request's line, answered by the hedge.
    fn hedged_line() -> RequestLine {
        RequestLine {
            level: "info",
            request_id: "r1".into(),
            trace_id: "t".into(),
            method: "GET".into(),
            route: "/api".into(),
            status: 200,
            answered_by: "hedge".into(),
            total_ms: 12.5,
            hedge_delay_ms: Some(8.0),
            delay_basis: Some("route"),
            hedge_sent: true,
            hedge_cause: Some("delay"),
            hedge_skip: None,
            legs: vec![],
            version: "".into(),
            refresh: false,
            error_lines_left_out: 0,
        }
    }

    #[test]
    fn line_is_one_json_object() {
        let line = hedged_line();
        let text = line.to_json();
        assert!(!text.contains('\n'));
        assert!(
            !text.contains("refresh"),
            "a client's request says nothing of refreshes"
        );
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["answered_by"], "hedge");
        assert_eq!(v["hedge_delay_ms"], 8.0);
    }

    #[test]
    fn a_data_point_names_the_origin_whose_answer_the_client_got() {
        let leg = |leg: &'static str, origin: &str, status: Option<u16>| LegLine {
            leg,
            origin: origin.into(),
            status,
            failure: None,
            error: None,
            url: None,
            elapsed_ms: Some(3.0),
            aborted: false,
        };
        let mut line = RequestLine {
            hedge_delay_ms: None,
            delay_basis: None,
            legs: vec![leg("primary", "a", None), leg("hedge", "b", Some(200))],
            version: "v9".into(),
            ..hedged_line()
        };
        let point = line.data_point(4.0);
        assert_eq!(point.index, "/api");
        assert_eq!(
            point.blobs,
            ["b", "/api", "hedge", "", "v9"].map(String::from)
        );
        assert_eq!(point.doubles, [12.5, -1.0, 200.0, 1.0, 4.0]);
        line.answered_by = "none".into();
        assert_eq!(line.data_point(1.0).blobs[0], "a", "the primary's");
        // Every leg failed: the first whose origin answered at all.
        line.answered_by = "failed".into();
        line.legs[1].status = Some(503);
        assert_eq!(line.data_point(1.0).blobs[0], "b");
        line.legs.clear();
        assert_eq!(line.data_point(1.0).blobs[0], "", "no leg ran");
    }
}
