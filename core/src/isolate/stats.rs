//! What the stats endpoint shows of an isolate: its origins, its routes
//! with the delay a request would get now, the budget and the PoP pushes.

use crate::vec_map::VecMap;
use std::collections::VecDeque;

use serde::Serialize;

use crate::admission::payoff::CAUSES;

use super::{Isolate, RecentError};
use crate::admission::health::BudgetLevel;
use crate::config::Params;
use crate::estimation::delay_plan::RouteDelay;
use crate::no_hedge::HedgeDenied;
use crate::observe::latency_export::LatencyExport;
use crate::observe::metrics::{MetricCounts, RouteMetrics};
use crate::pop::push::KeyDelta;
use crate::race::Hedger;

#[derive(Serialize)]
struct StatsJson<'a> {
    /// The quantile the adaptive delay hedges at.
    hedge_quantile: f64,
    /// Size of this isolate's wasm linear memory (the Rust heap lives there;
    /// it grows in 64 KiB pages and never shrinks).
    wasm_memory_bytes: f64,
    budget_tokens: f64,
    /// Body bytes held now (request bodies for replay, answers' copies on
    /// their way into the cache), and the most ever at once
    /// (capped by HEDGE_TUNING.max_held_body_bytes).
    held_body_bytes: u64,
    held_body_bytes_peak: u64,
    origins: Vec<OriginJson<'a>>,
    routes: Vec<RouteJson<'a>>,
    pop: PopJson,
    isolate: IsolateJson,
    /// Keys that were invalid and run on their defaults.
    config_errors: Vec<ConfigErrorJson<'a>>,
    /// The last requests that ended in an error, oldest first.
    recent_errors: &'a VecDeque<RecentError>,
}

#[derive(Serialize)]
struct ConfigErrorJson<'a> {
    key: &'a str,
    reason: &'a str,
}

/// The isolate's own load: how late its event loop runs, and what the
/// guards on a hedge's cost did.
#[derive(Serialize)]
struct IsolateJson {
    lag_ms: f64,
    lag_max_ms: f64,
    lag_samples: u64,
    busy: bool,
    busy_lag_ms: f64,
    hedges_skipped_busy: u64,
    third_attempts: u64,
    third_attempts_refused: u64,
}

/// Per cause, whether an origin's hedges pay.
#[derive(Serialize)]
struct PayoffJson {
    hedges: u64,
    recent_win_share: f64,
    let_out: f64,
    left_out: u64,
}

#[derive(Serialize)]
struct CauseJson {
    sent: u64,
    won: u64,
}

#[derive(Serialize)]
struct OriginJson<'a> {
    name: &'a str,
    zone: Option<&'a str>,
    degraded: bool,
    /// What its 5xx rate allows hedging to and from it: full, reduced, stopped.
    hedge_budget: &'static str,
    /// Tokens in its reduced bucket (spent while the budget is reduced).
    reduced_budget_tokens: f64,
    /// Requests over the health window, and their 5xx and failure rates.
    window_requests: u64,
    window_5xx_rate: Option<f64>,
    window_failure_rate: Option<f64>,
    /// The PoP-wide 5xx rate from the aggregator, while fresh and over
    /// enough answers; the budget level is the stricter of the two.
    pop_5xx_rate: Option<f64>,
    /// The origin-wide local quantile in use, ms.
    local_quantile_ms: Option<f64>,
    local_samples: u64,
    hedge_payoff: VecMap<&'static str, PayoffJson>,
}

/// One route label's counts (the metrics' own), and per origin with
/// samples on it, the delay a request with that origin as its primary gets.
#[derive(Serialize)]
struct RouteJson<'a> {
    route: &'a str,
    /// Requests that ran a race (a client's or a background refresh).
    requests: u64,
    hedges_sent: u64,
    hedges_won: u64,
    /// Hedges won per hedge sent.
    win_ratio: Option<f64>,
    /// Requests answered with a 5xx or without an origin answer.
    errors: u64,
    /// Origin work on legs cut short (losers, timeouts), ms.
    wasted_origin_ms: f64,
    /// That work as a share of all origin work on these requests.
    wasted_origin_fraction: Option<f64>,
    hedges_by_cause: VecMap<&'static str, CauseJson>,
    origins: Vec<RouteOriginJson<'a>>,
}

