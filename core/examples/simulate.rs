//! The simulator's command: configurations side by side on one scenario (or
//! all), on a virtual clock, through the Worker's own Hedger.
//!
//! cargo run --release -p hedgehog-core --example simulate -- [--scenario heavy-tail|...|all|cached-tail]
//!   [--rate 200] [--seconds 60] [--warmup 3] [--isolates 1] [--seed 1]
//!   [--poisson] [--worker-overhead-ms 1.5] [--pop] [--pop-rtt-ms 5]
//!   [--routes 1] [--var KEY=VALUE (tunes the default; repeatable)] [--out sim-results]
//!   [--isolate-cpu lab|off|FACTOR (the isolate's event loop and CPU: calibrated
//!    on the lab's machine, none, or the lab's costs times FACTOR)]
//!
//! then `node lab/sim-plot.mjs sim-results` draws the percentile plots.
//!
//! `--static-sweep 50,60,70` (with `--static-budget 100`, a percentage)
//! also runs the default in static mode at each delay (ms) on the same
//! arrivals and draws, and sets each run's p99 beside the hindsight bound
//! replayed from the default's run at that run's own load, and from its
//! own: where they part, the bound follows the run's primaries and queues
//! (docs/lab.md, "What the bound is conditioned on").
//!
//! `--bound-check FILE` compares each scenario's default ÷ hindsight-bound
//! ratios (p99, p99.9) and extra load with the figures FILE holds and exits 1
//! when one is worse beyond its tolerance (the test command runs it);
//! `--bound-write FILE` writes the figures of this run there.

use hedgehog_core::vec_map::VecMap;
use std::time::Instant;

use hedgehog_core::pop::upkeep::SHED_ABOVE_PUSHES_PER_S;
use hedgehog_core::sim::{
    markdown_table, oracle_bound, percentile, run, scenario, summary_table, BoundPoint,
    CacheCounts, Configuration, IsolateCpu, Replay, Row, RunResult, SimParams, SummaryLine, Tape,
    Timeline, SCENARIO_NAMES,
};

