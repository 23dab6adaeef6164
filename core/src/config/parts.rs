//! Each part of the configuration reads its own keys (`DelayParams::read`
//! and so on); [`super::parse`] only composes them. Text keys are read by a
//! function of their text, so an absent key reads its declared default the
//! same way a set one is read.

use super::reader::Reader;
use super::{PopConfig, ProbeParams, Secret, StatsParams};
use crate::admission::budget::BudgetParams;
use crate::admission::health::HealthParams;
use crate::admission::origin_load::OriginLoadParams;
use crate::admission::payoff::GuardParams;
use crate::estimation::delay_policy::{DelayParams, HedgeMode, HedgePolicy};
use crate::estimation::estimator::EstimatorParams;
use crate::estimation::window::WindowParams;
use crate::observe::request_log::LogLevel;
use crate::pop::aggregate::PopParams;
use crate::pop::link::{PopLinkParams, MAX_PUSH_BACKOFF_MS};
use crate::request::coalesce::{CoalesceParams, MAX_WAITERS_PER_FLIGHT};
use crate::request::eligibility::EligibilityParams;
use crate::request::route_key::RouteKeyParams;

/// The shortest silence that can be a stall, ms: below it, timer and
/// scheduling noise would look like one.
const STALL_MIN_MS: f64 = 20.0;

// Former settings that no deployment had a reason to change, kept at the
// defaults every lab run and test has used (docs/request-path.md and
// docs/pop.md have the runs); `keys::REMOVED` tells a configuration that
// still names one.

/// Adaptive delays are clamped to [5 ms, 2 s]: below 5 ms a hedge races
/// timer noise; past 2 s a hedge no longer helps the tail the budget pays for.
const MIN_DELAY_MS: f64 = 5.0;
const MAX_DELAY_MS: f64 = 2_000.0;
/// Local samples at which the isolate's own quantile weighs as much as the
/// PoP's (a few seconds of one isolate's traffic at the lab's rates).
const POP_BLEND_SAMPLES: u64 = 200;
/// (origin, route key) latency windows one isolate keeps: each is about
/// 1.5 KB, so 64 bound the estimator near 100 KB (`core/tests/memory_bound.rs`).
const MAX_ROUTE_KEYS: usize = 64;
/// Sketches one aggregator keeps, and how long a key no push names lives.
const POP_MAX_KEYS: usize = 2_048;
const POP_IDLE_MS: f64 = 600_000.0;
/// The aggregator's name where a request carries no `cf.colo` (local runs).
const POP_FALLBACK_NAME: &str = "default";
/// A coalesced request waits at most this long for the shared fetch before
/// fetching for itself; distinct URLs coalesced at once per isolate.
const COALESCE_MAX_WAIT_MS: f64 = 5_000.0;
const COALESCE_MAX_KEYS: usize = 1_024;

/// Methods hedged without an idempotency key may only be these.
const IDEMPOTENT: &[&str] = &["GET", "HEAD", "OPTIONS", "PUT", "DELETE"];

// === impl DelayParams ===

impl DelayParams {
    pub(super) fn read(r: &mut Reader<'_>) -> Self {
        Self {
            quantile: r.parsed("HEDGE_TUNING.quantile", quantile, 0.0),
            offset_ms: r.number("HEDGE_TUNING.offset_ms"),
            min_delay_ms: MIN_DELAY_MS,
            max_delay_ms: MAX_DELAY_MS,
            cold_delay_ms: r.number("HEDGE_TUNING.cold_delay_ms"),
            min_data_points: r.integer("HEDGE_TUNING.min_data_points"),
            pop_blend_samples: POP_BLEND_SAMPLES,
        }
    }
}

/// `p95` or `0.95`.
fn quantile(raw: &str) -> Result<f64, String> {
    let parsed = match raw.strip_prefix(['p', 'P']) {
        Some(percent) => percent.parse::<f64>().map(|p| p / 100.0),
        None => raw.parse::<f64>(),
    };
    match parsed {
        // The tolerance lets p99.9 (99.9 / 100 = 0.99900000000000001) through.
        Ok(q) if (0.5 - 1e-9..=0.999 + 1e-9).contains(&q) => Ok(q),
        _ => Err(format!("expected p50..p99.9 or 0.5..0.999, got {raw:?}")),
    }
}