#[derive(Serialize)]
struct RouteOriginJson<'a> {
    origin: &'a str,
    local_quantile_ms: Option<f64>,
    local_samples: u64,
    pop_quantile_ms: Option<f64>,
    pop_samples: u64,
    /// The hedge delay a request on this route would get now, and its basis
    /// (route, blend, pop, origin, cold, static, retry); none when hedging is off.
    hedge_delay_ms: Option<f64>,
    delay_basis: Option<&'static str>,
    /// With a delay by predicted benefit: the share of requests expected to
    /// get a hedge (the expected extra load), and the mean of the slowest 1%
    /// predicted with that delay and without hedging.
    predicted_hedge_share: Option<f64>,
    predicted_tail_ms: Option<f64>,
    unhedged_tail_ms: Option<f64>,
}

#[derive(Serialize)]
struct PopJson {
    enabled: bool,
    pushes_succeeded: u64,
    pushes_failed: u64,
    failing_in_a_row: u32,
    last_push_bytes: u64,
    over_budget: bool,
}

fn route_json<'a>(
    route: &'a str,
    m: &RouteMetrics,
    origins: Vec<RouteOriginJson<'a>>,
) -> RouteJson<'a> {
    // `hedges[cause]` is [won, lost].
    let sent: u64 = m.hedges.iter().flatten().sum();
    let won: u64 = m.hedges.iter().map(|c| c[0]).sum();
    RouteJson {
        route,
        requests: m.requests,
        hedges_sent: sent,
        hedges_won: won,
        win_ratio: (sent > 0).then(|| won as f64 / sent as f64),
        errors: m.client_errors,
        wasted_origin_ms: m.wasted_origin_s * 1000.0,
        wasted_origin_fraction: (m.origin_s > 0.0).then(|| m.wasted_origin_s / m.origin_s),
        hedges_by_cause: CAUSES
            .iter()
            .zip(m.hedges)
            .filter(|(_, [won, lost])| won + lost > 0)
            .map(|(cause, [won, lost])| {
                let json = CauseJson {
                    sent: won + lost,
                    won,
                };
                (cause.as_str(), json)
            })
            .collect(),
        origins,
    }
}

/// Per cause that sent hedges for `origin`'s primaries, whether they pay.
fn payoff(h: &Hedger, origin: usize) -> VecMap<&'static str, PayoffJson> {
    let Some(cells) = h.payoff.cells(origin) else {
        return VecMap::new();
    };
    CAUSES
        .iter()
        .zip(cells)
        .filter(|(_, c)| c.hedges > 0 || c.left_out > 0)
        .map(|(cause, c)| {
            let json = PayoffJson {
                hedges: c.hedges,
                recent_win_share: c.win_share,
                let_out: c.let_out,
                left_out: c.left_out,
            };
            (cause.as_str(), json)
        })
        .collect()
}

/// What the advisor reads of `isolate` at `now_ms`: its sketches per
/// (origin, route key) over the window (or the time the isolate has lived,
/// if less), the setting in force, and the share of extra legs in what its
/// metrics counted.
pub(super) fn latency_export(isolate: &mut Isolate, now_ms: f64) -> LatencyExport {
    let Isolate {
        params,
        hedger: h,
        metrics,
        started_ms,
        ..
    } = isolate;
    let covered_ms = now_ms - *started_ms;
    let (requests, extra) = (metrics.routes.values()).fold((0u64, 0u64), |(n, e), r| {
        let hedges: u64 = r.hedges.iter().flatten().sum();
        (n + r.requests, e + hedges)
    });
    let extra = extra + metrics.third_attempts;
    let mut keys = Vec::new();
    h.estimator
        .each_route_sketch(now_ms, |origin, route, sketch| {
            if let Some(o) = params.origins.get(origin) {
                keys.push(KeyDelta::new(&o.name, route, sketch));
            }
        });
    LatencyExport {
        window_s: params.estimator.window.window_ms.min(covered_ms.max(0.0)) / 1000.0,
        hedge_share: if requests > 0 {
            extra as f64 / requests as f64
        } else {
            0.0
        },
        budget_percent: params.budget.percent,
        policy: params.policy.as_str().to_string(),
        keys,
    }
}

