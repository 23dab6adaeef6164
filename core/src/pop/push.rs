//! The wire format between an isolate and its PoP aggregator (a Durable
//! Object): the push (what the isolate saw since its last push) and the reply
//! (what the whole PoP sees).
//!
//! JSON, because pushes are small (sparse buckets: a few hundred bytes to a
//! few KB) and readable in logs; every field is checked on decode, and a body
//! that fails any check is rejected whole, so a bad push changes no state.

use serde::{Deserialize, Serialize};

use crate::estimation::sketch::{bucket_index, BucketCounts, LatencySketch};
use crate::observe::metrics::MetricCounts;
use crate::pop::probes::ProbeVerdict;

/// The format version this code writes and accepts.
pub const PUSH_VERSION: u32 = 1;
/// Most keys in one push.
pub const MAX_PUSH_KEYS: usize = 512;
/// Most buckets per key in one push (a 1% sketch spanning 0.01 ms to 10 min
/// has about 1,800).
pub const MAX_BUCKETS_PER_KEY: usize = 4_096;
/// Most origins in one push.
pub const MAX_PUSH_ORIGINS: usize = 64;
/// Longest origin name or route key accepted.
pub const MAX_NAME_BYTES: usize = 256;
/// Largest count accepted in one bucket or counter of one push.
pub const MAX_COUNT: u64 = 1_000_000_000;
/// Largest push body accepted, in bytes.
pub const MAX_PUSH_BYTES: usize = 1 << 20;

/// Latencies above this (ms) are outside any sane sketch; their buckets are rejected.
const MAX_LATENCY_MS: f64 = 3_600_000.0;

/// One sketch bucket on the wire: (index, completed, censored).
pub type SparseBucket = (i32, u64, u64);

/// One (origin, route key)'s latency samples since the last push. An empty
/// `buckets` still asks for the key's PoP quantile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyDelta {
    /// Origin name (from the configuration).
    pub origin: String,
    /// Route key.
    pub route: String,
    /// Sparse buckets: `[index, completed, censored]`.
    pub buckets: Vec<SparseBucket>,
}

/// One origin's responses since the last push.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OriginDelta {
    /// Origin name.
    pub origin: String,
    /// Responses and failures seen from it.
    pub responses: u64,
    /// Of those, 5xx answers (and connection failures).
    pub errors_5xx: u64,
}

/// What one isolate sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Push {
    /// [`PUSH_VERSION`].
    pub version: u32,
    /// The quantile the isolate hedges at, in (0, 1).
    pub quantile: f64,
    /// Hedge-eligible requests since the last push.
    pub eligible: u64,
    /// Hedges sent since the last push.
    pub hedges: u64,
    /// Latency deltas per key, and the keys whose PoP quantile it wants.
    pub keys: Vec<KeyDelta>,
    /// Response counts per origin.
    pub origins: Vec<OriginDelta>,
    /// Per route policy with its own budget: its eligible requests and
    /// hedges since the last push (its PoP-wide share is kept apart).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_budgets: Vec<RouteShare>,
    /// The delay each of its busy routes would get now, and what the
    /// benefit rule predicts for it (the PoP's dashboard shows the latest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_delays: Vec<RouteDelayReport>,
    /// Requests that ended in an error since the last push (at most
    /// [`MAX_PUSH_ERRORS`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorReport>,
    /// The metrics counted since the last push that reached the
    /// aggregator (summed there for the PoP-scope metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<MetricCounts>,
    /// The Worker version the isolate runs (its deployment's version id),
    /// so the PoP can split its counts by version during a rollout.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub worker_version: String,
}

/// Most errors one push reports.
pub const MAX_PUSH_ERRORS: usize = 20;

/// The delay a route's requests on one primary would get now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteDelayReport {
    /// Primary origin name.
    pub origin: String,
    /// Route key.
    pub route: String,
    /// The delay, ms.
    pub delay_ms: f64,
    /// Its basis (`benefit`, `route`, `pop`, ...).
    pub basis: String,
    /// With a delay by predicted benefit: the share of requests expected to
    /// be hedged, and the mean of the slowest 1% with and without hedging.
    pub predicted_share: Option<f64>,
    /// Predicted tail with hedging, ms.
    pub predicted_tail_ms: Option<f64>,
    /// Predicted tail without, ms.
    pub unhedged_tail_ms: Option<f64>,
}