/// `HEDGE_MODE`, with the delay or timeout its mode needs.
pub(super) fn mode(r: &mut Reader<'_>) -> HedgeMode {
    let mode = r.parsed("HEDGE_MODE", mode_name, "adaptive");
    match mode {
        "off" => HedgeMode::Off,
        "static" => {
            if r.raw("HEDGE_STATIC_DELAY_MS").is_none() {
                r.fail(
                    "HEDGE_STATIC_DELAY_MS",
                    "required when HEDGE_MODE is static; running adaptive until it is set",
                );
                // Not a delay of 0 (every request hedged at once): the
                // learned delay, as if the mode were not set.
                return HedgeMode::Adaptive;
            }
            HedgeMode::Static {
                delay_ms: r.number("HEDGE_STATIC_DELAY_MS"),
            }
        }
        "retry" => HedgeMode::Retry {
            timeout_ms: r.number("HEDGE_TUNING.retry_timeout_ms"),
        },
        _ => HedgeMode::Adaptive,
    }
}

fn mode_name(raw: &str) -> Result<&'static str, String> {
    let lower = raw.to_ascii_lowercase();
    ["adaptive", "static", "off", "retry"]
        .into_iter()
        .find(|m| *m == lower)
        .ok_or_else(|| format!("expected adaptive, static, off or retry, got {lower:?}"))
}

/// `HEDGE_POLICY`.
pub(super) fn policy(r: &mut Reader<'_>) -> HedgePolicy {
    let read = |raw: &str| match raw.trim().to_ascii_lowercase().as_str() {
        "tail-aware" => Ok(HedgePolicy::TailAware),
        "fixed-quantile" => Ok(HedgePolicy::FixedQuantile),
        other => Err(format!(
            "expected tail-aware or fixed-quantile, got {other:?}"
        )),
    };
    r.parsed("HEDGE_POLICY", read, HedgePolicy::TailAware)
}

/// The guards on what a hedge costs the isolate, which only the tail-aware
/// policy uses (read whatever the policy, so a bad value is reported). A
/// fixed delay (`HEDGE_MODE=static`) is the operator's explicit choice: its
/// hedges are not second-guessed, only its double failures retried.
pub(super) fn guards(r: &mut Reader<'_>, policy: HedgePolicy, mode: HedgeMode) -> GuardParams {
    let tail_aware = policy == HedgePolicy::TailAware;
    let adaptive = tail_aware && mode == HedgeMode::Adaptive;
    let busy_lag_ms = r.number("HEDGE_TUNING.isolate_busy_lag_ms");
    let cut_unpaid = r.boolean("HEDGE_TUNING.cut_unpaid");
    let third_attempt = r.boolean("HEDGE_TUNING.third_attempt");
    GuardParams {
        busy_lag_ms: if adaptive { busy_lag_ms } else { 0.0 },
        cut_unpaid: cut_unpaid && adaptive,
        third_attempt: third_attempt && tail_aware,
    }
}

// === impl OriginLoadParams ===

impl OriginLoadParams {
    /// Primary choice and stall detection, which only the tail-aware policy
    /// uses (its keys are read whatever the policy, so a bad value is
    /// reported either way).
    pub(super) fn read(r: &mut Reader<'_>, policy: HedgePolicy, timeout_ms: f64) -> Self {
        let tail_aware = policy == HedgePolicy::TailAware;
        let read = |raw: &str| match raw.trim().to_ascii_lowercase().as_str() {
            "latency" => Ok(true),
            "ordered" => Ok(false),
            other => Err(format!("expected latency or ordered, got {other:?}")),
        };
        let by_latency = r.parsed("HEDGE_PRIMARY", read, true);
        let stall_factor = r.number("HEDGE_TUNING.stall_factor");
        Self {
            by_latency: by_latency && tail_aware,
            probe_share: r.number("HEDGE_TUNING.primary_probe_percent") / 100.0,
            stall_factor: if tail_aware { stall_factor } else { 0.0 },
            stall_min_ms: STALL_MIN_MS,
            leg_expiry_ms: timeout_ms,
            governor: tail_aware,
        }
    }
}

// === impl BudgetParams ===

impl BudgetParams {
    pub(super) fn read(r: &mut Reader<'_>) -> Self {
        Self {
            percent: r.number("HEDGE_BUDGET_PERCENT"),
            floor_per_sec: r.number("HEDGE_BUDGET_FLOOR_PER_SEC"),
            max_tokens: r.number("HEDGE_TUNING.budget_max_tokens"),
        }
    }
}

// === impl EligibilityParams ===

impl EligibilityParams {
    pub(super) fn read(r: &mut Reader<'_>) -> Self {
        Self {
            methods: r.parsed("HEDGE_METHODS", methods, Vec::new()),
            idempotency_header: r.parsed("HEDGE_IDEMPOTENCY_HEADER", idempotency_header, None),
            max_body_bytes: r.integer("HEDGE_TUNING.max_body_bytes"),
        }
    }
}