/// The stats of `isolate` at `now_ms`; `wasm_memory_bytes` is its linear
/// memory. Counts come from its metrics, the one place each is counted.
pub(super) fn stats(
    isolate: &mut Isolate,
    wasm_memory_bytes: f64,
    now_ms: f64,
) -> serde_json::Value {
    let Isolate {
        params,
        hedger: h,
        held_bodies: held,
        config_errors,
        recent_errors,
        metrics,
        ..
    } = isolate;
    let busy_skips = (metrics.hedge_skips)
        .get(HedgeDenied::IsolateBusy.as_str())
        .copied()
        .unwrap_or(0);
    let q = params.delay.quantile;
    let origins = origins(params, h, now_ms);
    let routes = routes(params, h, metrics, now_ms);
    let push = h.pop.counts();
    let json = StatsJson {
        hedge_quantile: q,
        wasm_memory_bytes,
        budget_tokens: h.gate.budget_tokens(now_ms),
        held_body_bytes: held.held(),
        held_body_bytes_peak: held.peak(),
        origins,
        routes,
        pop: PopJson {
            enabled: h.pop.enabled(),
            pushes_succeeded: push.succeeded,
            pushes_failed: push.failed,
            failing_in_a_row: push.failing_in_a_row,
            last_push_bytes: push.last_push_bytes,
            over_budget: h.pop.over_budget(params.budget.percent / 100.0, now_ms),
        },
        isolate: IsolateJson {
            lag_ms: h.isolate_lag.mean_ms(now_ms),
            lag_max_ms: h.isolate_lag.max_ms(),
            lag_samples: h.isolate_lag.samples(),
            busy: h.isolate_lag.was_busy(),
            busy_lag_ms: h.isolate_lag.busy_ms(),
            hedges_skipped_busy: busy_skips,
            third_attempts: metrics.third_attempts,
            third_attempts_refused: h.third.refused,
        },
        config_errors: config_errors
            .iter()
            .map(|e| ConfigErrorJson {
                key: &e.key,
                reason: &e.reason,
            })
            .collect(),
        recent_errors,
    };
    serde_json::to_value(&json).unwrap_or_default()
}

/// Each origin's health, budget level, quantile and payoff.
fn origins<'a>(params: &'a Params, h: &mut Hedger, now_ms: f64) -> Vec<OriginJson<'a>> {
    let q = params.delay.quantile;
    params
        .origins
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let e = h.estimator.estimates(i, "", q, now_ms).origin;
            let gate = h.gate.origin_snapshot(i, now_ms);
            OriginJson {
                name: &o.name,
                zone: o.zone.as_deref(),
                degraded: gate.is_some_and(|g| !g.healthy),
                hedge_budget: gate.map_or(BudgetLevel::Full, |g| g.budget).as_str(),
                reduced_budget_tokens: gate.map_or(0.0, |g| g.reduced_budget_tokens),
                window_requests: gate.map_or(0, |g| g.window.requests),
                window_5xx_rate: gate.and_then(|g| g.window.server_error_rate),
                window_failure_rate: gate.and_then(|g| g.window.failure_rate),
                pop_5xx_rate: h.gate.pop_5xx_rate(i, now_ms),
                local_quantile_ms: e.map(|e| e.value_ms),
                local_samples: e.map_or(0, |e| e.samples),
                hedge_payoff: payoff(h, i),
            }
        })
        .collect()
}

/// Each route the metrics count, with its counters, and under it each
/// origin with samples on it in the window: its quantiles and the delay a
/// request with it as the primary would get now.
fn routes<'a>(
    params: &'a Params,
    h: &mut Hedger,
    metrics: &'a MetricCounts,
    now_ms: f64,
) -> Vec<RouteJson<'a>> {
    let q = params.delay.quantile;
    let mut delays: Vec<(String, RouteOriginJson<'a>)> = Vec::new();
    for (origin, route) in h.estimator.route_keys(now_ms) {
        let estimates = h.estimator.estimates(origin, &route, q, now_ms);
        let (local, pop) = (estimates.route, h.pop.estimate(origin, &route, now_ms));
        let RouteDelay {
            choice: delay,
            benefit,
        } = h.route_delay(origin, &route, now_ms);
        let json = RouteOriginJson {
            origin: params.origins.get(origin).map_or("?", |o| o.name.as_str()),
            local_quantile_ms: local.map(|e| e.value_ms),
            local_samples: local.map_or(0, |e| e.samples),
            pop_quantile_ms: pop.map(|e| e.value_ms),
            pop_samples: pop.map_or(0, |e| e.samples),
            hedge_delay_ms: delay.map(|d| d.delay_ms),
            delay_basis: delay.map(|d| d.basis.as_str()),
            predicted_hedge_share: benefit.map(|b| b.hedge_share),
            predicted_tail_ms: benefit.map(|b| b.tail_ms),
            unhedged_tail_ms: benefit.map(|b| b.unhedged_tail_ms),
        };
        delays.push((route, json));
    }
    (metrics.routes.iter())
        .map(|(route, m)| {
            // A label given up leaves the metrics at once and the estimator
            // only when idle: its delays are not shown in between.
            let (mine, rest) = std::mem::take(&mut delays)
                .into_iter()
                .partition::<Vec<_>, _>(|(r, _)| r == route);
            delays = rest;
            route_json(route, m, mine.into_iter().map(|(_, d)| d).collect())
        })
        .collect()
}
