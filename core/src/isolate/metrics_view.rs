//! The isolate-scope metrics: its counters since it started (every sample
//! labelled with the isolate's id) and gauges read from its state now.

use super::Isolate;
use crate::admission::health::BudgetLevel;
use crate::config::Params;
use crate::observe::exposition::{write_counts, write_route_delays, Exposition, Format, Kind};
use crate::race::Hedger;

/// The isolate's metrics at `now_ms`.
pub(super) fn metrics_text(isolate: &mut Isolate, format: Format, now_ms: f64) -> String {
    let mut x = Exposition::new(format, &[("isolate", &isolate.id)]);
    x.family(
        "hedgehog_isolate",
        Kind::Info,
        "The isolate these figures come from, and the Worker version it runs; its counters start at its start time.",
    );
    x.sample(
        "hedgehog_isolate_info",
        &[("version", isolate.version())],
        1.0,
    );
    x.gauge(
        "hedgehog_isolate_start_time_seconds",
        "When the isolate started (Unix time).",
        isolate.started_ms / 1000.0,
    );
    write_counts(&mut x, &isolate.metrics);

    let h = &mut isolate.hedger;
    let params = &isolate.params;
    x.gauge(
        "hedgehog_hedge_budget_ratio",
        "The configured hedge budget: hedges allowed per eligible request (HEDGE_BUDGET_PERCENT / 100).",
        params.budget.percent / 100.0,
    );
    x.gauge(
        "hedgehog_budget_tokens",
        "Hedges the isolate's budget would allow now.",
        h.gate.budget_tokens(now_ms),
    );
    write_origins(&mut x, h, params, now_ms);
    let reports = isolate.route_delay_reports(now_ms);
    write_route_delays(&mut x, reports.iter());
    let h = &mut isolate.hedger;
    x.gauge(
        "hedgehog_isolate_lag_seconds",
        "How late the isolate's hedge timers run (a decaying mean): its own event loop's lag.",
        h.isolate_lag.mean_ms(now_ms) / 1000.0,
    );
    x.gauge(
        "hedgehog_config_errors",
        "Configuration keys that were invalid and run on their defaults (the stats page names them).",
        isolate.config_errors.len() as f64,
    );
    let push = h.pop.counts();
    x.family(
        "hedgehog_pop_pushes_sent",
        Kind::Counter,
        "Pushes to the PoP aggregator, by outcome.",
    );
    for (outcome, n) in [("succeeded", push.succeeded), ("failed", push.failed)] {
        x.sample(
            "hedgehog_pop_pushes_sent_total",
            &[("outcome", outcome)],
            n as f64,
        );
    }
    x.finish()
}

/// Each origin's gauges: up, the hedge budget level its 5xx rate allows,
/// its legs in flight.
fn write_origins(x: &mut Exposition, h: &mut Hedger, params: &Params, now_ms: f64) {
    x.family(
        "hedgehog_origin_up",
        Kind::Gauge,
        "1 while the origin is healthy (takes primaries and hedges), 0 while degraded.",
    );
    let mut budget_levels = Vec::new();
    for (i, o) in params.origins.iter().enumerate() {
        let snapshot = h.gate.origin_snapshot(i, now_ms);
        let up = snapshot.is_none_or(|s| s.healthy);
        x.sample(
            "hedgehog_origin_up",
            &[("origin", &o.name)],
            f64::from(u8::from(up)),
        );
        budget_levels.push(snapshot.map_or(BudgetLevel::Full, |s| s.budget));
    }
    x.family("hedgehog_origin_hedge_budget", Kind::Gauge, "What the origin's 5xx rate allows hedging to and from it: 1 for the level in force (full, reduced, stopped).");
    for (o, level) in params.origins.iter().zip(&budget_levels) {
        for name in ["full", "reduced", "stopped"] {
            let on = f64::from(u8::from(level.as_str() == name));
            x.sample(
                "hedgehog_origin_hedge_budget",
                &[("origin", &o.name), ("level", name)],
                on,
            );
        }
    }
    x.family(
        "hedgehog_origin_legs_in_flight",
        Kind::Gauge,
        "Requests to the origin awaiting an answer.",
    );
    for (i, o) in params.origins.iter().enumerate() {
        let n = h.gate.legs_in_flight(i, now_ms);
        x.sample(
            "hedgehog_origin_legs_in_flight",
            &[("origin", &o.name)],
            n as f64,
        );
    }
}
