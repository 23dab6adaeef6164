//! The advisor: what another hedge budget would buy on a PoP's own traffic.
//!
//! cargo run --release -p hedgehog-core --example advise -- --from STATS.json [--json]
//!   [--budgets 0,2,4,6,8,10,12,15,20] [--knee-pct 5] [--seed 1]
//!
//! STATS.json is the stats page of a deployed Worker (`/__hedge/stats?scope=pop`,
//! or an isolate's `/__hedge/stats` where no aggregator is bound); `npm run
//! advise` fetches it. Each busy route's per-origin latency (Kaplan-Meier over
//! its legs: losers cut short count as "at least this slow") and 5xx share are
//! replayed through the simulator's real core at the route's measured request
//! rate, for each budget and both policies; each tail-aware row is also held
//! against the best fixed delay in hindsight at its own extra load.

use std::collections::BTreeMap;
use std::time::Instant;

use hedgehog_core::estimation::sketch::LatencySketch;
use hedgehog_core::observe::latency_export::LatencyExport;
use hedgehog_core::pop::upkeep::SHED_ABOVE_PUSHES_PER_S;
use hedgehog_core::sim::{
    run, Configuration, Empirical, IsolateCpu, LatencyModel, OriginSpec, Replay, Row, Scenario,
    SimParams,
};
use serde_json::{json, Value};

/// Budgets tried unless `--budgets` says otherwise, % of requests.
const BUDGETS: [f64; 9] = [0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0];
/// Requests simulated per configuration (10 above p99.9; a PoP of 10 busy
/// routes and 4 origins is then replayed in about 25 s on 2 cores).
const REQUESTS_PER_RUN: f64 = 10_000.0;
/// Requests per second one simulated isolate takes (the lab's one isolate
/// at its usual load); a faster route is spread over more.
const RATE_PER_ISOLATE: f64 = 200.0;
/// Legs an origin's latency must rest on before a route is judged.
const MIN_LEGS: u64 = 500;
/// Routes judged at most (the busiest).
const MAX_ROUTES: usize = 20;

const LIMITS: &str = "What the replay cannot know: latency that moves with time (stop-the-world pauses, spells of slowness: \
each request is drawn independently from the window's distribution), origin latency that rises with load (hedges \
are assumed not to slow the origin), settings other than the budget and policy (at their defaults), and how a PoP's \
isolates split the rate (one isolate per 200 requests/s). Failures are fast 5xx at the measured share.";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{}", include_str!("advise.txt"));
        return;
    }
    let value = |name: &str| args.windows(2).find(|w| w[0] == name).map(|w| w[1].clone());
    let budgets: Vec<f64> = match value("--budgets") {
        Some(list) => list
            .split(',')
            .map(|b| match b.trim().parse::<f64>() {
                Ok(x) if (0.0..=100.0).contains(&x) => x,
                _ => {
                    eprintln!("advise: --budgets expects percentages 0-100, got {b:?}");
                    std::process::exit(2)
                }
            })
            .collect(),
        None => BUDGETS.to_vec(),
    };
    let knee_pct: f64 = parsed(value("--knee-pct"), "--knee-pct", 5.0, |x: &f64| {
        (0.0..=100.0).contains(x)
    });
    let seed: u64 = parsed(value("--seed"), "--seed", 1, |_| true);
    let Some(from) = value("--from") else {
        eprintln!("advise: --from STATS.json is required (npm run advise -- --help)");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&from).unwrap_or_else(|e| {
        eprintln!("advise: cannot read {from}: {e}");
        std::process::exit(2)
    });
    let stats: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("advise: {from} is not JSON: {e}");
        std::process::exit(2)
    });
    let export: LatencyExport = match stats.get("latency").cloned().map(serde_json::from_value) {
        Some(Ok(e)) => e,
        _ => {
            eprintln!("advise: {from} has no \"latency\" section: is it /__hedge/stats (?scope=pop) of a Worker from 2026-12 or later?");
            std::process::exit(2)
        }
    };
    let started = Instant::now();
    let failures = failure_shares(&stats);
    let routes = routes_of(&export);
    // Routes replay independently: one thread per core, routes dealt out.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut advice: Vec<(usize, Value)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (routes, export, failures, budgets) = (&routes, &export, &failures, &budgets);
                scope.spawn(move || {
                    (routes.iter().enumerate().skip(t).step_by(threads))
                        .map(|(i, r)| {
                            (
                                i,
                                advise_route(r, export, failures, budgets, knee_pct, seed),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join().unwrap_or_else(|_| {
                    eprintln!("advise: a replay failed (see above)");
                    std::process::exit(1)
                })
            })
            .collect()
    });
    advice.sort_by_key(|(i, _)| *i);
    let advice: Vec<Value> = advice.into_iter().map(|(_, v)| v).collect();
    let out = json!({
        "window_s": export.window_s,
        "in_force": { "budget_percent": export.budget_percent, "policy": export.policy },
        "knee_pct": knee_pct,
        "routes": advice,
        "limits": LIMITS,
        "seconds": started.elapsed().as_secs_f64(),
    });
    if args.iter().any(|a| a == "--json") {
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        print!("{}", text_report(&out));
    }
}