/// A request that ended in an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ErrorReport {
    /// When (epoch ms).
    pub at_ms: f64,
    /// Route key.
    pub route: String,
    /// The status the client got (`None`: the Worker's own 502/504).
    pub status: Option<u16>,
    /// What happened, in words.
    pub what: String,
    /// The origin whose answer or silence it was.
    pub origin: Option<String>,
}

/// One route policy's eligible requests and hedges (in a push), or its
/// PoP-wide hedge fraction (in a reply: `eligible` and `hedges` over the window).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteShare {
    /// The route policy's name.
    pub route: String,
    /// Hedge-eligible requests.
    pub eligible: u64,
    /// Hedges sent.
    pub hedges: u64,
}

/// The PoP-wide quantile of one key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyQuantile {
    /// Origin name.
    pub origin: String,
    /// Route key.
    pub route: String,
    /// The requested quantile in ms; `None` when the PoP has no samples.
    pub value_ms: Option<f64>,
    /// Samples in the PoP window for this key.
    pub samples: u64,
}

/// The PoP-wide 5xx rate of one origin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OriginRate {
    /// Origin name.
    pub origin: String,
    /// Responses in the PoP window.
    pub responses: u64,
    /// 5xx (and failure) fraction of them.
    pub rate_5xx: f64,
}

/// What the aggregator answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PushReply {
    /// [`PUSH_VERSION`].
    pub version: u32,
    /// PoP quantiles for the keys in the push.
    pub keys: Vec<KeyQuantile>,
    /// Hedges per eligible request across the PoP, over the window.
    pub hedge_fraction: f64,
    /// Eligible requests across the PoP, over the window.
    pub eligible: u64,
    /// Per-origin 5xx rates across the PoP.
    pub origins: Vec<OriginRate>,
    /// Per route policy named in the push: its PoP-wide counts over the window.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub route_budgets: Vec<RouteShare>,
    /// The active probes' fresh verdicts (none without probes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeVerdict>,
}

/// Why a push body was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushError(pub String);

impl std::fmt::Display for PushError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "invalid push: {}", self.0)
    }
}

impl std::error::Error for PushError {}

fn fail<T>(message: impl Into<String>) -> Result<T, PushError> {
    Err(PushError(message.into()))
}

// === impl Push ===

