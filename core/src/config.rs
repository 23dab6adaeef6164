//! Configuration: the Worker's `HEDGE_*` vars parsed and checked into [`Params`].
//!
//! Every key is optional except `HEDGE_ORIGINS`. Parsing never panics and
//! never falls back silently: every bad key is reported with the reason, and an
//! unknown `HEDGE_*` key is an error too (a typo would otherwise be ignored).

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::admission::budget::BudgetParams;
use crate::admission::health::HealthParams;
use crate::admission::hedge_gate::GateParams;
use crate::admission::origin_load::OriginLoadParams;
pub use crate::estimation::delay_policy::HedgePolicy;
use crate::estimation::delay_policy::{DelayParams, HedgeMode};
use crate::estimation::estimator::EstimatorParams;
use crate::estimation::window::WindowParams;
use crate::observe::request_log::LogLevel;
use crate::pop::aggregate::PopParams;
use crate::pop::client::{PopClientParams, MAX_PUSH_BACKOFF_MS};
use crate::request::coalesce::{CoalesceParams, MAX_WAITERS_PER_FLIGHT};
use crate::request::eligibility::EligibilityParams;
use crate::request::route_key::RouteKeyParams;

/// One configuration key, declared once: the parser reads its default and
/// range from here, and the README's table is generated from the same facts
/// (`scripts/config-table.py`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Key {
    /// The var's name.
    pub name: &'static str,
    /// Its default as text; for a key without one, what stands in its place
    /// ("required", "none", ...).
    pub default: &'static str,
    /// What values it takes.
    pub range: Range,
    /// What it means.
    pub meaning: &'static str,
}

/// The values a key takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Range {
    /// A number from `min` to `max`.
    Number {
        /// Smallest allowed.
        min: f64,
        /// Largest allowed.
        max: f64,
    },
    /// A whole number from `min` to `max`.
    Whole {
        /// Smallest allowed.
        min: u64,
        /// Largest allowed.
        max: u64,
    },
    /// `true` or `false`.
    Flag,
    /// Text whose form the parser checks (JSON, a name, a mode).
    Text,
}