fn configurations() -> Vec<Configuration> {
    let c = |name: &str, vars: &[(&str, &str)]| Configuration {
        name: name.to_string(),
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<VecMap<_, _>>(),
    };
    // The baselines run the previous policy (first-in-order primary), so
    // each is what it was before the tail-aware policy; the default is last.
    const PREVIOUS: (&str, &str) = ("HEDGE_POLICY", "fixed-quantile");
    vec![
        c(
            "pass-through (hedging off)",
            &[("HEDGE_MODE", "off"), PREVIOUS],
        ),
        c(
            "1 s timeout + 1 retry",
            &[
                ("HEDGE_MODE", "retry"),
                ("HEDGE_TUNING", r#"{"retry_timeout_ms":1000}"#),
                PREVIOUS,
            ],
        ),
        c(
            "static 10 ms hedge",
            &[
                ("HEDGE_MODE", "static"),
                ("HEDGE_STATIC_DELAY_MS", "10"),
                PREVIOUS,
            ],
        ),
        c("fixed-quantile p95 (previous default)", &[PREVIOUS]),
        c("tail-aware (default)", &[]),
    ]
}

/// Seconds a block of the spell report spans.
const BLOCK_S: usize = 5;

/// Before, during and after a spell (measured seconds `start_s`..`end_s`):
/// 5 s blocks of hedge share, origin 0's share of primaries and p99, and how
/// soon each came back to 80% of its level before the spell.
fn spell_report(runs: &[(String, Timeline)], start_s: usize, end_s: usize) -> String {
    let mut out = format!(
        "\nThe spell covers measured seconds {start_s} to {end_s}. In {BLOCK_S} s blocks: hedged % / origin o0's share of primaries % / p99 ms.\n\n| configuration |"
    );
    let width = runs
        .iter()
        .map(|(_, t)| t.blocks(BLOCK_S).len())
        .max()
        .unwrap_or(0);
    for b in 0..width {
        let from = b * BLOCK_S;
        let mark = if (start_s..end_s).contains(&from) {
            " (spell)"
        } else {
            ""
        };
        out.push_str(&format!(" {from}-{} s{mark} |", from + BLOCK_S));
    }
    out.push_str(" hedging back after | o0's primaries back after |\n|---|");
    out.push_str(&"---|".repeat(width + 2));
    out.push('\n');
    let after = |v: Option<usize>| v.map_or("not in the run".to_string(), |s| format!("{s} s"));
    for (name, timeline) in runs {
        out.push_str(&format!("| {name} |"));
        for b in timeline.blocks(BLOCK_S) {
            out.push_str(&format!(
                " {:.1} / {:.0} / {:.0} |",
                b.hedge_pct, b.primary_pct[0], b.p99
            ));
        }
        let hedging = timeline.back_after(start_s, end_s, BLOCK_S, 0.8, |b| b.hedge_pct);
        let primaries = timeline.back_after(start_s, end_s, BLOCK_S, 0.8, |b| b.primary_pct[0]);
        out.push_str(&format!(" {} | {} |\n", after(hedging), after(primaries)));
    }
    out.push('\n');
    out
}

/// What the cache did under each configuration (the isolates' counts of
/// how they served requests, warm-up included; the rest counted by the
/// simulator).
fn cache_report(runs: &[(String, CacheCounts)]) -> String {
    let mut out = String::from(
        "\nThe cache, whole run (warm-up included): requests by how the isolates served them (their own counters), and what the cache and the origins saw.\n\n\
         | configuration | from an origin | hit | coalesced | stale-while-revalidate | stale-if-error | refreshes | revalidations (304) | stored | fresh after a 304 |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, c) in runs {
        let [origin, stale_if_error, hit, coalesced, swr, refresh] = c.served;
        let (fresh, not) = c.after_renewal;
        out.push_str(&format!(
            "| {name} | {origin} | {hit} | {coalesced} | {swr} | {stale_if_error} | {refresh} | {} ({}) | {} | {fresh} of {} |\n",
            c.revalidations, c.not_modified, c.stores, fresh + not
        ));
    }
    out.push('\n');
    out
}

/// The comma-separated numbers (finite, 0 or more) given to `flag`, none
/// when `list` is (the flag not given). Exits with a message naming what it
/// expects.
fn number_list(list: Option<String>, flag: &str, expected: &str) -> Vec<f64> {
    let Some(list) = list else {
        return Vec::new();
    };
    (list.split(','))
        .map(|x| match x.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => v,
            _ => {
                eprintln!("simulate: {flag} expects {expected}, got {x:?}");
                std::process::exit(2)
            }
        })
        .collect()
}

/// `config` run on `params`; a configuration the Worker refuses ends the
/// command with its errors.
fn run_or_exit(params: &SimParams, config: &Configuration) -> RunResult {
    run(params, config).unwrap_or_else(|errors| {
        for e in errors {
            eprintln!("simulate: {}: {e}", config.name);
        }
        std::process::exit(2)
    })
}

