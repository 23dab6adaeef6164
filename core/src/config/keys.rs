//! Every configuration key, declared once: the parser reads its default and
//! range from here, and the README's table is generated from the same facts.

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
    Key { name: "HEDGE_ORIGINS", default: "required", range: Range::Text, meaning: "JSON array of origins: [{\"name\", \"url\", \"zone\"?}]; each request's primary is drawn among the healthy ones by recent latency (HEDGE_PRIMARY; the first healthy one with ordered or the fixed-quantile policy); a hedge goes to another, preferring another zone (the primary itself, on a new request, when there is only one)" },
    Key { name: "HEDGE_MODE", default: "adaptive", range: Range::Text, meaning: "adaptive | static | off | retry (classic timeout + one retry, for comparison)" },
    Key { name: "HEDGE_POLICY", default: "tail-aware", range: Range::Text, meaning: "tail-aware: primaries by latency (HEDGE_PRIMARY), stalled origins hedged at once and avoided, a fast failure retried on a peer even when its own origin's budget is cut | fixed-quantile: the previous policy (first-in-order primary, hedge at the quantile only), kept for comparison" },
    Key { name: "HEDGE_PRIMARY", default: "latency", range: Range::Text, meaning: "tail-aware policy: latency (primaries drawn by recent latency and failure share, every origin keeping a probe share) | ordered (the first healthy origin in HEDGE_ORIGINS order, e.g. to keep one origin's cache warm)" },
    Key { name: "HEDGE_STATIC_DELAY_MS", default: "none", range: Range::Number { min: 0.0, max: 60_000.0 }, meaning: "the fixed delay of HEDGE_MODE=static (required there)" },
    Key { name: "HEDGE_BUDGET_PERCENT", default: "12", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "hedges allowed per 100 eligible requests" },
    Key { name: "HEDGE_BUDGET_FLOOR_PER_SEC", default: "0", range: Range::Number { min: 0.0, max: 10_000.0 }, meaning: "hedges per second per isolate allowed at low traffic; adds up over a PoP's isolates, so 0 keeps the budget a PoP-wide promise" },
    Key { name: "HEDGE_METHODS", default: "GET,HEAD", range: Range::Text, meaning: "methods hedged without an idempotency key (GET, HEAD, OPTIONS, PUT, DELETE allowed)" },
    Key { name: "HEDGE_IDEMPOTENCY_HEADER", default: "off", range: Range::Text, meaning: "a header (e.g. idempotency-key) whose presence makes any method hedgeable; set it only when every origin shares one idempotency store, never hedged to the same origin" },
    Key { name: "HEDGE_ROUTES", default: "[]", range: Range::Text, meaning: "per-route policy: JSON list of {prefix, name?, mode? (off/adaptive/static), static_delay_ms?, policy? (its delay rule: tail-aware/fixed-quantile), methods?, budget_percent?, origins? (names), timeout_ms?, cache?}; the longest matching prefix wins, anything unset is the global value; a route with its own budget_percent has its own bucket and its own PoP-wide share; its name is its route key in the stats and metrics" },
    Key { name: "HEDGE_TIMEOUT_MS", default: "30000", range: Range::Number { min: 1.0, max: 600_000.0 }, meaning: "longest wait for an origin's response headers before 504" },
    Key { name: "HEDGE_BODY_IDLE_TIMEOUT_MS", default: "0", range: Range::Number { min: 0.0, max: 3_600_000.0 }, meaning: "0 = off. Cut a winner's body when the origin sends nothing for this long (the client sees an error, the origin's connection is closed); costs some CPU per chunk, and encoded (gzip, br) bodies then go out chunked" },
    Key { name: "HEDGE_CACHE", default: "true", range: Range::Flag, meaning: "serve and store shared-cacheable GET responses through the Workers Cache API" },
    Key { name: "HEDGE_COALESCE", default: "true", range: Range::Flag, meaning: "identical concurrent cacheable GET misses wait for one origin fetch and read its response from the cache" },
    Key { name: "HEDGE_PROBE_PATH", default: "none", range: Range::Text, meaning: "active health probes: the path the PoP aggregator GETs on every origin each HEDGE_TUNING.probe_interval_s while the PoP has traffic (2xx/3xx passes; 2 failures in a row mark an origin down: no new primaries or hedges; one pass brings it back); none = passive health only. Needs the POP_AGGREGATOR binding" },
    Key { name: "HEDGE_STATS_PATH", default: "/__hedge/stats", range: Range::Text, meaning: "path of the stats endpoint (JSON; the metrics and the dashboard are its siblings); served only when HEDGE_STATS_TOKEN is set. Prefixed with a hostname (ops.example.com/__hedge/stats; https:// and :443 allowed), the pages answer only on that host (put it behind Cloudflare Access); a value the Worker cannot read turns the pages off" },
    Key { name: "HEDGE_STATS_TOKEN", default: "none", range: Range::Text, meaning: "bearer token for the operator pages, at least 16 characters; two separated by a space while rotating (both accepted). Set it as a secret (wrangler secret put HEDGE_STATS_TOKEN), never in [vars]. An Authorization header carrying it is never sent to an origin" },
    Key { name: "HEDGE_ANALYTICS_SAMPLE_PERCENT", default: "1", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "share of successful requests written to Analytics Engine (each row carries its weight in double5; every 5xx is written, up to 60 a minute per isolate, then sampled at this share or 1%); a point costs most of a Worker request's price" },
    Key { name: "HEDGE_LOG_LEVEL", default: "error", range: Range::Text, meaning: "one JSON log line per request: off | error (5xx and failures only) | info (every request)" },
    Key { name: "HEDGE_TUNING", default: "{}", range: Range::Text, meaning: "advanced: a JSON object of internal tunables, each a field (docs/tuning.md), e.g. {\"cold_delay_ms\": 100}; every one has a measured default and most deployments set none" },
];