/// Every key this module reads, each declared once.
#[rustfmt::skip]
pub const KEYS: &[Key] = &[
    Key { name: "HEDGE_ORIGINS", default: "required", range: Range::Text, meaning: "JSON array of origins: [{\"name\", \"url\", \"zone\"?}]; the first is the primary, the second the hedge target (the primary itself when there is one)" },
    Key { name: "HEDGE_MODE", default: "adaptive", range: Range::Text, meaning: "adaptive | static | off | retry (classic timeout + one retry, for comparison)" },
    Key { name: "HEDGE_POLICY", default: "tail-aware", range: Range::Text, meaning: "tail-aware: primaries by latency (HEDGE_PRIMARY), stalled origins hedged at once and avoided, a fast failure retried on a peer even when its own origin's budget is cut | fixed-quantile: the previous policy (first-in-order primary, hedge at the quantile only), kept for comparison" },
    Key { name: "HEDGE_PRIMARY", default: "latency", range: Range::Text, meaning: "tail-aware policy: latency (primaries drawn by recent latency and failure share, every origin keeping a probe share) | ordered (the first healthy origin in HEDGE_ORIGINS order, e.g. to keep one origin's cache warm)" },
    Key { name: "HEDGE_PRIMARY_PROBE_PERCENT", default: "2", range: Range::Number { min: 0.0, max: 50.0 }, meaning: "HEDGE_PRIMARY=latency: share of primaries every healthy origin keeps however slow, so its recovery is seen" },
    Key { name: "HEDGE_STALL_FACTOR", default: "2", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "tail-aware policy: an origin with 2+ requests in flight that has not answered for this many times its recent latency is stalled: its aged requests are hedged at once, new primaries go elsewhere (0 = off)" },
    Key { name: "HEDGE_QUANTILE", default: "p95", range: Range::Text, meaning: "latency quantile the adaptive delay hedges at: p50..p99.9 or 0.5..0.999" },
    Key { name: "HEDGE_OFFSET_MS", default: "0", range: Range::Number { min: -10_000.0, max: 10_000.0 }, meaning: "added to the quantile" },
    Key { name: "HEDGE_MIN_DELAY_MS", default: "5", range: Range::Number { min: 0.0, max: 60_000.0 }, meaning: "lower clamp on the adaptive delay" },
    Key { name: "HEDGE_MAX_DELAY_MS", default: "2000", range: Range::Number { min: 0.0, max: 60_000.0 }, meaning: "upper clamp on the adaptive delay" },
    Key { name: "HEDGE_COLD_DELAY_MS", default: "250", range: Range::Number { min: 0.0, max: 60_000.0 }, meaning: "delay used before HEDGE_MIN_DATA_POINTS samples exist" },
    Key { name: "HEDGE_MIN_DATA_POINTS", default: "50", range: Range::Whole { min: 1, max: 1_000_000 }, meaning: "samples needed before a measured quantile is used" },
    Key { name: "HEDGE_STATIC_DELAY_MS", default: "none", range: Range::Number { min: 0.0, max: 60_000.0 }, meaning: "the fixed delay of HEDGE_MODE=static (required there)" },
    Key { name: "HEDGE_RETRY_TIMEOUT_MS", default: "1000", range: Range::Number { min: 1.0, max: 600_000.0 }, meaning: "HEDGE_MODE=retry: time before the primary is abandoned and retried" },
    Key { name: "HEDGE_BUDGET_PERCENT", default: "12", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "hedges allowed per 100 eligible requests" },
    Key { name: "HEDGE_BUDGET_FLOOR_PER_SEC", default: "0", range: Range::Number { min: 0.0, max: 10_000.0 }, meaning: "hedges per second per isolate allowed at low traffic; adds up over a PoP's isolates, so 0 keeps the budget a PoP-wide promise" },
    Key { name: "HEDGE_BUDGET_MAX_TOKENS", default: "10", range: Range::Number { min: 1.0, max: 1_000_000.0 }, meaning: "most earned hedges an isolate can bank (a new isolate starts with none)" },
    Key { name: "HEDGE_METHODS", default: "GET,HEAD", range: Range::Text, meaning: "methods hedged without an idempotency key (GET, HEAD, OPTIONS, PUT, DELETE allowed)" },
    Key { name: "HEDGE_IDEMPOTENCY_HEADER", default: "off", range: Range::Text, meaning: "a header (e.g. idempotency-key) whose presence makes any method hedgeable; set it only when every origin shares one idempotency store, never hedged to the same origin" },
    Key { name: "HEDGE_MAX_BODY_BYTES", default: "1048576", range: Range::Whole { min: 0, max: 100 << 20 }, meaning: "largest request body held to be sent twice" },
    Key { name: "HEDGE_MAX_HELD_BODY_BYTES", default: "16777216", range: Range::Whole { min: 0, max: 100 << 20 }, meaning: "most request-body bytes one isolate holds for replay at once; a body that does not fit is sent once, streamed, not hedged" },
    Key { name: "HEDGE_ROUTE_PREFIXES", default: "[]", range: Range::Text, meaning: "JSON array of path prefixes that name routes" },
    Key { name: "HEDGE_ROUTE_SEGMENTS", default: "1", range: Range::Whole { min: 0, max: 16 }, meaning: "leading path segments that form a route key when no prefix matches" },
    Key { name: "HEDGE_MAX_ROUTE_KEYS", default: "64", range: Range::Whole { min: 1, max: 10_000 }, meaning: "most (origin, route key) latency windows kept per isolate" },
    Key { name: "HEDGE_WINDOW_SECS", default: "60", range: Range::Number { min: 1.0, max: 86_400.0 }, meaning: "latency window length" },
    Key { name: "HEDGE_SUB_WINDOWS", default: "6", range: Range::Whole { min: 1, max: 60 }, meaning: "rotating sub-windows per window" },
    Key { name: "HEDGE_TIMEOUT_MS", default: "30000", range: Range::Number { min: 1.0, max: 600_000.0 }, meaning: "longest wait for an origin's response headers before 504" },
    Key { name: "HEDGE_BODY_IDLE_TIMEOUT_MS", default: "0", range: Range::Number { min: 0.0, max: 3_600_000.0 }, meaning: "0 = off. Cut a winner's body when the origin sends nothing for this long (the client sees an error, the origin's connection is closed); costs some CPU per chunk, and encoded (gzip, br) bodies then go out chunked" },
    Key { name: "HEDGE_CACHE", default: "true", range: Range::Flag, meaning: "serve and store shared-cacheable GET responses through the Workers Cache API" },
    Key { name: "HEDGE_COALESCE", default: "true", range: Range::Flag, meaning: "identical concurrent cacheable GET misses wait for one origin fetch and read its response from the cache" },
    Key { name: "HEDGE_COALESCE_MAX_WAIT_MS", default: "5000", range: Range::Number { min: 1.0, max: 600_000.0 }, meaning: "longest a coalesced request waits for the shared fetch before fetching for itself" },
    Key { name: "HEDGE_COALESCE_MAX_KEYS", default: "1024", range: Range::Whole { min: 1, max: 100_000 }, meaning: "most distinct URLs being coalesced at once per isolate" },
    Key { name: "HEDGE_POP_BLEND_SAMPLES", default: "200", range: Range::Whole { min: 1, max: 10_000_000 }, meaning: "local samples at which the isolate's own quantile and the PoP-wide one weigh the same" },
    Key { name: "HEDGE_POP_PUSH_INTERVAL_MS", default: "5000", range: Range::Number { min: 100.0, max: 3_600_000.0 }, meaning: "longest time between an isolate's pushes to the PoP aggregator (with traffic)" },
    Key { name: "HEDGE_POP_PUSH_EVERY_REQUESTS", default: "1000", range: Range::Whole { min: 1, max: 10_000_000 }, meaning: "requests after which a push is due sooner than the interval" },
    Key { name: "HEDGE_POP_TIMEOUT_MS", default: "1000", range: Range::Number { min: 1.0, max: 60_000.0 }, meaning: "longest wait for the PoP aggregator's reply; a failure backs pushes off" },
    Key { name: "HEDGE_POP_FALLBACK_NAME", default: "default", range: Range::Text, meaning: "aggregator name where the request has no cf.colo" },
    Key { name: "HEDGE_POP_MAX_KEYS", default: "2048", range: Range::Whole { min: 1, max: 100_000 }, meaning: "most (origin, route key) sketches one PoP aggregator holds" },
    Key { name: "HEDGE_POP_IDLE_SECS", default: "600", range: Range::Number { min: 1.0, max: 86_400.0 * 30.0 }, meaning: "the aggregator forgets a key no push named for this long" },
    Key { name: "HEDGE_STATS_PATH", default: "/__hedge/stats", range: Range::Text, meaning: "path of the stats endpoint (JSON); served only when HEDGE_STATS_TOKEN is set" },
    Key { name: "HEDGE_STATS_TOKEN", default: "none", range: Range::Text, meaning: "bearer token for the stats endpoint, at least 16 characters; set it as a secret (wrangler secret put HEDGE_STATS_TOKEN), never in [vars]" },
    Key { name: "HEDGE_LOG_LEVEL", default: "error", range: Range::Text, meaning: "one JSON log line per request: off | error (5xx and failures only) | info (every request)" },
    Key { name: "HEDGE_SAME_ORIGIN_HEDGE", default: "true", range: Range::Flag, meaning: "with no healthy peer, hedge to the primary itself on a new request (false: do not hedge)" },
    Key { name: "HEDGE_HEALTH_CONSECUTIVE_FAILURES", default: "5", range: Range::Whole { min: 1, max: 1_000 }, meaning: "failures in a row (connection error, timeout, 5xx) that mark an origin degraded" },
    Key { name: "HEDGE_HEALTH_FAILURE_RATE", default: "0.5", range: Range::Number { min: 0.01, max: 1.0 }, meaning: "failure rate over the window that marks an origin degraded" },
    Key { name: "HEDGE_HEALTH_MIN_REQUESTS", default: "20", range: Range::Whole { min: 1, max: 1_000_000 }, meaning: "requests in the window before failure and 5xx rates count" },
    Key { name: "HEDGE_HEALTH_COOLDOWN_MS", default: "10000", range: Range::Number { min: 0.0, max: 3_600_000.0 }, meaning: "time before a degraded origin gets one trial request" },
    Key { name: "HEDGE_5XX_REDUCE_RATE", default: "0.02", range: Range::Number { min: 0.0, max: 1.0 }, meaning: "5xx rate above which hedges to and from an origin drop to HEDGE_5XX_REDUCED_BUDGET_PERCENT" },
    Key { name: "HEDGE_5XX_REDUCED_BUDGET_PERCENT", default: "5", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "the hedge budget of an origin past HEDGE_5XX_REDUCE_RATE" },
    Key { name: "HEDGE_5XX_STOP_RATE", default: "0.2", range: Range::Number { min: 0.0, max: 1.0 }, meaning: "5xx rate above which hedging to and from an origin stops" },
];