/// A comma-separated list of idempotent methods.
pub(super) fn methods(raw: &str) -> Result<Vec<String>, String> {
    let mut methods = Vec::new();
    for m in raw
        .split(',')
        .map(|m| m.trim().to_ascii_uppercase())
        .filter(|m| !m.is_empty())
    {
        if !IDEMPOTENT.contains(&m.as_str()) {
            return Err(format!(
                "{m} is not idempotent; allowed: {}. Use HEDGE_IDEMPOTENCY_HEADER for others",
                IDEMPOTENT.join(", ")
            ));
        }
        methods.push(m);
    }
    Ok(methods)
}

/// A header name, or `off` (or nothing) for none.
fn idempotency_header(raw: &str) -> Result<Option<String>, String> {
    let name = raw.trim().to_ascii_lowercase();
    if name.is_empty() || name == "off" {
        return Ok(None);
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(format!("{name:?} is not a header name"));
    }
    Ok(Some(name))
}

// === impl RouteKeyParams ===

impl RouteKeyParams {
    pub(super) fn read(r: &mut Reader<'_>) -> Self {
        Self {
            segments: r.integer("HEDGE_TUNING.route_segments") as usize,
        }
    }
}

// === impl EstimatorParams ===

impl EstimatorParams {
    pub(super) fn read(r: &mut Reader<'_>) -> Self {
        Self {
            window: WindowParams {
                window_ms: r.number("HEDGE_TUNING.window_secs") * 1000.0,
                sub_windows: r.integer("HEDGE_TUNING.sub_windows") as usize,
            },
            max_route_keys: MAX_ROUTE_KEYS,
        }
    }
}

// === impl HealthParams ===

impl HealthParams {
    /// Origin health over the latency window; a trial lasts at most as long
    /// as any request may (`timeout_ms`).
    pub(super) fn read(r: &mut Reader<'_>, window: WindowParams, timeout_ms: f64) -> Self {
        let health = Self {
            window,
            trial_timeout_ms: timeout_ms,
            consecutive_failures: r.integer("HEDGE_TUNING.health_consecutive_failures") as u32,
            failure_rate: r.number("HEDGE_TUNING.health_failure_rate"),
            min_requests: r.integer("HEDGE_TUNING.health_min_requests"),
            cooldown_ms: r.number("HEDGE_TUNING.health_cooldown_ms"),
            reduce_above_5xx_rate: r.number("HEDGE_TUNING.5xx_reduce_rate"),
            reduced_budget_percent: r.number("HEDGE_TUNING.5xx_reduced_budget_percent"),
            stop_above_5xx_rate: r.number("HEDGE_TUNING.5xx_stop_rate"),
        };
        if health.stop_above_5xx_rate < health.reduce_above_5xx_rate {
            // Blamed on a key that is set, so that dropping it (as a running
            // Worker does) resolves the conflict: the stop rate when both are.
            let (key, other) = match r.raw("HEDGE_TUNING.5xx_stop_rate") {
                Some(_) => ("HEDGE_TUNING.5xx_stop_rate", "5xx_reduce_rate"),
                None => ("HEDGE_TUNING.5xx_reduce_rate", "5xx_stop_rate"),
            };
            r.fail(
                key,
                format!("conflicts with {other}: the stop rate must not be below the reduce rate"),
            );
        }
        health
    }
}

// === impl PopConfig ===

impl PopConfig {
    /// The PoP aggregate; its answers are used for one latency `window`.
    pub(super) fn read(r: &mut Reader<'_>, window: WindowParams) -> Self {
        Self {
            link: PopLinkParams {
                push_interval_ms: r.number("HEDGE_TUNING.pop_push_interval_ms"),
                push_every_requests: r.integer("HEDGE_TUNING.pop_push_every_requests"),
                stale_ms: window.window_ms,
                enabled: true,
                max_backoff_ms: MAX_PUSH_BACKOFF_MS,
            },
            aggregate: PopParams {
                window,
                max_keys: POP_MAX_KEYS,
                idle_ms: POP_IDLE_MS,
            },
            timeout_ms: r.number("HEDGE_TUNING.pop_timeout_ms"),
            probes: ProbeParams {
                path: match r.raw("HEDGE_PROBE_PATH").map(str::trim) {
                    None | Some("") | Some("none") => None,
                    Some(_) => Some(r.parsed("HEDGE_PROBE_PATH", probe_path, String::new())),
                },
                interval_ms: r.number("HEDGE_TUNING.probe_interval_s") * 1000.0,
                timeout_ms: r.number("HEDGE_TUNING.probe_timeout_ms"),
            },
            fallback_name: POP_FALLBACK_NAME.to_string(),
        }
    }
}

