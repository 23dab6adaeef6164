//! A PoP of 1,000 isolates in the simulator, every scenario, at 18 and at 100
//! rps per isolate: the default with the PoP aggregator against the same
//! isolates each alone (one isolate's view at that rate, 1,000 times) and
//! against pass-through, with the aggregator's measured capacity modelled;
//! then a PoP past that capacity.
//!
//!     cargo run --release -p hedgehog-core --example pop_scale -- [--seconds 20] [--isolates 1000] [--scenario NAME]

use hedgehog_core::vec_map::VecMap;
use std::time::Instant;

use hedgehog_core::pop::upkeep::SHED_ABOVE_PUSHES_PER_S;
use hedgehog_core::sim::{
    run, scenario, Configuration, IsolateCpu, RunResult, SimParams, SCENARIO_NAMES,
};

fn config(name: &str, vars: &[(&str, &str)]) -> Configuration {
    Configuration {
        name: name.into(),
        vars: vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<VecMap<_, _>>(),
    }
}

fn p99(r: &RunResult) -> f64 {
    let mut l = r.latencies_ms.clone();
    hedgehog_core::sim::percentile(&mut l, 0.99)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let seconds: f64 = value("--seconds", "20").parse().unwrap_or(20.0);
    let isolates: usize = value("--isolates", "1000").parse().unwrap_or(1000);
    let only = value("--scenario", "all");
    let names: Vec<&str> = SCENARIO_NAMES
        .iter()
        .copied()
        .filter(|n| only == "all" || *n == only)
        .collect();
    let off = config("pass-through", &[("HEDGE_MODE", "off")]);
    let default = config("default", &[]);
    let params = |name: &str, per_isolate: f64, pop: bool, capacity: f64| SimParams {
        scenario: scenario(name).expect("a known scenario"),
        rate_rps: per_isolate * isolates as f64,
        seconds,
        warmup_seconds: 3.0,
        isolates,
        poisson: false,
        seed: 1,
        worker_overhead_ms: 0.3,
        aggregator_rtt_ms: pop.then_some(5.0),
        aggregator_capacity_per_s: capacity,
        routes: 1,
        isolate_cpu: Some(IsolateCpu::lab()),
    };
    for per_isolate in [18.0, 100.0] {
        println!(
            "\n### {isolates} isolates at {per_isolate} rps each ({} rps), {seconds} s measured\n",
            per_isolate * isolates as f64
        );
        println!("| scenario | pass-through p99 ms | each alone: default p99 ms (/ pass-through) | PoP: default p99 ms (/ pass-through) | PoP / alone | PoP hedges per request | pushes/s | shed | wall s |");
        println!("|---|---|---|---|---|---|---|---|---|");
        for name in &names {
            let started = Instant::now();
            let base = run(
                &params(name, per_isolate, false, SHED_ABOVE_PUSHES_PER_S),
                &off,
            )
            .expect("runs");
            let alone = run(
                &params(name, per_isolate, false, SHED_ABOVE_PUSHES_PER_S),
                &default,
            )
            .expect("runs");
            let pop = run(
                &params(name, per_isolate, true, SHED_ABOVE_PUSHES_PER_S),
                &default,
            )
            .expect("runs");
            let (b, a, p) = (p99(&base), p99(&alone), p99(&pop));
            println!(
                "| {name} | {b:.1} | {a:.1} ({:.3}) | {p:.1} ({:.3}) | {:.3} | {:.1}% | {:.0} | {} | {:.1} |",
                a / b,
                p / b,
                (p / b) / (a / b),
                100.0 * pop.hedges as f64 / pop.requests as f64,
                pop.pushes as f64 / (seconds + 3.0),
                pop.pushes_shed,
                started.elapsed().as_secs_f64()
            );
        }
    }
    // Past capacity: the same PoP with an aggregator that takes a quarter of
    // the pushes its isolates send.
    println!("\n### Past the aggregator's capacity: heavy-tail, {isolates} isolates at 18 rps\n");
    println!("| aggregator takes (pushes/s) | default p99 ms | hedges per request | pushes taken/s | shed/s |");
    println!("|---|---|---|---|---|");
    for capacity in [SHED_ABOVE_PUSHES_PER_S, 50.0, 10.0] {
        let r = run(&params("heavy-tail", 18.0, true, capacity), &default).expect("runs");
        let t = seconds + 3.0;
        println!(
            "| {capacity:.0} | {:.1} | {:.1}% | {:.0} | {:.0} |",
            p99(&r),
            100.0 * r.hedges as f64 / r.requests as f64,
            r.pushes as f64 / t,
            r.pushes_shed as f64 / t
        );
    }
}