/// One configured origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// A short name for headers, logs and metrics.
    pub name: String,
    /// Scheme, host, port and optional path prefix, without a trailing slash.
    pub base_url: String,
    /// Failure domain (region, data centre); hedges prefer another zone.
    pub zone: Option<String>,
}

/// The whole parsed configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// Origins in order of preference.
    pub origins: Vec<Origin>,
    /// How hedge delays are chosen.
    pub mode: HedgeMode,
    /// Tail-aware (the default) or the fixed-quantile policy kept for comparison.
    pub policy: HedgePolicy,
    /// Primary choice and stall detection.
    pub origin_load: OriginLoadParams,
    /// Delay choice settings.
    pub delay: DelayParams,
    /// Hedge budget settings.
    pub budget: BudgetParams,
    /// Which requests may be hedged.
    pub eligibility: EligibilityParams,
    /// Most request-body bytes held for replay at once per isolate.
    pub max_held_body_bytes: u64,
    /// How paths map to route keys.
    pub route_keys: RouteKeyParams,
    /// Latency window and key cap.
    pub estimator: EstimatorParams,
    /// Longest wait for response headers from the origins, in milliseconds.
    pub timeout_ms: f64,
    /// Longest silence inside a winner's body before it is cut; `None`: no limit.
    pub body_idle_timeout_ms: Option<f64>,
    /// Origin health and the 5xx-adaptive budget.
    pub health: HealthParams,
    /// With no healthy peer, hedge to the primary itself on a new request.
    pub same_origin_hedge: bool,
    /// Serve and store cacheable GET responses through the Cache API.
    pub cache: bool,
    /// Coalescing of identical concurrent cacheable misses.
    pub coalesce: CoalesceParams,
    /// The PoP aggregate (used when the `POP_AGGREGATOR` binding exists).
    pub pop: PopConfig,
    /// The stats endpoint.
    pub stats: StatsParams,
    /// Which requests get a JSON log line.
    pub log_level: LogLevel,
}

/// The shortest silence that can be a stall, ms: below it, timer and
/// scheduling jitter alone could look like one.
const STALL_MIN_MS: f64 = 20.0;

/// Where the stats endpoint is and who may read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsParams {
    /// Request path that serves the stats.
    pub path: String,
    /// The bearer token; `None` leaves the path unserved (proxied like any other).
    pub token: Option<Secret>,
}

/// A secret value: compared, never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret's text, for comparison only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// Settings of the PoP aggregate, both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct PopConfig {
    /// The isolate's push schedule.
    pub client: PopClientParams,
    /// The aggregator's limits.
    pub aggregate: PopParams,
    /// Longest wait for a push's reply.
    pub timeout_ms: f64,
    /// Aggregator name without `cf.colo`.
    pub fallback_name: String,
}

/// One problem with one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The offending key.
    pub key: String,
    /// What is wrong and what is accepted.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OriginSpec {
    name: String,
    url: String,
    zone: Option<String>,
}

/// Collects errors while reading keys, so one pass reports all of them.
struct Reader<'a> {
    vars: &'a BTreeMap<String, String>,
    errors: Vec<ConfigError>,
}

// === impl Reader ===