impl Push {
    /// The push as bytes.
    pub fn encode(&self) -> Vec<u8> {
        // Serializing plain structs of numbers and strings cannot fail.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses and checks a push body. Every limit above applies; the first
    /// problem found is reported.
    pub fn decode(body: &[u8]) -> Result<Push, PushError> {
        if body.len() > MAX_PUSH_BYTES {
            return fail(format!(
                "{} bytes, more than the {MAX_PUSH_BYTES} accepted",
                body.len()
            ));
        }
        let push: Push = match serde_json::from_slice(body) {
            Ok(push) => push,
            Err(e) => return fail(format!("not a push body: {e}")),
        };
        push.check()?;
        Ok(push)
    }

    fn check(&self) -> Result<(), PushError> {
        if self.version != PUSH_VERSION {
            return fail(format!(
                "version {} (this aggregator speaks {PUSH_VERSION})",
                self.version
            ));
        }
        if !(self.quantile > 0.0 && self.quantile < 1.0) {
            return fail(format!("quantile {} is not in (0, 1)", self.quantile));
        }
        if self.eligible > MAX_COUNT || self.hedges > self.eligible.max(MAX_COUNT) {
            return fail("eligible or hedges out of range");
        }
        if self.keys.len() > MAX_PUSH_KEYS {
            return fail(format!(
                "{} keys (at most {MAX_PUSH_KEYS})",
                self.keys.len()
            ));
        }
        if self.origins.len() > MAX_PUSH_ORIGINS {
            return fail(format!(
                "{} origins (at most {MAX_PUSH_ORIGINS})",
                self.origins.len()
            ));
        }
        if let Some(metrics) = &self.metrics {
            metrics.check().map_err(PushError)?;
        }
        self.check_reports()?;
        self.check_keys()
    }

    /// The route delays, error reports and route budgets a push carries.
    fn check_reports(&self) -> Result<(), PushError> {
        if self.route_delays.len() > MAX_PUSH_KEYS || self.errors.len() > MAX_PUSH_ERRORS {
            return fail("too many route delays or errors");
        }
        let number = |v: f64| v.is_finite() && v >= 0.0;
        for d in &self.route_delays {
            check_name("origin", &d.origin)?;
            check_name("route", &d.route)?;
            let optional = [d.predicted_share, d.predicted_tail_ms, d.unhedged_tail_ms];
            if !number(d.delay_ms)
                || d.basis.len() > 16
                || d.basis.chars().any(char::is_control)
                || !optional.iter().flatten().all(|v| number(*v))
            {
                return fail("a route delay is malformed");
            }
        }
        for e in &self.errors {
            check_name("route", &e.route)?;
            if let Some(o) = &e.origin {
                check_name("origin", o)?;
            }
            if !number(e.at_ms) || e.what.len() > 200 || e.what.chars().any(char::is_control) {
                return fail("an error report is malformed");
            }
        }
        if self.route_budgets.len() > MAX_PUSH_ORIGINS {
            return fail("too many route budgets");
        }
        check_version(&self.worker_version)?;
        for r in &self.route_budgets {
            check_name("route", &r.route)?;
            if r.eligible > MAX_COUNT || r.hedges > r.eligible.max(MAX_COUNT) {
                return fail("route eligible or hedges out of range");
            }
        }
        Ok(())
    }

    /// The latency keys' buckets and the origins' counts.
    fn check_keys(&self) -> Result<(), PushError> {
        let (lowest, highest) = (bucket_index(0.0), bucket_index(MAX_LATENCY_MS));
        for key in &self.keys {
            check_name("origin", &key.origin)?;
            check_name("route", &key.route)?;
            if key.buckets.len() > MAX_BUCKETS_PER_KEY {
                return fail(format!(
                    "{} buckets for {}{} (at most {MAX_BUCKETS_PER_KEY})",
                    key.buckets.len(),
                    key.origin,
                    key.route
                ));
            }
            for &(index, completed, censored) in &key.buckets {
                if !(lowest..=highest).contains(&index) {
                    return fail(format!("bucket index {index} outside {lowest}..={highest}"));
                }
                if completed > MAX_COUNT || censored > MAX_COUNT {
                    return fail(format!("bucket {index} count out of range"));
                }
            }
        }
        for origin in &self.origins {
            check_name("origin", &origin.origin)?;
            if origin.responses > MAX_COUNT || origin.errors_5xx > origin.responses {
                return fail(format!("counts for origin {} out of range", origin.origin));
            }
        }
        Ok(())
    }
}

/// Longest Worker version id a push may carry (the platform's are UUIDs).
pub const MAX_VERSION_BYTES: usize = 64;

/// A Worker version id: printed in every PoP scrape, so short and plain
/// (letters, digits, `.`, `_`, `:`, `-`).
fn check_version(version: &str) -> Result<(), PushError> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-');
    if version.len() > MAX_VERSION_BYTES || !version.chars().all(plain) {
        return fail(format!(
            "worker_version is not a version id (at most {MAX_VERSION_BYTES} letters, digits, '.', '_', ':', '-')"
        ));
    }
    Ok(())
}

fn check_name(what: &str, name: &str) -> Result<(), PushError> {
    if name.len() > MAX_NAME_BYTES {
        return fail(format!("{what} longer than {MAX_NAME_BYTES} bytes"));
    }
    if name.chars().any(char::is_control) {
        return fail(format!("{what} contains a control character"));
    }
    Ok(())
}

// === impl KeyDelta ===

impl KeyDelta {
    /// The delta of `sketch` for one key.
    pub fn new(origin: &str, route: &str, sketch: &LatencySketch) -> Self {
        Self {
            origin: origin.to_string(),
            route: route.to_string(),
            buckets: sketch
                .buckets()
                .map(|(i, c)| (i, c.completed, c.censored))
                .collect(),
        }
    }

    /// The samples as a sketch.
    pub fn sketch(&self) -> LatencySketch {
        let mut sketch = LatencySketch::new();
        for &(index, completed, censored) in &self.buckets {
            sketch.add_counts(
                index,
                BucketCounts {
                    completed,
                    censored,
                },
            );
        }
        sketch
    }
}

// === impl PushReply ===