/// `HEDGE_PROBE_PATH`: a path on every origin (the origin's own path prefix
/// comes first), without query or fragment.
fn probe_path(raw: &str) -> Result<String, String> {
    match raw.trim() {
        p if p.starts_with('/') && !p.contains(['?', '#', ' ', '\\']) => Ok(p.to_string()),
        _ => {
            Err("must be a path starting with '/', without query or fragment (or none)".to_string())
        }
    }
}

// === impl StatsParams ===

impl StatsParams {
    pub(super) fn read(r: &mut Reader<'_>) -> Self {
        let words: Vec<&str> = r
            .raw("HEDGE_STATS_TOKEN")
            .map(|t| {
                t.split([' ', ',', '\t', '\n'])
                    .filter(|t| !t.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        // Every word of the setting is withheld from the origins, even when
        // the setting is refused (a rotation typo must not send the token on).
        let withheld: Vec<Secret> = words.iter().map(|t| Secret(t.to_string())).collect();
        // The values themselves are never echoed in an error.
        let tokens = if words.len() > 2 {
            r.fail(
                "HEDGE_STATS_TOKEN",
                "holds one token, or two (separated by a space or a comma) while rotating",
            );
            Vec::new()
        } else if words.iter().any(|t| t.len() < 16) {
            r.fail(
                "HEDGE_STATS_TOKEN",
                "must be at least 16 characters (a guessable token exposes origin names and traffic)",
            );
            Vec::new()
        } else {
            withheld.clone()
        };
        // An unreadable location turns the pages off: falling back to the
        // default path would serve them on every host the operator meant to
        // keep them off.
        let (host, path) = match operator_location(r.text("HEDGE_STATS_PATH")) {
            Ok(location) => location,
            Err(reason) => {
                r.fail("HEDGE_STATS_PATH", reason);
                (None, String::new())
            }
        };
        Self {
            path,
            host,
            tokens,
            withheld,
        }
    }
}

/// `HEDGE_STATS_PATH` as (host, path): a path, optionally after the one
/// hostname the pages answer on, written with or without a scheme and the
/// default port (`https://ops.example.com:443/__hedge/stats` is
/// `ops.example.com` and `/__hedge/stats`).
fn operator_location(raw: &str) -> Result<(Option<String>, String), String> {
    const EXPECTED: &str = "must be a path starting with '/', optionally after the one hostname the pages answer on (ops.example.com/__hedge/stats, with https:// or the default port if you like), without query or fragment";
    let raw = raw.trim();
    let lower = raw.to_ascii_lowercase();
    let rest = ["https://", "http://", "//"]
        .iter()
        .find_map(|scheme| lower.starts_with(scheme).then(|| &raw[scheme.len()..]))
        .unwrap_or(raw);
    // A bare host, another scheme or another port: nothing the pages can
    // be served at as the operator meant.
    let (authority, path) = rest.split_at(rest.find('/').ok_or(EXPECTED)?);
    let host = match authority.rsplit_once(':') {
        Some((host, "443" | "80")) => host,
        Some(_) => return Err(EXPECTED.to_string()),
        None => authority,
    };
    let host_ok = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    if !host_ok || path.contains("://") || path.contains(['?', '#', ' ']) {
        return Err(EXPECTED.to_string());
    }
    let host = (!host.is_empty()).then(|| host.to_ascii_lowercase());
    Ok((host, path.to_string()))
}

/// `HEDGE_LOG_LEVEL`.
pub(super) fn log_level(r: &mut Reader<'_>) -> LogLevel {
    let read =
        |raw: &str| LogLevel::parse(raw).ok_or_else(|| "must be off, error or info".to_string());
    r.parsed("HEDGE_LOG_LEVEL", read, LogLevel::Error)
}

// === impl CoalesceParams ===

impl CoalesceParams {
    /// Waiters read the shared response from the cache: no cache, no coalescing.
    pub(super) fn read(r: &mut Reader<'_>, cache: bool) -> Self {
        Self {
            enabled: r.boolean("HEDGE_COALESCE") && cache,
            max_wait_ms: COALESCE_MAX_WAIT_MS,
            max_flights: COALESCE_MAX_KEYS,
            max_waiters: MAX_WAITERS_PER_FLIGHT,
        }
    }
}