impl<'a> Reader<'a> {
    fn fail(&mut self, key: &str, reason: impl Into<String>) {
        self.errors.push(ConfigError {
            key: key.to_string(),
            reason: reason.into(),
        });
    }

    fn raw(&self, key: &str) -> Option<&'a str> {
        let vars: &'a BTreeMap<String, String> = self.vars;
        vars.get(key).map(|v| v.trim())
    }

    /// The declaration of `key`; a read of an undeclared key is reported as
    /// a configuration error (a test keeps every read declared).
    fn declared(&mut self, key: &str) -> Option<Key> {
        let found = KEYS.iter().find(|k| k.name == key).copied();
        if found.is_none() {
            self.fail(key, "internal: read but not declared in KEYS");
        }
        found
    }

    /// A number in its declared range, or its declared default when absent
    /// (the range's minimum for a key with no numeric default, which is
    /// only read where it is required).
    fn number(&mut self, key: &str) -> f64 {
        match self.declared(key) {
            Some(Key {
                default,
                range: Range::Number { min, max },
                ..
            }) => self.bounded(key, default, min, max, "a number", |v: &f64| v.is_finite()),
            _ => {
                self.fail(key, "internal: not declared as a number");
                0.0
            }
        }
    }

    /// A whole number in its declared range, or its declared default when absent.
    fn integer(&mut self, key: &str) -> u64 {
        match self.declared(key) {
            Some(Key {
                default,
                range: Range::Whole { min, max },
                ..
            }) => self.bounded(key, default, min, max, "a whole number", |_| true),
            _ => {
                self.fail(key, "internal: not declared as a whole number");
                0
            }
        }
    }

    /// `key` parsed as `T` within `[min, max]` (and `sane`), else `default`
    /// (or `min` where the default is not a value) with the problem reported.
    fn bounded<T>(
        &mut self,
        key: &str,
        default: &str,
        min: T,
        max: T,
        what: &str,
        sane: impl Fn(&T) -> bool,
    ) -> T
    where
        T: std::str::FromStr + PartialOrd + Copy + fmt::Display,
    {
        let default = default.parse::<T>().unwrap_or(min);
        let Some(raw) = self.raw(key) else {
            return default;
        };
        match raw.parse::<T>() {
            Ok(v) if sane(&v) && min <= v && v <= max => v,
            _ => {
                self.fail(
                    key,
                    format!("expected {what} from {min} to {max}, got {raw:?}"),
                );
                default
            }
        }
    }

    /// `true` or `false`, or its declared default when absent.
    fn boolean(&mut self, key: &str) -> bool {
        let Some(Key {
            default,
            range: Range::Flag,
            ..
        }) = self.declared(key)
        else {
            self.fail(key, "internal: not declared as true / false");
            return false;
        };
        let default = default == "true";
        match self.raw(key).map(|v| v.to_ascii_lowercase()).as_deref() {
            None => default,
            Some("true") => true,
            Some("false") => false,
            Some(other) => {
                self.fail(key, format!("expected true or false, got {other:?}"));
                default
            }
        }
    }

    fn origins(&mut self) -> Vec<Origin> {
        const KEY: &str = "HEDGE_ORIGINS";
        let Some(raw) = self.raw(KEY) else {
            self.fail(
                KEY,
                "required: a JSON array like [{\"name\":\"a\",\"url\":\"https://a.example\"}]",
            );
            return Vec::new();
        };
        let specs: Vec<OriginSpec> = match serde_json::from_str(raw) {
            Ok(specs) => specs,
            Err(e) => {
                self.fail(
                    KEY,
                    format!("not a JSON array of {{name, url, zone?}}: {e}"),
                );
                return Vec::new();
            }
        };
        if specs.is_empty() {
            self.fail(KEY, "at least one origin is needed");
        }
        let mut origins: Vec<Origin> = Vec::new();
        for (i, spec) in specs.into_iter().enumerate() {
            let name = spec.name.trim().to_string();
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                self.fail(
                    KEY,
                    format!(
                        "origin {i}: name {:?} must be non-empty [A-Za-z0-9_-]",
                        spec.name
                    ),
                );
            }
            if origins.iter().any(|o| o.name == name) {
                self.fail(KEY, format!("origin {i}: duplicate name {name:?}"));
            }
            match normalize_base_url(&spec.url) {
                Ok(base_url) => origins.push(Origin {
                    name,
                    base_url,
                    zone: spec.zone.filter(|z| !z.trim().is_empty()),
                }),
                Err(reason) => self.fail(
                    KEY,
                    format!("origin {i} ({name}): url {:?} {reason}", spec.url),
                ),
            }
        }
        origins
    }

    fn quantile(&mut self) -> f64 {
        const KEY: &str = "HEDGE_QUANTILE";
        let Some(raw) = self.raw(KEY) else {
            return 0.95;
        };
        let parsed = match raw.strip_prefix(['p', 'P']) {
            Some(percent) => percent.parse::<f64>().map(|p| p / 100.0),
            None => raw.parse::<f64>(),
        };
        match parsed {
            // The tolerance lets p99.9 (99.9 / 100 = 0.99900000000000001) through.
            Ok(q) if (0.5 - 1e-9..=0.999 + 1e-9).contains(&q) => q,
            _ => {
                self.fail(
                    KEY,
                    format!("expected p50..p99.9 or 0.5..0.999, got {raw:?}"),
                );
                0.95
            }
        }
    }

    fn methods(&mut self) -> Vec<String> {
        const KEY: &str = "HEDGE_METHODS";
        const IDEMPOTENT: &[&str] = &["GET", "HEAD", "OPTIONS", "PUT", "DELETE"];
        let Some(raw) = self.raw(KEY) else {
            return vec!["GET".into(), "HEAD".into()];
        };
        let mut methods = Vec::new();
        for m in raw
            .split(',')
            .map(|m| m.trim().to_ascii_uppercase())
            .filter(|m| !m.is_empty())
        {
            if IDEMPOTENT.contains(&m.as_str()) {
                methods.push(m);
            } else {
                self.fail(
                    KEY,
                    format!("{m} is not idempotent; allowed: {}. Use HEDGE_IDEMPOTENCY_HEADER for others", IDEMPOTENT.join(", ")),
                );
            }
        }
        methods
    }

    fn idempotency_header(&mut self) -> Option<String> {
        const KEY: &str = "HEDGE_IDEMPOTENCY_HEADER";
        let raw = self.raw(KEY).unwrap_or("").to_ascii_lowercase();
        if raw.is_empty() {
            return None;
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            self.fail(KEY, format!("{raw:?} is not a header name"));
            return None;
        }
        Some(raw)
    }

    fn route_prefixes(&mut self) -> Vec<String> {
        const KEY: &str = "HEDGE_ROUTE_PREFIXES";
        let Some(raw) = self.raw(KEY) else {
            return Vec::new();
        };
        match serde_json::from_str::<Vec<String>>(raw) {
            Ok(prefixes) if prefixes.iter().all(|p| p.starts_with('/')) => prefixes,
            Ok(_) => {
                self.fail(KEY, "every prefix must start with '/'");
                Vec::new()
            }
            Err(e) => {
                self.fail(KEY, format!("expected a JSON array of strings: {e}"));
                Vec::new()
            }
        }
    }

    fn policy(&mut self) -> HedgePolicy {
        const KEY: &str = "HEDGE_POLICY";
        match self
            .raw(KEY)
            .map(|m| m.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("tail-aware") => HedgePolicy::TailAware,
            Some("fixed-quantile") => HedgePolicy::FixedQuantile,
            Some(other) => {
                self.fail(
                    KEY,
                    format!("expected tail-aware or fixed-quantile, got {other:?}"),
                );
                HedgePolicy::TailAware
            }
        }
    }

    /// `HEDGE_PRIMARY`: `true` for latency, `false` for ordered.
    fn primary_by_latency(&mut self) -> bool {
        const KEY: &str = "HEDGE_PRIMARY";
        match self
            .raw(KEY)
            .map(|m| m.trim().to_ascii_lowercase())
            .as_deref()
        {
            None | Some("latency") => true,
            Some("ordered") => false,
            Some(other) => {
                self.fail(KEY, format!("expected latency or ordered, got {other:?}"));
                true
            }
        }
    }

    fn mode(&mut self) -> HedgeMode {
        const KEY: &str = "HEDGE_MODE";
        match self.raw(KEY).map(|m| m.to_ascii_lowercase()).as_deref() {
            None | Some("adaptive") => HedgeMode::Adaptive,
            Some("off") => HedgeMode::Off,
            Some("static") => {
                if self.raw("HEDGE_STATIC_DELAY_MS").is_none() {
                    self.fail(
                        "HEDGE_STATIC_DELAY_MS",
                        "required when HEDGE_MODE is static",
                    );
                }
                let delay_ms = self.number("HEDGE_STATIC_DELAY_MS");
                HedgeMode::Static { delay_ms }
            }
            Some("retry") => HedgeMode::Retry {
                timeout_ms: self.number("HEDGE_RETRY_TIMEOUT_MS"),
            },
            Some(other) => {
                self.fail(
                    KEY,
                    format!("expected adaptive, static, off or retry, got {other:?}"),
                );
                HedgeMode::Adaptive
            }
        }
    }

    fn unknown_keys(&mut self) {
        let unknown: Vec<String> = self
            .vars
            .keys()
            .filter(|k| {
                k.starts_with("HEDGE_") && !KEYS.iter().any(|known| known.name == k.as_str())
            })
            .cloned()
            .collect();
        for key in unknown {
            self.fail(
                &key,
                "unknown key (a typo?); see the README's configuration table",
            );
        }
    }
}