/// The fields of `HEDGE_TUNING`, each read as the key `HEDGE_TUNING.<field>`:
/// tunables a user rarely has a reason to change (and the tests and the lab
/// do), kept out of the main table. Declared the same way as [`KEYS`].
#[rustfmt::skip]
pub const TUNING: &[Key] = &[
    Key { name: "HEDGE_TUNING.primary_probe_percent", default: "2", range: Range::Number { min: 0.0, max: 50.0 }, meaning: "HEDGE_PRIMARY=latency: share of primaries every healthy origin keeps however slow, so its recovery is seen" },
    Key { name: "HEDGE_TUNING.stall_factor", default: "1", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "tail-aware policy: an origin with 2+ requests in flight that has not answered for this many times its recent latency (and a silence its recent answers put under 0.1%) is stalled: its aged requests are hedged at once, new primaries go elsewhere (0 = off)" },
    Key { name: "HEDGE_TUNING.isolate_busy_lag_ms", default: "3", range: Range::Number { min: 0.0, max: 10_000.0 }, meaning: "tail-aware policy, adaptive mode: when over a third of the isolate's recent hedge timers fire this late or later (its own event loop is the bottleneck), a slow primary is not hedged (hedge-skip isolate-busy): a hedge adds work to the isolate and cannot shorten its queue (0 = off)" },
    Key { name: "HEDGE_TUNING.cut_unpaid", default: "true", range: Range::Flag, meaning: "tail-aware policy, adaptive mode: hedges of a cause (delay, stall, failure) and primary origin whose recent win share falls below 5% are let out at a halved share (down to 1 in 16) until they win 10% again" },
    Key { name: "HEDGE_TUNING.third_attempt", default: "true", range: Range::Flag, meaning: "tail-aware policy: when the primary and the hedge of a GET/HEAD both fail fast (connection error, 502/503/504 in the first quarter of HEDGE_TIMEOUT_MS), one more attempt on the healthier origin; and when a hedge fails so (or is shed) while its primary is still out, one more attempt away from the hedge's origin; charged to the budget and to an allowance of 1% of the isolate's requests" },
    Key { name: "HEDGE_TUNING.quantile", default: "p95", range: Range::Text, meaning: "latency quantile the adaptive delay hedges at: p50..p99.9 or 0.5..0.999" },
    Key { name: "HEDGE_TUNING.offset_ms", default: "0", range: Range::Number { min: -10_000.0, max: 10_000.0 }, meaning: "added to the quantile" },
    Key { name: "HEDGE_TUNING.cold_delay_ms", default: "250", range: Range::Number { min: 0.0, max: 60_000.0 }, meaning: "delay used before HEDGE_TUNING.min_data_points samples exist" },
    Key { name: "HEDGE_TUNING.min_data_points", default: "50", range: Range::Whole { min: 1, max: 1_000_000 }, meaning: "samples needed before a measured quantile is used" },
    Key { name: "HEDGE_TUNING.retry_timeout_ms", default: "1000", range: Range::Number { min: 1.0, max: 600_000.0 }, meaning: "HEDGE_MODE=retry: time before the primary is abandoned and retried" },
    Key { name: "HEDGE_TUNING.budget_max_tokens", default: "10", range: Range::Number { min: 1.0, max: 1_000_000.0 }, meaning: "most earned hedges an isolate can bank (a new isolate starts with none)" },
    Key { name: "HEDGE_TUNING.max_body_bytes", default: "1048576", range: Range::Whole { min: 0, max: 100 << 20 }, meaning: "largest request body held to be sent twice" },
    Key { name: "HEDGE_TUNING.max_held_body_bytes", default: "16777216", range: Range::Whole { min: 0, max: 100 << 20 }, meaning: "most body bytes one isolate holds in memory at once: request bodies held for replay (one that does not fit is sent once, streamed, not hedged) and copies of answers on their way into the cache (one that does not fit is not stored; the client's answer is unaffected)" },
    Key { name: "HEDGE_TUNING.route_segments", default: "1", range: Range::Whole { min: 0, max: 16 }, meaning: "leading path segments that form a route key when no prefix matches" },
    Key { name: "HEDGE_TUNING.window_secs", default: "60", range: Range::Number { min: 1.0, max: 86_400.0 }, meaning: "latency window length" },
    Key { name: "HEDGE_TUNING.sub_windows", default: "6", range: Range::Whole { min: 1, max: 60 }, meaning: "rotating sub-windows per window" },
    Key { name: "HEDGE_TUNING.pop_push_interval_ms", default: "5000", range: Range::Number { min: 100.0, max: 3_600_000.0 }, meaning: "longest time between an isolate's pushes to the PoP aggregator (with traffic)" },
    Key { name: "HEDGE_TUNING.pop_push_every_requests", default: "1000", range: Range::Whole { min: 1, max: 10_000_000 }, meaning: "requests after which a push is due sooner than the interval" },
    Key { name: "HEDGE_TUNING.pop_timeout_ms", default: "1000", range: Range::Number { min: 1.0, max: 60_000.0 }, meaning: "longest wait for the PoP aggregator's reply; a failure backs pushes off" },
    Key { name: "HEDGE_TUNING.probe_interval_s", default: "10", range: Range::Number { min: 1.0, max: 3_600.0 }, meaning: "seconds between probe rounds (one request per origin per round, per PoP)" },
    Key { name: "HEDGE_TUNING.probe_timeout_ms", default: "2000", range: Range::Number { min: 1.0, max: 60_000.0 }, meaning: "a probe with no answer this long fails" },
    Key { name: "HEDGE_TUNING.same_origin_hedge", default: "true", range: Range::Flag, meaning: "with no healthy peer, hedge to the primary itself on a new request (false: do not hedge); under the tail-aware policy a straggler's hedge also goes there rather than to a peer that errs or is twice as slow" },
    Key { name: "HEDGE_TUNING.health_consecutive_failures", default: "5", range: Range::Whole { min: 1, max: 1_000 }, meaning: "failures in a row (connection error, timeout, 5xx) that mark an origin degraded" },
    Key { name: "HEDGE_TUNING.health_failure_rate", default: "0.5", range: Range::Number { min: 0.01, max: 1.0 }, meaning: "failure rate over the window that marks an origin degraded" },
    Key { name: "HEDGE_TUNING.health_min_requests", default: "20", range: Range::Whole { min: 1, max: 1_000_000 }, meaning: "requests in the window before failure and 5xx rates count" },
    Key { name: "HEDGE_TUNING.health_cooldown_ms", default: "10000", range: Range::Number { min: 0.0, max: 3_600_000.0 }, meaning: "time before a degraded origin gets one trial request" },
    Key { name: "HEDGE_TUNING.5xx_reduce_rate", default: "0.02", range: Range::Number { min: 0.0, max: 1.0 }, meaning: "5xx rate above which hedges to and from an origin drop to HEDGE_TUNING.5xx_reduced_budget_percent (judged on the rate's one-sided 95% lower bound: a few 5xx among few requests cut nothing)" },
    Key { name: "HEDGE_TUNING.5xx_reduced_budget_percent", default: "5", range: Range::Number { min: 0.0, max: 100.0 }, meaning: "the hedge budget of an origin past HEDGE_TUNING.5xx_reduce_rate" },
    Key { name: "HEDGE_TUNING.5xx_stop_rate", default: "0.2", range: Range::Number { min: 0.0, max: 1.0 }, meaning: "5xx rate above which hedging to and from an origin stops (judged on the rate's one-sided 95% lower bound)" },
];