/// `raw` read as a `T` that `ok` accepts, `default` without it; anything
/// else ends the run with what was wrong.
fn parsed<T: std::str::FromStr>(
    raw: Option<String>,
    name: &str,
    default: T,
    ok: impl Fn(&T) -> bool,
) -> T {
    match raw.map(|r| (r.parse::<T>().ok().filter(&ok), r)) {
        None => default,
        Some((Some(x), _)) => x,
        Some((None, r)) => {
            eprintln!("advise: {name} does not take {r:?} (npm run advise -- --help)");
            std::process::exit(2)
        }
    }
}

/// One route's keys: (origin, its latency) in order of legs, busiest first.
struct RouteData {
    route: String,
    origins: Vec<(String, Empirical)>,
    legs: u64,
}

/// The name of the whole PoP's entry: every route's legs per origin
/// together, at the total rate (what a lab measures as one figure).
const ALL_ROUTES: &str = "(all routes)";

fn routes_of(export: &LatencyExport) -> Vec<RouteData> {
    let mut by_route: BTreeMap<String, Vec<(String, Empirical)>> = BTreeMap::new();
    let mut by_origin: BTreeMap<String, LatencySketch> = BTreeMap::new();
    for key in &export.keys {
        let sketch = key.sketch();
        by_origin
            .entry(key.origin.clone())
            .or_default()
            .merge(&sketch);
        if let Some(model) = Empirical::from_sketch(&sketch) {
            by_route
                .entry(key.route.clone())
                .or_default()
                .push((key.origin.clone(), model));
        }
    }
    let whole: Vec<(String, Empirical)> = (by_origin.iter())
        .filter_map(|(origin, sketch)| Some((origin.clone(), Empirical::from_sketch(sketch)?)))
        .collect();
    let mut routes: Vec<RouteData> = (by_route.into_iter())
        .map(|(route, origins)| RouteData::new(route, origins))
        .collect();
    routes.sort_by_key(|r| std::cmp::Reverse(r.legs));
    routes.truncate(MAX_ROUTES);
    if routes.len() > 1 {
        routes.insert(0, RouteData::new(ALL_ROUTES.to_string(), whole));
    }
    routes
}

impl RouteData {
    /// `route` with its `origins`, busiest first (ties by name).
    fn new(route: String, mut origins: Vec<(String, Empirical)>) -> Self {
        origins.sort_by(|a, b| b.1.legs.cmp(&a.1.legs).then(a.0.cmp(&b.0)));
        let legs = origins.iter().map(|o| o.1.legs).sum();
        RouteData {
            route,
            origins,
            legs,
        }
    }
}

/// Each origin's share of failed answers, from the stats page's origins
/// (an isolate's `window_5xx_rate`, the PoP's `rate_5xx`).
fn failure_shares(stats: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for o in stats["origins"].as_array().into_iter().flatten() {
        let name = o["name"].as_str().or_else(|| o["origin"].as_str());
        let rate = o["window_5xx_rate"]
            .as_f64()
            .or_else(|| o["rate_5xx"].as_f64());
        if let (Some(name), Some(rate)) = (name, rate) {
            out.insert(name.to_string(), rate.clamp(0.0, 1.0));
        }
    }
    out
}

/// Why a route cannot be judged, if it cannot.
fn not_judged(r: &RouteData) -> Option<String> {
    if r.origins.len() < 2 {
        return Some("one origin only: a hedge has nowhere to go".into());
    }
    (r.origins.iter())
        .find(|(_, m)| m.legs < MIN_LEGS)
        .map(|(name, m)| {
            format!(
                "origin {name} has {} legs in the window (needs {MIN_LEGS})",
                m.legs
            )
        })
}