/// `--static-sweep`: the `default` configuration in static mode at each of
/// `delays` (ms, budget `budget_pct`%) on the same arrivals and draws, as a
/// table beside the bound replayed from the default's run (`replay`) and
/// from each run's own, both at the run's own load. Prints how many read
/// below the default's bound.
fn static_sweep(
    params: &SimParams,
    default: &Configuration,
    delays: &[f64],
    budget_pct: &str,
    replay: &mut Replay,
) -> String {
    let mut out = format!(
        "The default in static mode (budget {budget_pct}%), same arrivals and draws; stall hedges, retries and gates stay on, so these are not pure fixed delays:\n\n\
         | delay ms | p99 ms | extra % | bound from the default's run at that load | p99 ÷ it | bound from the run's own |\n|---|---|---|---|---|---|\n",
    );
    let (mut below, mut lowest) = (0, f64::INFINITY);
    for &d in delays {
        let mut config = default.clone();
        config.name = format!("static {d} ms");
        for (k, v) in [
            ("HEDGE_MODE", "static".to_string()),
            ("HEDGE_STATIC_DELAY_MS", d.to_string()),
            ("HEDGE_BUDGET_PERCENT", budget_pct.to_string()),
        ] {
            config.vars.insert(k.to_string(), v);
        }
        let result = run_or_exit(params, &config);
        let legs = (result.hedges + result.third_attempts) as f64 / result.requests.max(1) as f64;
        let p99 = percentile(&mut result.latencies_ms.clone(), 0.99);
        let theirs = replay.bound(legs).map(|b| b.p99.latency_ms);
        let own = Replay::new(params, &result.tape)
            .bound(legs)
            .map(|b| b.p99.latency_ms);
        let ratio = theirs.map(|b| p99 / b);
        if let Some(r) = ratio {
            below += usize::from(r < 1.0);
            lowest = lowest.min(r);
        }
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        out.push_str(&format!(
            "| {d} | {p99:.1} | {:.2} | {} | {} | {} |\n",
            100.0 * legs,
            ms(theirs),
            ratio.map_or("-".to_string(), |r| format!("{r:.3}")),
            ms(own),
        ));
    }
    eprintln!(
        "simulate: {}: {below} of {} static runs below the default's bound at their own load; lowest ratio {lowest:.3}",
        params.scenario.name,
        delays.len()
    );
    out.push('\n');
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| args.iter().any(|a| a == name);
    let value = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| default.to_string())
    };
    let number = |name: &str, default: &str| -> f64 {
        let raw = value(name, default);
        raw.parse().unwrap_or_else(|_| {
            eprintln!("simulate: {name} expects a number, got {raw:?}");
            std::process::exit(2)
        })
    };
    let which = value("--scenario", "heavy-tail");
    let names: Vec<&str> = if which == "all" {
        SCENARIO_NAMES.to_vec()
    } else {
        which.split(',').collect()
    };
    let out = value("--out", "sim-results");
    // `--bound-curve 1,3,5`: the hindsight bound also at these extra loads (%).
    let given = |name: &str| flag(name).then(|| value(name, ""));
    let curve_loads = number_list(
        given("--bound-curve"),
        "--bound-curve",
        "percentages like 1,3,5",
    );
    // `--static-sweep 50,60,70`: static runs at these delays (ms).
    let sweep_delays = number_list(
        given("--static-sweep"),
        "--static-sweep",
        "delays in ms like 50,60,70",
    );
    let sweep_budget = value("--static-budget", "100");
    let mut report = String::new();
    let mut json = Vec::new();
    let started = Instant::now();
    let mut simulated = 0u64;
    let mut summary = Vec::new();
    for name in names {
        let Some(scenario) = scenario(name) else {
            eprintln!(
                "simulate: unknown scenario {name:?}; known: {}, cached-tail",
                SCENARIO_NAMES.join(", ")
            );
            std::process::exit(2);
        };
        let isolate_cpu = match value("--isolate-cpu", "lab").as_str() {
            "off" => None,
            "lab" => Some(IsolateCpu::lab()),
            other => {
                match other.parse::<f64>() {
                    Ok(f) if f > 0.0 && f.is_finite() => Some(IsolateCpu::lab().scaled(f)),
                    _ => {
                        eprintln!("simulate: --isolate-cpu expects lab, off or a factor > 0, got {other:?}");
                        std::process::exit(2);
                    }
                }
            }
        };
        // What workerd adds besides its CPU (the hop to it); with the
        // isolate modelled its CPU is counted step by step instead.
        let overhead_default = if isolate_cpu.is_some() { "0.3" } else { "1.5" };
        let params = SimParams {
            isolate_cpu,
            scenario,
            rate_rps: number("--rate", "200"),
            seconds: number("--seconds", "60"),
            warmup_seconds: number("--warmup", "3"),
            isolates: number("--isolates", "1") as usize,
            poisson: flag("--poisson"),
            seed: number("--seed", "1") as u64,
            worker_overhead_ms: number("--worker-overhead-ms", overhead_default),
            aggregator_rtt_ms: flag("--pop").then(|| number("--pop-rtt-ms", "5")),
            aggregator_capacity_per_s: SHED_ABOVE_PUSHES_PER_S,
            routes: number("--routes", "1") as usize,
        };
        eprintln!(
            "simulate: {name}: {} rps for {} s (+{} s warm-up) over {} isolate(s), seed {}",
            params.rate_rps, params.seconds, params.warmup_seconds, params.isolates, params.seed
        );
        let mut rows = Vec::new();
        let mut spells = Vec::new();
        let mut pass_through = Vec::new();
        let mut default_tape = Tape::default();
        // The default's legs beyond the first, per request (hedges and
        // third attempts): the load the hindsight bound is held to.
        let mut default_legs = 0.0;
        let mut default_config = None;
        let mut cache_counts = Vec::new();
        for mut config in configurations() {
            // `--var KEY=VALUE` (repeatable) tunes the default configuration.
            if config.name.ends_with("(default)") {
                for pair in args.windows(2).filter(|w| w[0] == "--var").map(|w| &w[1]) {
                    let Some((key, val)) = pair.split_once('=') else {
                        eprintln!("simulate: --var expects KEY=VALUE, got {pair:?}");
                        std::process::exit(2);
                    };
                    config.vars.insert(key.to_string(), val.to_string());
                }
            }
            let t = Instant::now();
            let result = run_or_exit(&params, &config);
            simulated += result.simulated;
            eprintln!(
                "simulate:   {}: {} requests in {:.2} s; hedges by cause {:?}; at or above p99 and unhedged {:?}; \
                 isolate busy {:.0}% (mean wait {:.2} ms); skipped: {} isolate-busy, {} not-paying; {} third attempts",
                config.name,
                result.simulated,
                t.elapsed().as_secs_f64(),
                result.hedge_causes,
                result.slow_unhedged,
                result.isolate_busy_share * 100.0,
                result.mean_loop_wait_ms,
                result.isolate_busy_skips,
                result.unpaid_skips,
                result.third_attempts,
            );
            if config.vars.get("HEDGE_MODE").map(String::as_str) == Some("off") {
                pass_through = result.latencies_ms.clone();
            }
            if config.name.ends_with("(default)") {
                default_config = Some(config.clone());
                default_tape = result.tape.clone();
                default_legs = (result.hedges + result.third_attempts) as f64
                    / (result.requests.max(1)) as f64;
            }
            rows.push(Row::from_result(&config.name, &result));
            cache_counts.push((config.name.clone(), result.cache.clone()));
            spells.push((config.name.clone(), result.timeline));
        }
        let default = rows.last().cloned();
        report.push_str(&format!(
            "### {name}: {}\n\n{} rps for {} s per configuration (after {} s warm-up), {} isolate(s){}, seed {}, {} arrivals, {}.\n\n",
            params.scenario.description,
            params.rate_rps,
            params.seconds,
            params.warmup_seconds,
            params.isolates,
            match params.aggregator_rtt_ms {
                Some(rtt) => format!(" with the PoP aggregator {rtt} ms away"),
                None => String::new(),
            },
            params.seed,
            if params.poisson { "Poisson" } else { "evenly spaced" },
            match params.isolate_cpu {
                Some(c) => format!(
                    "each isolate one event loop ({:.2} ms a request, {:.2} ms a further leg: about {:.0} requests/s at full use)",
                    c.admit_ms + c.respond_ms,
                    c.leg_ms + c.abort_ms,
                    c.capacity_rps()
                ),
                None => "isolates that cost nothing".to_string(),
            }
        ));
        report.push_str(&markdown_table(&rows));
        if params.scenario.cache.is_some() {
            // Hits are no races: neither bound replays them.
            report.push_str(&cache_report(&cache_counts));
        }
        if let (Some(d), false, None) = (&default, pass_through.is_empty(), &params.scenario.cache)
        {
            let o = oracle_bound(&pass_through, d.extra_pct / 100.0);
            report.push_str(&format!(
                "\nOracle bound at the default's extra load ({:.1}%, hedge at {:.1} ms): p99 {:.1} ms, p99.9 {:.1} ms.\n",
                d.extra_pct, o.delay_ms, o.p99, o.p999
            ));
            // One replay for the bound and the curve: it is built by
            // replaying every request once, and each bound reads it anew.
            let mut replay = Replay::new(&params, &default_tape);
            let bound = replay.bound(default_legs);
            let mut curve = String::new();
            if !curve_loads.is_empty() {
                // What the best fixed delay would buy at other loads, for
                // the same arrivals and draws: a target judged at another
                // load than the default's (fixed p95's, a cap) reads here.
                let mut line =
                    String::from("Hindsight bound at other extra loads (p99 / p99.9 ms):");
                for pct in &curve_loads {
                    if let Some(b) = replay.bound(pct / 100.0) {
                        line.push_str(&format!(
                            " {pct}%: {:.1} / {:.1};",
                            b.p99.latency_ms, b.p999.latency_ms
                        ));
                    }
                }
                line.pop();
                curve = format!("{line}.\n\n");
            }
            let target = |p: &BoundPoint| {
                if p.to_fastest {
                    ", to the fastest origin"
                } else {
                    ""
                }
            };
            if let Some(b) = bound {
                report.push_str(&format!(
                    "Hindsight bound for the default's own run at its extra load: p99 {:.1} ms (hedge at {:.1} ms with q {:.2}{}), p99.9 {:.1} ms (at {:.1} ms, q {:.2}{}); the default is {:.2} / {:.2} of it.\n\n",
                    b.p99.latency_ms, b.p99.delay_ms, b.p99.q, target(&b.p99),
                    b.p999.latency_ms, b.p999.delay_ms, b.p999.q, target(&b.p999),
                    d.p99 / b.p99.latency_ms, d.p999 / b.p999.latency_ms,
                ));
            }
            report.push_str(&curve);
            if let (false, Some(config)) = (sweep_delays.is_empty(), &default_config) {
                report.push_str(&static_sweep(
                    &params,
                    config,
                    &sweep_delays,
                    &sweep_budget,
                    &mut replay,
                ));
            }
            let named = |part: &str| rows.iter().find(|r| r.name.contains(part)).cloned();
            if let (Some(pass_through), Some(fixed), Some(bound)) =
                (named("hedging off"), named("fixed-quantile"), bound)
            {
                summary.push(SummaryLine {
                    scenario: name.to_string(),
                    pass_through,
                    fixed,
                    default: d.clone(),
                    oracle: o,
                    bound,
                });
            }
        }
        if let Some(episode) = params
            .scenario
            .origins
            .iter()
            .find_map(|o| o.episode.as_ref())
        {
            let start_s = (episode.from_ms / 1000.0 - params.warmup_seconds).max(0.0) as usize;
            let end_s = (episode.until_ms / 1000.0 - params.warmup_seconds).max(0.0) as usize;
            report.push_str(&spell_report(&spells, start_s, end_s));
        }
        json.push(serde_json::json!({
            "scenario": name,
            "rate_rps": params.rate_rps,
            "seconds": params.seconds,
            "isolates": params.isolates,
            "seed": params.seed,
            "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
            "bound": summary.last().filter(|l: &&SummaryLine| l.scenario == name).map(|l| serde_json::json!({
                "extra_pct": l.bound.extra_pct,
                "p99_ms": l.bound.p99.latency_ms, "p99_delay_ms": l.bound.p99.delay_ms, "p99_q": l.bound.p99.q,
                "p99_fastest_origin": l.bound.p99.to_fastest,
                "p999_ms": l.bound.p999.latency_ms, "p999_delay_ms": l.bound.p999.delay_ms, "p999_q": l.bound.p999.q,
                "p999_fastest_origin": l.bound.p999.to_fastest,
            })),
        }));
    }
    if summary.len() > 1 {
        // Deterministic for a seed (no timings): docs/lab.md keeps it and
        // scripts/docs-figures.py checks that it is still what the code gives.
        report.push_str(&format!("### Summary\n\n{}\n", summary_table(&summary)));
    }
    let secs = started.elapsed().as_secs_f64();
    report.push_str(&format!(
        "{simulated} simulated requests in {secs:.1} s ({:.0} per second).\n",
        simulated as f64 / secs
    ));
    println!("{report}");
    // The arguments that give the figures (where they go left out).
    let mut run_args = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        if a.starts_with("--bound") || a.starts_with("--static") || a == "--out" {
            rest.next();
        } else {
            run_args.push(a.as_str());
        }
    }
    let run_args = run_args.join(" ");
    if let Some(file) = args
        .windows(2)
        .find(|w| w[0] == "--bound-write")
        .map(|w| &w[1])
    {
        let text = bound_figures(&summary, &run_args);
        if let Err(e) = std::fs::write(file, text) {
            eprintln!("simulate: cannot write {file}: {e}");
            std::process::exit(2);
        }
        eprintln!("simulate: bound figures written to {file}");
    }
    if std::fs::create_dir_all(&out).is_ok() {
        let md = std::fs::write(format!("{out}/sim-report.md"), &report);
        let js = std::fs::write(
            format!("{out}/sim-report.json"),
            serde_json::to_string_pretty(&json).unwrap_or_default(),
        );
        if md.and(js).is_ok() {
            eprintln!("simulate: report in {out}/sim-report.md and sim-report.json");
        }
    }
    if let Some(file) = args
        .windows(2)
        .find(|w| w[0] == "--bound-check")
        .map(|w| &w[1])
    {
        std::process::exit(bound_check(&summary, &run_args, file));
    }
}