/// Keys no longer read, each with what replaced it. Named in a
/// configuration, one is reported (`npm run check` fails on it; the Worker
/// logs it once and runs on without it); it never stops traffic. The keys
/// that became `HEDGE_TUNING` fields are found by [`replacement`] from
/// [`TUNING`] itself.
pub const REMOVED: &[(&str, &str)] = &[
    ("HEDGE_ROUTE_PREFIXES", "HEDGE_ROUTES: a route with only a prefix, [{\"prefix\": \"/api\"}], names a route the same way"),
    ("HEDGE_MIN_DELAY_MS", "a constant: an adaptive delay is at least 5 ms"),
    ("HEDGE_MAX_DELAY_MS", "a constant: an adaptive delay is at most 2,000 ms"),
    ("HEDGE_POP_BLEND_SAMPLES", "a constant: 200 local samples weigh as much as the PoP's"),
    ("HEDGE_MAX_ROUTE_KEYS", "a constant: 64 latency windows per isolate"),
    ("HEDGE_COALESCE_MAX_WAIT_MS", "a constant: a coalesced request waits at most 5,000 ms"),
    ("HEDGE_COALESCE_MAX_KEYS", "a constant: 1,024 URLs coalesced at once per isolate"),
    ("HEDGE_POP_FALLBACK_NAME", "a constant: the aggregator is named \"default\" where a request has no cf.colo"),
    ("HEDGE_POP_MAX_KEYS", "a constant: 2,048 sketches per aggregator"),
    ("HEDGE_POP_IDLE_SECS", "a constant: the aggregator forgets a key after 600 s without a push"),
];

/// What replaced `key`, when it is a removed key: a [`REMOVED`] entry's
/// text, or the `HEDGE_TUNING` field the key became.
pub fn replacement(key: &str) -> Option<String> {
    if let Some((_, instead)) = REMOVED.iter().find(|(k, _)| *k == key) {
        return Some((*instead).to_string());
    }
    let field = key.strip_prefix("HEDGE_")?.to_ascii_lowercase();
    let name = format!("{TUNING_PREFIX}{field}");
    TUNING
        .iter()
        .any(|k| k.name == name)
        .then(|| format!("the HEDGE_TUNING field {field:?}: HEDGE_TUNING = {{\"{field}\": ...}}"))
}

/// How a `HEDGE_TUNING` field is named as a key.
pub(super) const TUNING_PREFIX: &str = "HEDGE_TUNING.";