fn advise_route(
    r: &RouteData,
    export: &LatencyExport,
    failures: &BTreeMap<String, f64>,
    budgets: &[f64],
    knee_pct: f64,
    seed: u64,
) -> Value {
    let window_s = export.window_s.max(1.0);
    let rate_rps = r.legs as f64 / window_s / (1.0 + export.hedge_share.max(0.0));
    // Requests the replay serves at the guessed tail (or slower) have an
    // unknown latency: a percentile above their share is still known.
    let guess_ms = (r.origins.iter())
        .filter_map(|(_, e)| e.guessed_at_ms())
        .fold(f64::INFINITY, f64::min);
    let origins = json!(r
        .origins
        .iter()
        .map(|(name, e)| json!({
            "origin": name, "legs": e.legs, "unresolved_tail": e.unresolved_tail,
            "p50_ms": e.at(0.5), "p99_ms": e.at(0.99),
            "failure_share": failures.get(name).copied().unwrap_or(0.0),
        }))
        .collect::<Vec<_>>());
    if let Some(why) = not_judged(r) {
        return json!({ "route": r.route, "rate_rps": rate_rps, "origins": origins, "judged": false, "why_not": why });
    }
    let scenario = Scenario {
        name: "measured",
        description: "the PoP's measured latency",
        origins: (r.origins.iter())
            .map(|(name, e)| {
                let share = failures.get(name).copied().unwrap_or(0.0);
                OriginSpec {
                    latency: LatencyModel::Measured(Box::new(e.clone())),
                    // A failure answers as fast as the origin's fastest 5%.
                    fast_failure: (share > 0.0).then(|| (share, 503, e.at(0.05))),
                    stalls: None,
                    workers: None,
                    rtt_ms: 0.0,
                    episode: None,
                }
            })
            .collect(),
        cache: None,
    };
    let params = SimParams {
        scenario,
        rate_rps,
        seconds: (REQUESTS_PER_RUN / rate_rps.max(0.1)).clamp(10.0, 3_600.0),
        warmup_seconds: 3.0,
        isolates: (rate_rps / RATE_PER_ISOLATE).ceil().max(1.0) as usize,
        poisson: true,
        seed,
        worker_overhead_ms: 0.3,
        aggregator_rtt_ms: None,
        aggregator_capacity_per_s: SHED_ABOVE_PUSHES_PER_S,
        routes: 1,
        isolate_cpu: Some(IsolateCpu::lab()),
    };
    let mut rows = Vec::new();
    // Each tail-aware row's tape and extra load: the bound is replayed for
    // the rows that matter once the knee is known (a bound costs more than
    // the run it replays).
    let mut tapes = Vec::new();
    for policy in ["tail-aware", "fixed-quantile"] {
        for &budget in budgets {
            let mut vars = hedgehog_core::vec_map::VecMap::new();
            if budget == 0.0 {
                vars.insert("HEDGE_MODE".to_string(), "off".to_string());
            } else {
                vars.insert("HEDGE_BUDGET_PERCENT".to_string(), budget.to_string());
            }
            vars.insert("HEDGE_POLICY".to_string(), policy.to_string());
            let config = Configuration {
                name: format!("{policy} {budget}%"),
                vars,
            };
            let Ok(result) = run(&params, &config) else {
                continue;
            };
            let row = Row::from_result(&config.name, &result);
            let extra =
                (result.hedges + result.third_attempts) as f64 / result.requests.max(1) as f64;
            let in_force = policy == export.policy && (budget - export.budget_percent).abs() < 1e-9;
            let at_guess = (result.latencies_ms.iter())
                .filter(|&&ms| ms >= guess_ms * 0.99)
                .count() as f64
                / result.latencies_ms.len().max(1) as f64;
            rows.push(json!({
                "policy": policy, "budget_percent": budget, "in_force": in_force,
                "p50_ms": row.p50, "p99_ms": row.p99, "p999_ms": row.p999,
                "p99_known": at_guess < 0.01, "p999_known": at_guess < 0.001,
                "share_at_guess": at_guess,
                "extra_pct": row.extra_pct, "errors": row.errors,
            }));
            if policy == "tail-aware" && budget > 0.0 {
                tapes.push((rows.len() - 1, result.tape, extra));
            }
        }
    }
    let recommendation = knee(&rows, &export.policy, knee_pct);
    // The yardstick for the setting in force and the advice.
    for (at, tape, extra) in tapes {
        let row = &rows[at];
        let wanted = row["in_force"] == true
            || (row["policy"] == recommendation["policy"]
                && row["budget_percent"] == recommendation["budget_percent"]);
        if let (true, Some(b)) = (wanted, Replay::new(&params, &tape).bound(extra)) {
            rows[at]["bound_p99_ms"] = json!(b.p99.latency_ms);
            rows[at]["bound_p999_ms"] = json!(b.p999.latency_ms);
        }
    }
    json!({
        "route": r.route, "rate_rps": rate_rps, "origins": origins, "judged": true,
        "unresolved_tail": (r.origins.iter()).fold(0.0f64, |m, (_, e)| m.max(e.unresolved_tail)),
        "guessed_at_ms": guess_ms.is_finite().then_some(guess_ms),
        "simulated_seconds": params.seconds,
        "rows": rows,
        "recommendation": recommendation,
    })
}

