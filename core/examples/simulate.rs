//! The simulator's command: configurations side by side on one scenario (or
//! all), on a virtual clock, through the Worker's own Hedger.
//!
//! cargo run --release -p hedgehog-core --example simulate -- [--scenario heavy-tail|...|all]
//!   [--rate 200] [--seconds 60] [--warmup 3] [--isolates 1] [--seed 1]
//!   [--poisson] [--worker-overhead-ms 1.5] [--pop] [--pop-rtt-ms 5]
//!   [--routes 1] [--var KEY=VALUE (tunes the default; repeatable)] [--out sim-results]
//!
//! then `node lab/sim-plot.mjs sim-results` draws the percentile plots.

use std::collections::BTreeMap;
use std::time::Instant;

use hedgehog_core::sim::{
    markdown_table, oracle_bound, run, scenario, Configuration, Row, SimParams, SCENARIO_NAMES,
};

fn configurations() -> Vec<Configuration> {
    let c = |name: &str, vars: &[(&str, &str)]| Configuration {
        name: name.to_string(),
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
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
                ("HEDGE_RETRY_TIMEOUT_MS", "1000"),
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
    let mut report = String::new();
    let mut json = Vec::new();
    let started = Instant::now();
    let mut simulated = 0u64;
    for name in names {
        let Some(scenario) = scenario(name) else {
            eprintln!(
                "simulate: unknown scenario {name:?}; known: {}",
                SCENARIO_NAMES.join(", ")
            );
            std::process::exit(2);
        };
        let params = SimParams {
            scenario,
            rate_rps: number("--rate", "200"),
            seconds: number("--seconds", "60"),
            warmup_seconds: number("--warmup", "3"),
            isolates: number("--isolates", "1") as usize,
            poisson: flag("--poisson"),
            seed: number("--seed", "1") as u64,
            worker_overhead_ms: number("--worker-overhead-ms", "1.5"),
            aggregator_rtt_ms: flag("--pop").then(|| number("--pop-rtt-ms", "5")),
            routes: number("--routes", "1") as usize,
        };
        eprintln!(
            "simulate: {name}: {} rps for {} s (+{} s warm-up) over {} isolate(s), seed {}",
            params.rate_rps, params.seconds, params.warmup_seconds, params.isolates, params.seed
        );
        let mut rows = Vec::new();
        let mut pass_through = Vec::new();
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
            let result = match run(&params, &config) {
                Ok(r) => r,
                Err(errors) => {
                    for e in errors {
                        eprintln!("simulate: {}: {e}", config.name);
                    }
                    std::process::exit(2);
                }
            };
            simulated += result.simulated;
            eprintln!(
                "simulate:   {}: {} requests in {:.2} s; hedges by cause {:?}; at or above p99 and unhedged {:?}",
                config.name,
                result.simulated,
                t.elapsed().as_secs_f64(),
                result.hedge_causes,
                result.slow_unhedged
            );
            if config.vars.get("HEDGE_MODE").map(String::as_str) == Some("off") {
                pass_through = result.latencies_ms.clone();
            }
            rows.push(Row::from_result(&config.name, &result));
        }
        let default = rows.last().cloned();
        report.push_str(&format!(
            "### {name}: {}\n\n{} rps for {} s per configuration (after {} s warm-up), {} isolate(s){}, seed {}, {} arrivals.\n\n",
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
            if params.poisson { "Poisson" } else { "evenly spaced" }
        ));
        report.push_str(&markdown_table(&rows));
        if let (Some(d), false) = (&default, pass_through.is_empty()) {
            let o = oracle_bound(&pass_through, d.extra_pct / 100.0);
            report.push_str(&format!(
                "\nOracle bound at the default's extra load ({:.1}%, hedge at {:.1} ms): p99 {:.1} ms, p99.9 {:.1} ms.\n\n",
                d.extra_pct, o.delay_ms, o.p99, o.p999
            ));
        }
        json.push(serde_json::json!({
            "scenario": name,
            "rate_rps": params.rate_rps,
            "seconds": params.seconds,
            "isolates": params.isolates,
            "seed": params.seed,
            "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
        }));
    }
    let secs = started.elapsed().as_secs_f64();
    report.push_str(&format!(
        "{simulated} simulated requests in {secs:.1} s ({:.0} per second).\n",
        simulated as f64 / secs
    ));
    println!("{report}");
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
}