/// Every key at its declared default, with one origin named "a" (for tests,
/// examples and parts used alone: the one place defaults come from is `KEYS`).
pub fn defaults() -> Params {
    let vars = BTreeMap::from([(
        "HEDGE_ORIGINS".to_string(),
        r#"[{"name":"a","url":"https://a.example"}]"#.to_string(),
    )]);
    match parse(&vars) {
        Ok(params) => params,
        // Unreachable while every default lies in its range (a test checks that).
        Err(errors) => panic!("the declared defaults do not parse: {errors:?}"),
    }
}

/// Parses the `HEDGE_*` vars; on failure, every problem found.
pub fn parse(vars: &BTreeMap<String, String>) -> Result<Params, Vec<ConfigError>> {
    let mut r = Reader {
        vars,
        errors: Vec::new(),
    };
    r.unknown_keys();
    let origins = r.origins();
    let mode = r.mode();
    let delay = DelayParams {
        quantile: r.quantile(),
        offset_ms: r.number("HEDGE_OFFSET_MS"),
        min_delay_ms: r.number("HEDGE_MIN_DELAY_MS"),
        max_delay_ms: r.number("HEDGE_MAX_DELAY_MS"),
        cold_delay_ms: r.number("HEDGE_COLD_DELAY_MS"),
        min_data_points: r.integer("HEDGE_MIN_DATA_POINTS"),
        pop_blend_samples: r.integer("HEDGE_POP_BLEND_SAMPLES"),
    };
    if delay.min_delay_ms > delay.max_delay_ms {
        r.fail(
            "HEDGE_MIN_DELAY_MS",
            format!(
                "must not exceed HEDGE_MAX_DELAY_MS ({})",
                delay.max_delay_ms
            ),
        );
    }
    let budget = BudgetParams {
        percent: r.number("HEDGE_BUDGET_PERCENT"),
        floor_per_sec: r.number("HEDGE_BUDGET_FLOOR_PER_SEC"),
        max_tokens: r.number("HEDGE_BUDGET_MAX_TOKENS"),
    };
    let eligibility = EligibilityParams {
        methods: r.methods(),
        idempotency_header: r.idempotency_header(),
        max_body_bytes: r.integer("HEDGE_MAX_BODY_BYTES"),
    };
    let max_held_body_bytes = r.integer("HEDGE_MAX_HELD_BODY_BYTES");
    let route_keys = RouteKeyParams {
        prefixes: r.route_prefixes(),
        segments: r.integer("HEDGE_ROUTE_SEGMENTS") as usize,
    };
    let estimator = EstimatorParams {
        window: WindowParams {
            window_ms: r.number("HEDGE_WINDOW_SECS") * 1000.0,
            sub_windows: r.integer("HEDGE_SUB_WINDOWS") as usize,
        },
        max_route_keys: r.integer("HEDGE_MAX_ROUTE_KEYS") as usize,
    };
    let timeout_ms = r.number("HEDGE_TIMEOUT_MS");
    let policy = r.policy();
    let tail_aware = policy == HedgePolicy::TailAware;
    // Read whatever the policy, so a bad value is reported either way.
    let by_latency = r.primary_by_latency();
    let stall_factor = r.number("HEDGE_STALL_FACTOR");
    let origin_load = OriginLoadParams {
        by_latency: by_latency && tail_aware,
        probe_share: r.number("HEDGE_PRIMARY_PROBE_PERCENT") / 100.0,
        stall_factor: if tail_aware { stall_factor } else { 0.0 },
        stall_min_ms: STALL_MIN_MS,
        leg_expiry_ms: timeout_ms,
        governor: tail_aware,
    };
    let body_idle_timeout_ms = Some(r.number("HEDGE_BODY_IDLE_TIMEOUT_MS")).filter(|ms| *ms > 0.0);
    let health = HealthParams {
        window: estimator.window,
        // A trial lasts at most as long as any request may.
        trial_timeout_ms: timeout_ms,
        consecutive_failures: r.integer("HEDGE_HEALTH_CONSECUTIVE_FAILURES") as u32,
        failure_rate: r.number("HEDGE_HEALTH_FAILURE_RATE"),
        min_requests: r.integer("HEDGE_HEALTH_MIN_REQUESTS"),
        cooldown_ms: r.number("HEDGE_HEALTH_COOLDOWN_MS"),
        reduce_above_5xx_rate: r.number("HEDGE_5XX_REDUCE_RATE"),
        reduced_budget_percent: r.number("HEDGE_5XX_REDUCED_BUDGET_PERCENT"),
        stop_above_5xx_rate: r.number("HEDGE_5XX_STOP_RATE"),
    };
    if health.stop_above_5xx_rate < health.reduce_above_5xx_rate {
        r.fail(
            "HEDGE_5XX_STOP_RATE",
            "must not be below HEDGE_5XX_REDUCE_RATE",
        );
    }
    let pop = PopConfig {
        client: PopClientParams {
            push_interval_ms: r.number("HEDGE_POP_PUSH_INTERVAL_MS"),
            push_every_requests: r.integer("HEDGE_POP_PUSH_EVERY_REQUESTS"),
            // Answers are used for one latency window.
            stale_ms: estimator.window.window_ms,
            enabled: true,
            max_backoff_ms: MAX_PUSH_BACKOFF_MS,
        },
        aggregate: PopParams {
            window: estimator.window,
            max_keys: r.integer("HEDGE_POP_MAX_KEYS") as usize,
            idle_ms: r.number("HEDGE_POP_IDLE_SECS") * 1000.0,
        },
        timeout_ms: r.number("HEDGE_POP_TIMEOUT_MS"),
        fallback_name: r
            .raw("HEDGE_POP_FALLBACK_NAME")
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "default".to_string()),
    };
    let stats = StatsParams {
        path: match r.raw("HEDGE_STATS_PATH").map(str::trim) {
            None => "/__hedge/stats".to_string(),
            Some(p) if p.starts_with('/') && !p.contains(['?', '#', ' ']) => p.to_string(),
            Some(_) => {
                r.fail(
                    "HEDGE_STATS_PATH",
                    "must be a path starting with '/', without query or fragment",
                );
                String::new()
            }
        },
        token: match r.raw("HEDGE_STATS_TOKEN").map(str::trim) {
            None | Some("") => None,
            Some(t) if t.len() >= 16 => Some(Secret(t.to_string())),
            Some(_) => {
                // The value itself is never echoed in the error.
                r.fail(
                    "HEDGE_STATS_TOKEN",
                    "must be at least 16 characters (a guessable token exposes origin names and traffic)",
                );
                None
            }
        },
    };
    let log_level = match r.raw("HEDGE_LOG_LEVEL") {
        None => LogLevel::Error,
        Some(v) => LogLevel::parse(v).unwrap_or_else(|| {
            r.fail("HEDGE_LOG_LEVEL", "must be off, error or info");
            LogLevel::Error
        }),
    };
    let same_origin_hedge = r.boolean("HEDGE_SAME_ORIGIN_HEDGE");
    let cache = r.boolean("HEDGE_CACHE");
    let coalesce = CoalesceParams {
        // Waiters read the shared response from the cache, so no cache, no coalescing.
        enabled: r.boolean("HEDGE_COALESCE") && cache,
        max_wait_ms: r.number("HEDGE_COALESCE_MAX_WAIT_MS"),
        max_flights: r.integer("HEDGE_COALESCE_MAX_KEYS") as usize,
        max_waiters: MAX_WAITERS_PER_FLIGHT,
    };
    if r.errors.is_empty() {
        Ok(Params {
            origins,
            mode,
            delay,
            policy,
            origin_load,
            budget,
            eligibility,
            max_held_body_bytes,
            route_keys,
            estimator,
            timeout_ms,
            body_idle_timeout_ms,
            health,
            same_origin_hedge,
            cache,
            coalesce,
            pop,
            stats,
            log_level,
        })
    } else {
        Err(r.errors)
    }
}