/// The smallest budget of `policy` whose p99 is within `knee_pct` % of the
/// best p99 of the grid, with what it buys.
fn knee(rows: &[Value], policy: &str, knee_pct: f64) -> Value {
    let mine: Vec<&Value> = (rows.iter())
        .filter(|r| r["policy"] == policy && r["p99_known"] == true)
        .collect();
    let best = mine
        .iter()
        .filter_map(|r| r["p99_ms"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let pick = mine
        .iter()
        .filter(|r| {
            r["p99_ms"]
                .as_f64()
                .is_some_and(|p| p <= best * (1.0 + knee_pct / 100.0))
        })
        .min_by(|a, b| {
            let budget = |r: &Value| r["budget_percent"].as_f64().unwrap_or(f64::INFINITY);
            budget(a).total_cmp(&budget(b))
        });
    match pick {
        Some(r) => json!({
            "policy": policy, "budget_percent": r["budget_percent"], "p99_ms": r["p99_ms"],
            "extra_pct": r["extra_pct"], "best_p99_ms": best,
        }),
        None => Value::Null,
    }
}

/// A JSON number as a person writes it (`12`, not `12.0`).
fn number(v: &Value) -> String {
    v.as_f64().map_or("?".to_string(), |x| format!("{x}"))
}

fn text_report(out: &Value) -> String {
    let mut s = format!(
        "hedgehog-edge advisor: {:.1} s window; in force: HEDGE_BUDGET_PERCENT={} with HEDGE_POLICY={} (marked *)\n\n",
        out["window_s"].as_f64().unwrap_or(0.0),
        number(&out["in_force"]["budget_percent"]),
        out["in_force"]["policy"].as_str().unwrap_or("?")
    );
    for r in out["routes"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "route {}: {:.1} requests/s; origins {}\n",
            r["route"].as_str().unwrap_or("?"),
            r["rate_rps"].as_f64().unwrap_or(0.0),
            (r["origins"].as_array().into_iter().flatten())
                .map(|o| format!(
                    "{} ({} legs, p50 {:.1} ms, p99 {:.1} ms, {:.1}% 5xx)",
                    o["origin"].as_str().unwrap_or("?"),
                    o["legs"],
                    o["p50_ms"].as_f64().unwrap_or(f64::NAN),
                    o["p99_ms"].as_f64().unwrap_or(f64::NAN),
                    o["failure_share"].as_f64().unwrap_or(0.0) * 100.0
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        if r["judged"] != true {
            s.push_str(&format!(
                "  not judged: {}\n\n",
                r["why_not"].as_str().unwrap_or("?")
            ));
            continue;
        }
        if let Some(at) = r["guessed_at_ms"].as_f64() {
            s.push_str(&format!(
                "  {:.2}% of legs were cut before any answer as slow: how slow past {at:.0} ms is unknown, so a percentile of requests that slow reads \">=\"\n",
                r["unresolved_tail"].as_f64().unwrap_or(0.0) * 100.0,
            ));
        }
        s.push_str("  | policy | budget % | p50 ms | p99 ms | p99.9 ms | extra % | bound p99 ms at that extra (in force, advice) |\n  |---|---|---|---|---|---|---|\n");
        for row in r["rows"].as_array().into_iter().flatten() {
            let f = |k: &str| {
                row[k]
                    .as_f64()
                    .map_or("-".to_string(), |x| format!("{x:.1}"))
            };
            let known = |k: &str, flag: &str| {
                let at_least = if row[flag] == false { ">= " } else { "" };
                format!("{at_least}{}", f(k))
            };
            s.push_str(&format!(
                "  | {}{} | {} | {} | {} | {} | {} | {} |\n",
                row["policy"].as_str().unwrap_or("?"),
                if row["in_force"] == true { " *" } else { "" },
                number(&row["budget_percent"]),
                f("p50_ms"),
                known("p99_ms", "p99_known"),
                known("p999_ms", "p999_known"),
                f("extra_pct"),
                f("bound_p99_ms"),
            ));
        }
        let k = &r["recommendation"];
        if !k.is_null() {
            s.push_str(&format!(
                "  advice: HEDGE_BUDGET_PERCENT={} ({}) buys p99 {:.1} ms at {:.1}% extra, within {}% of the grid's best p99 ({:.1} ms)\n",
                number(&k["budget_percent"]),
                k["policy"].as_str().unwrap_or("?"),
                k["p99_ms"].as_f64().unwrap_or(f64::NAN),
                k["extra_pct"].as_f64().unwrap_or(f64::NAN),
                out["knee_pct"],
                k["best_p99_ms"].as_f64().unwrap_or(f64::NAN),
            ));
        }
        s.push('\n');
    }
    s.push_str(&format!(
        "{}\n(replayed in {:.1} s)\n",
        out["limits"].as_str().unwrap_or(""),
        out["seconds"].as_f64().unwrap_or(0.0)
    ));
    s
}