/// How much worse a committed ratio may get before the check fails: 3% on
/// the default's p99 and p99.9 over the bound's, 1 point of extra load.
const RATIO_TOLERANCE: f64 = 0.03;
const EXTRA_TOLERANCE_POINTS: f64 = 1.0;

/// The figures `--bound-check` compares, as the file holds them.
fn bound_figures(summary: &[SummaryLine], run_args: &str) -> String {
    let scenarios: serde_json::Map<String, serde_json::Value> = summary
        .iter()
        .map(|l| {
            let round = |x: f64| (x * 1000.0).round() / 1000.0;
            (
                l.scenario.clone(),
                serde_json::json!({
                    "p99_to_bound": round(l.p99_to_bound()),
                    "p999_to_bound": round(l.p999_to_bound()),
                    "extra_pct": round(l.default.extra_pct),
                }),
            )
        })
        .collect();
    let doc = serde_json::json!({
        "what": "the default's p99 and p99.9 over the hindsight bound's, and its extra load, per scenario; \
                 written by the simulate example with --bound-write, compared by the test command with --bound-check",
        "args": run_args,
        "tolerance": { "ratio": RATIO_TOLERANCE, "extra_points": EXTRA_TOLERANCE_POINTS },
        "scenarios": scenarios,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}

/// Compares this run with the committed figures in `file`: 0 when no
/// scenario got worse beyond the tolerance, 1 when one did, 2 when the
/// file cannot be read or was written by other arguments.
fn bound_check(summary: &[SummaryLine], run_args: &str, file: &str) -> i32 {
    let committed: serde_json::Value = match std::fs::read_to_string(file)
        .map_err(|e| e.to_string())
        .and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => {
            eprintln!("simulate: --bound-check {file}: {e}");
            return 2;
        }
    };
    if committed["args"].as_str() != Some(run_args) {
        eprintln!(
            "simulate: --bound-check {file} holds figures of `{}`, this run is `{run_args}`",
            committed["args"]
        );
        return 2;
    }
    let mut worse = Vec::new();
    let mut better = Vec::new();
    for l in summary {
        let c = &committed["scenarios"][&l.scenario];
        let fresh = [
            ("p99 ÷ bound", l.p99_to_bound(), c["p99_to_bound"].as_f64()),
            (
                "p99.9 ÷ bound",
                l.p999_to_bound(),
                c["p999_to_bound"].as_f64(),
            ),
        ];
        for (what, now, was) in fresh {
            let Some(was) = was else {
                worse.push(format!("{}: {what} {now:.3}, none committed", l.scenario));
                continue;
            };
            if now > was * (1.0 + RATIO_TOLERANCE) {
                worse.push(format!(
                    "{}: {what} {now:.3}, committed {was:.3}",
                    l.scenario
                ));
            } else if now < was * (1.0 - RATIO_TOLERANCE) {
                better.push(format!(
                    "{}: {what} {now:.3}, committed {was:.3}",
                    l.scenario
                ));
            }
        }
        let was = c["extra_pct"].as_f64().unwrap_or(0.0);
        if l.default.extra_pct > was + EXTRA_TOLERANCE_POINTS {
            worse.push(format!(
                "{}: extra load {:.1}%, committed {was:.1}%",
                l.scenario, l.default.extra_pct
            ));
        }
    }
    for b in &better {
        eprintln!("simulate: better than committed (update with --bound-write): {b}");
    }
    if worse.is_empty() {
        eprintln!(
            "simulate: bound check passed: {} scenarios within {:.0}% of {file}",
            summary.len(),
            RATIO_TOLERANCE * 100.0
        );
        return 0;
    }
    for w in &worse {
        eprintln!("simulate: WORSE than committed: {w}");
    }
    1
}