impl Params {
    /// The hedge gate's part of the configuration.
    pub fn gate(&self) -> GateParams {
        GateParams {
            budget: self.budget,
            health: self.health,
            zones: self.origins.iter().map(|o| o.zone.clone()).collect(),
            same_origin_hedge: self.same_origin_hedge,
            avoid_erroring_peers: self.policy == HedgePolicy::TailAware,
            origin_load: self.origin_load,
            // An isolate passes its own (`Hedger::new`).
            seed: 1,
        }
    }
}

/// Checks an origin URL and strips a trailing slash. Only `http`/`https`, a
/// host, an optional port and path; no credentials, query or fragment.
fn normalize_base_url(url: &str) -> Result<String, &'static str> {
    let url = url.trim();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or("must start with http:// or https://")?;
    let authority = rest.split('/').next().unwrap_or_default();
    let path = &rest[authority.len()..];
    if authority.contains('@') {
        return Err("must not carry credentials (user@host)");
    }
    if path.contains(['?', '#']) || authority.contains(['?', '#']) {
        return Err("must not have a query or fragment");
    }
    // A bracketed IPv6 literal keeps its colons; a port follows the last ']'.
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    let (host, port) = match authority[host_end..].rfind(':') {
        Some(i) => (
            &authority[..host_end + i],
            Some(&authority[host_end + i + 1..]),
        ),
        None => (authority, None),
    };
    let host_ok = !host.is_empty()
        && (host.starts_with('[')
            || host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'));
    if !host_ok {
        return Err("has no valid host");
    }
    if let Some(port) = port {
        if port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err("has an invalid port");
        }
    }
    Ok(url.trim_end_matches('/').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const ORIGINS: (&str, &str) = (
        "HEDGE_ORIGINS",
        r#"[{"name":"a","url":"http://127.0.0.1:8081/"},{"name":"b","url":"https://b.example/v1","zone":"eu"}]"#,
    );

    fn keys_of(errors: &[ConfigError]) -> Vec<&str> {
        errors.iter().map(|e| e.key.as_str()).collect()
    }

    #[test]
    fn defaults_apply_when_only_origins_are_set() {
        let params = parse(&vars(&[ORIGINS])).expect("valid");
        assert_eq!(params.origins.len(), 2);
        assert_eq!(params.origins[0].base_url, "http://127.0.0.1:8081");
        assert_eq!(params.origins[1].zone.as_deref(), Some("eu"));
        assert_eq!(params.mode, HedgeMode::Adaptive);
        assert_eq!(params.delay.quantile, 0.95);
        assert_eq!(params.budget.percent, 12.0);
        assert_eq!(params.eligibility.methods, vec!["GET", "HEAD"]);
        assert_eq!(
            params.eligibility.idempotency_header, None,
            "keyed hedging of other methods is opt-in"
        );
        assert_eq!(params.budget.floor_per_sec, 0.0, "no per-isolate floor");
        assert_eq!(params.max_held_body_bytes, 16 << 20);
        assert_eq!(params.timeout_ms, 30_000.0);
        assert_eq!(
            params.body_idle_timeout_ms, None,
            "no body limit unless asked"
        );
    }

    #[test]
    fn a_body_idle_timeout_is_on_only_above_zero() {
        let on = parse(&vars(&[ORIGINS, ("HEDGE_BODY_IDLE_TIMEOUT_MS", "1500")])).expect("valid");
        assert_eq!(on.body_idle_timeout_ms, Some(1_500.0));
        let off = parse(&vars(&[ORIGINS, ("HEDGE_BODY_IDLE_TIMEOUT_MS", "0")])).expect("valid");
        assert_eq!(off.body_idle_timeout_ms, None);
        let errors =
            parse(&vars(&[ORIGINS, ("HEDGE_BODY_IDLE_TIMEOUT_MS", "-1")])).expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_BODY_IDLE_TIMEOUT_MS"]);
    }

    #[test]
    fn missing_origins_is_named() {
        let errors = parse(&vars(&[])).expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_ORIGINS"]);
    }

    #[test]
    fn every_bad_key_is_reported_at_once() {
        let errors = parse(&vars(&[
            ORIGINS,
            ("HEDGE_QUANTILE", "p10"),
            ("HEDGE_BUDGET_PERCENT", "lots"),
            ("HEDGE_METHODS", "GET,POST"),
            ("HEDGE_TYPO_KEY", "1"),
        ]))
        .expect_err("invalid");
        let keys = keys_of(&errors);
        for key in [
            "HEDGE_QUANTILE",
            "HEDGE_BUDGET_PERCENT",
            "HEDGE_METHODS",
            "HEDGE_TYPO_KEY",
        ] {
            assert!(keys.contains(&key), "{key} missing from {keys:?}");
        }
        let methods = errors
            .iter()
            .find(|e| e.key == "HEDGE_METHODS")
            .expect("present");
        assert!(
            methods.reason.contains("POST is not idempotent"),
            "{}",
            methods.reason
        );
    }

    #[test]
    fn quantile_accepts_both_notations() {
        for (raw, q) in [("p99", 0.99), ("0.9", 0.9), ("P99.9", 0.999)] {
            let params = parse(&vars(&[ORIGINS, ("HEDGE_QUANTILE", raw)])).expect(raw);
            assert!((params.delay.quantile - q).abs() < 1e-12, "{raw}");
        }
    }

    #[test]
    fn static_mode_requires_its_delay() {
        let errors = parse(&vars(&[ORIGINS, ("HEDGE_MODE", "static")])).expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_STATIC_DELAY_MS"]);
        let params = parse(&vars(&[
            ORIGINS,
            ("HEDGE_MODE", "static"),
            ("HEDGE_STATIC_DELAY_MS", "10"),
        ]))
        .expect("valid");
        assert_eq!(params.mode, HedgeMode::Static { delay_ms: 10.0 });
    }

    #[test]
    fn retry_mode_defaults_to_a_one_second_timeout() {
        let params = parse(&vars(&[ORIGINS, ("HEDGE_MODE", "retry")])).expect("valid");
        assert_eq!(
            params.mode,
            HedgeMode::Retry {
                timeout_ms: 1_000.0
            }
        );
    }

    #[test]
    fn min_delay_above_max_is_an_error() {
        let errors = parse(&vars(&[
            ORIGINS,
            ("HEDGE_MIN_DELAY_MS", "500"),
            ("HEDGE_MAX_DELAY_MS", "100"),
        ]))
        .expect_err("invalid");
        assert_eq!(keys_of(&errors), vec!["HEDGE_MIN_DELAY_MS"]);
    }

    #[test]
    fn bad_origin_entries_are_explained() {
        let cases = [
            (r#"{"name":"a"}"#, "not a JSON array"),
            ("[]", "at least one origin"),
            (r#"[{"name":"a","url":"ftp://x"}]"#, "http:// or https://"),
            (r#"[{"name":"a","url":"http://u:p@x"}]"#, "credentials"),
            (r#"[{"name":"a","url":"http://x/?q=1"}]"#, "query"),
            (r#"[{"name":"a","url":"http://x:99999"}]"#, "port"),
            (r#"[{"name":"a","url":"http://"}]"#, "host"),
            (
                r#"[{"name":"a","url":"http://x"},{"name":"a","url":"http://y"}]"#,
                "duplicate",
            ),
            (r#"[{"name":"a b","url":"http://x"}]"#, "name"),
            (
                r#"[{"name":"a","url":"http://x","weight":3}]"#,
                "unknown field",
            ),
        ];
        for (raw, needle) in cases {
            let errors = parse(&vars(&[("HEDGE_ORIGINS", raw)])).expect_err(raw);
            assert_eq!(errors[0].key, "HEDGE_ORIGINS");
            assert!(
                errors[0].reason.contains(needle),
                "{raw}: {}",
                errors[0].reason
            );
        }
    }

    #[test]
    fn ipv6_origins_are_accepted() {
        let params = parse(&vars(&[(
            "HEDGE_ORIGINS",
            r#"[{"name":"a","url":"http://[::1]:8080"}]"#,
        )]))
        .expect("valid");
        assert_eq!(params.origins[0].base_url, "http://[::1]:8080");
    }

    #[test]
    fn every_declared_default_is_in_its_own_range() {
        for key in KEYS {
            let ok = match key.range {
                Range::Number { min, max } => key
                    .default
                    .parse::<f64>()
                    .map_or(key.default == "none", |v| (min..=max).contains(&v)),
                Range::Whole { min, max } => key
                    .default
                    .parse::<u64>()
                    .is_ok_and(|v| (min..=max).contains(&v)),
                Range::Flag => matches!(key.default, "true" | "false"),
                Range::Text => true,
            };
            assert!(
                ok,
                "{}: default {:?} vs {:?}",
                key.name, key.default, key.range
            );
        }
    }

    #[test]
    fn every_key_read_is_declared_once() {
        // Parsing the defaults reads every key; an undeclared read is an error.
        assert!(parse(&vars(&[ORIGINS])).is_ok());
        let mut names: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), KEYS.len(), "a key is declared twice");
    }

    #[test]
    fn every_key_is_documented_in_the_readme() {
        let readme = include_str!("../../README.md");
        for Key { name: key, .. } in KEYS {
            assert!(
                readme.contains(&format!("`{key}`")),
                "{key} missing from README.md"
            );
        }
    }

    #[test]
    fn empty_idempotency_header_disables_it() {
        let params = parse(&vars(&[ORIGINS, ("HEDGE_IDEMPOTENCY_HEADER", "")])).expect("valid");
        assert_eq!(params.eligibility.idempotency_header, None);
    }
}