impl PushReply {
    /// The reply as bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// Parses a reply; anything unexpected is an error (and the isolate keeps
    /// its local estimates).
    pub fn decode(body: &[u8]) -> Result<PushReply, PushError> {
        let reply: PushReply = match serde_json::from_slice(body) {
            Ok(reply) => reply,
            Err(e) => return fail(format!("not a push reply: {e}")),
        };
        if reply.version != PUSH_VERSION {
            return fail(format!("reply version {}", reply.version));
        }
        let finite = |v: f64| v.is_finite() && v >= 0.0;
        if !finite(reply.hedge_fraction)
            || reply.origins.iter().any(|o| !finite(o.rate_5xx))
            || reply
                .keys
                .iter()
                .any(|k| k.value_ms.is_some_and(|v| !finite(v)))
        {
            return fail("reply holds a negative or non-finite number");
        }
        if reply.probes.len() > MAX_PUSH_ORIGINS {
            return fail("reply holds more probe verdicts than origins");
        }
        Ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimation::sketch::Sample;

    fn push() -> Push {
        let mut sketch = LatencySketch::new();
        for v in [12.0, 15.0, 80.0] {
            sketch.record(Sample::Completed(v));
        }
        sketch.record(Sample::Censored(300.0));
        Push {
            version: PUSH_VERSION,
            quantile: 0.95,
            eligible: 40,
            hedges: 3,
            keys: vec![KeyDelta::new("a", "/api", &sketch)],
            origins: vec![OriginDelta {
                origin: "a".into(),
                responses: 40,
                errors_5xx: 1,
            }],
            metrics: None,
            route_delays: Vec::new(),
            errors: Vec::new(),
            route_budgets: Vec::new(),
            worker_version: String::new(),
        }
    }

    #[test]
    fn push_round_trips_through_its_encoding() {
        let original = push();
        let decoded = Push::decode(&original.encode()).expect("valid push");
        assert_eq!(decoded, original);
        assert_eq!(decoded.keys[0].sketch().count(), 4);
    }

    #[test]
    fn truncated_push_is_rejected_with_a_clear_error() {
        let bytes = push().encode();
        for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
            let err = Push::decode(&bytes[..cut]).expect_err("truncated");
            assert!(
                err.to_string().starts_with("invalid push: not a push body"),
                "{err}"
            );
        }
    }

    #[test]
    fn out_of_range_fields_are_rejected() {
        type Mutation = Box<dyn Fn(&mut Push)>;
        let cases: Vec<(Mutation, &str)> = vec![
            (Box::new(|p| p.version = 2), "version 2"),
            (Box::new(|p| p.quantile = 1.5), "quantile"),
            (
                Box::new(|p| p.keys[0].buckets.push((100_000, 1, 0))),
                "bucket index",
            ),
            (
                Box::new(|p| p.keys[0].buckets.push((10, MAX_COUNT + 1, 0))),
                "count",
            ),
            (
                Box::new(|p| p.keys[0].route = "x".repeat(300)),
                "route longer",
            ),
            (Box::new(|p| p.keys[0].origin = "a\nb".into()), "control"),
            (Box::new(|p| p.origins[0].errors_5xx = 41), "out of range"),
            (
                Box::new(|p| p.worker_version = "v\u{7}".into()),
                "worker_version",
            ),
            (
                Box::new(|p| p.worker_version = "v".repeat(MAX_VERSION_BYTES + 1)),
                "worker_version",
            ),
            (
                Box::new(|p| p.keys = vec![p.keys[0].clone(); MAX_PUSH_KEYS + 1]),
                "keys",
            ),
        ];
        for (mutate, expected) in cases {
            let mut p = push();
            mutate(&mut p);
            let err = Push::decode(&p.encode()).expect_err(expected);
            assert!(err.to_string().contains(expected), "{err} vs {expected}");
        }
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let err = Push::decode(br#"{"version":1,"quantile":0.95,"eligible":0,"hedges":0,"keys":[],"origins":[],"extra":1}"#)
            .expect_err("unknown field");
        assert!(err.to_string().contains("extra"), "{err}");
    }

    #[test]
    fn reply_with_non_finite_numbers_is_rejected() {
        let reply = br#"{"version":1,"keys":[],"hedge_fraction":-1.0,"eligible":0,"origins":[]}"#;
        assert!(PushReply::decode(reply).is_err());
    }
}
