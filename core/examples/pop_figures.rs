//! Figures for the PoP aggregate, computed natively:
//! the sketch's measured relative error after merging (two halves merged vs
//! the exact quantiles of the whole), push sizes for typical deltas, and the
//! pushes one isolate makes per minute at fixed rates under the default
//! schedule.
//!
//!     cargo run --release --example pop_figures

use hedgehog_core::config;
use hedgehog_core::estimation::sketch::{LatencySketch, Sample, RELATIVE_ERROR};
use hedgehog_core::pop::aggregate::PopAggregate;
use hedgehog_core::pop::link::PopLink;
use hedgehog_core::pop::push::{KeyQuantile, PushReply, PUSH_VERSION};
use hedgehog_core::sim::Rng;

/// A named latency distribution to draw from.
type Distribution = (&'static str, Box<dyn Fn(&mut Rng) -> f64>);

fn distributions() -> Vec<Distribution> {
    vec![
        (
            "uniform 1-100 ms",
            Box::new(|r: &mut Rng| 1.0 + 99.0 * r.uniform()),
        ),
        (
            "lognormal median 40 ms, sigma 0.6",
            Box::new(|r: &mut Rng| 40.0 * (0.6 * r.normal()).exp()),
        ),
        (
            "heavy tail: 95% lognormal 40 ms, 5% 300-900 ms",
            Box::new(|r: &mut Rng| {
                if r.uniform() < 0.95 {
                    40.0 * (0.3 * r.normal()).exp()
                } else {
                    300.0 + 600.0 * r.uniform()
                }
            }),
        ),
    ]
}

fn exact(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

fn main() {
    println!(
        "## Sketch relative error after merging two halves (100,000 samples each distribution)"
    );
    println!("stated bound: {:.2}%", RELATIVE_ERROR * 100.0);
    let quantiles = [0.5, 0.9, 0.95, 0.99, 0.999];
    for (name, draw) in distributions() {
        let mut rng = Rng::from_state(42);
        let values: Vec<f64> = (0..100_000).map(|_| draw(&mut rng)).collect();
        let (first, second) = values.split_at(values.len() / 2);
        let mut a = LatencySketch::new();
        let mut b = LatencySketch::new();
        first.iter().for_each(|&v| a.record(Sample::Completed(v)));
        second.iter().for_each(|&v| b.record(Sample::Completed(v)));
        a.merge(&b);
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let mut worst: f64 = 0.0;
        let mut cells = Vec::new();
        for q in quantiles {
            let got = a.quantile(q).unwrap_or(f64::NAN);
            let want = exact(&sorted, q);
            let err = (got - want).abs() / want;
            worst = worst.max(err);
            cells.push(format!("p{}: {:.3}%", q * 100.0, err * 100.0));
        }
        println!("{name}: max {:.3}% ({})", worst * 100.0, cells.join(", "));
    }

    println!();
    println!(
        "## Push size (one key per route, default schedule: a push every 5 s or 1,000 requests)"
    );
    for (rate, routes) in [(100.0, 1usize), (100.0, 4), (1_000.0, 4)] {
        let per_push = (rate * 5.0_f64).min(1_000.0) as usize;
        let mut link = PopLink::new(config::defaults().pop.link);
        let mut rng = Rng::from_state(7);
        let names = vec!["primary".to_string(), "secondary".to_string()];
        for i in 0..per_push {
            let route = format!("/route{}", i % routes);
            link.note_request(0, &route, true);
            let heavy = &distributions()[2].1;
            link.record_sample(0, &route, Sample::Completed(heavy(&mut rng)));
            link.record_response(0, false);
        }
        let push = link.take_push(0.0, 0.95, &names);
        println!(
            "{rate} rps, {routes} route key(s): {} samples per push, {} bytes",
            per_push,
            push.encode().len()
        );
    }

    println!();
    println!("## Pushes per isolate per minute (every push answered at once)");
    for rate in [10.0, 100.0, 1_000.0, 5_000.0] {
        let mut link = PopLink::new(config::defaults().pop.link);
        let names = vec!["primary".to_string()];
        let reply = PushReply {
            version: PUSH_VERSION,
            keys: vec![KeyQuantile {
                origin: "primary".into(),
                route: "/r".into(),
                value_ms: Some(50.0),
                samples: 1_000,
            }],
            hedge_fraction: 0.05,
            eligible: 1_000,
            origins: vec![],
            probes: Vec::new(),
            route_budgets: Vec::new(),
        };
        let mut pushes = 0;
        let requests = (rate * 60.0) as u64;
        for i in 0..requests {
            let now = i as f64 * 1_000.0 / rate;
            link.note_request(0, "/r", true);
            if link.push_due(now) {
                link.take_push(now, 0.95, &names);
                link.push_succeeded(&reply, 300, now, &names);
                pushes += 1;
            }
        }
        println!("{rate} rps: {pushes} pushes in 60 s");
    }

    println!();
    println!("## Aggregator state for 2,048 keys (the default bound)");
    let mut pop = PopAggregate::new(config::defaults().pop.aggregate);
    let mut rng = Rng::from_state(9);
    let mut bytes = 0;
    for k in 0..2_048 {
        let mut sketch = LatencySketch::new();
        let heavy = &distributions()[2].1;
        for _ in 0..500 {
            sketch.record(Sample::Completed(heavy(&mut rng)));
        }
        let push = hedgehog_core::pop::push::Push {
            version: PUSH_VERSION,
            quantile: 0.95,
            eligible: 500,
            hedges: 25,
            keys: vec![hedgehog_core::pop::push::KeyDelta::new(
                "primary",
                &format!("/r{k}"),
                &sketch,
            )],
            origins: vec![],
            metrics: None,
            route_delays: Vec::new(),
            errors: Vec::new(),
            route_budgets: Vec::new(),
            worker_version: String::new(),
        };
        let (_, touched) = pop.apply(&push, 0, 1_000.0);
        for key in touched {
            bytes += pop.export_key(&key, 1_000.0).map_or(0, |r| r.len());
        }
    }
    println!(
        "{} keys held; stored records {} bytes in all ({} bytes per key, 500 samples each)",
        pop.key_count(),
        bytes,
        bytes / pop.key_count().max(1)
    );
}
