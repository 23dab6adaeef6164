//! Property tests (proptest) for the sketch, the hedge budget, configuration
//! parsing and the PoP push format.

use hedgehog_core::vec_map::VecMap;

use hedgehog_core::admission::budget::{BudgetParams, HedgeBudget};
use hedgehog_core::config;
use hedgehog_core::estimation::sketch::{LatencySketch, Sample, RELATIVE_ERROR};
use hedgehog_core::pop::push::{KeyDelta, Push, PUSH_VERSION};
use proptest::prelude::*;

fn exact(sorted: &[f64], q: f64) -> f64 {
    let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
    sorted[rank - 1]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn sketch_quantiles_are_within_the_stated_relative_error(
        values in prop::collection::vec(0.05f64..600_000.0, 1..2_000),
        q in prop::sample::select(vec![0.5, 0.9, 0.95, 0.99, 0.999]),
    ) {
        let mut sketch = LatencySketch::new();
        for &v in &values {
            sketch.record(Sample::Completed(v));
        }
        let mut sorted = values.clone();
        sorted.sort_by(f64::total_cmp);
        let want = exact(&sorted, q);
        let got = sketch.quantile(q).expect("non-empty");
        prop_assert!((got - want).abs() / want <= RELATIVE_ERROR + 1e-9, "q {} got {} want {}", q, got, want);
    }

    #[test]
    fn merged_sketches_equal_the_sketch_of_all_samples(
        a in prop::collection::vec(0.05f64..60_000.0, 0..500),
        b in prop::collection::vec(0.05f64..60_000.0, 0..500),
        censored in prop::collection::vec(0.05f64..60_000.0, 0..50),
    ) {
        let mut left = LatencySketch::new();
        let mut right = LatencySketch::new();
        let mut whole = LatencySketch::new();
        for &v in &a { left.record(Sample::Completed(v)); whole.record(Sample::Completed(v)); }
        for &v in &b { right.record(Sample::Completed(v)); whole.record(Sample::Completed(v)); }
        for &v in &censored { right.record(Sample::Censored(v)); whole.record(Sample::Censored(v)); }
        left.merge(&right);
        prop_assert_eq!(&left, &whole);
        // And through the push format, as an isolate's delta travels.
        let decoded = Push::decode(&Push {
            version: PUSH_VERSION,
            quantile: 0.95,
            eligible: 0,
            hedges: 0,
            keys: vec![KeyDelta::new("a", "/r", &whole)],
            origins: vec![],
            metrics: None,
            route_delays: Vec::new(),
            errors: Vec::new(),
            route_budgets: Vec::new(),
            worker_version: String::new(),
        }.encode()).expect("valid push");
        prop_assert_eq!(decoded.keys[0].sketch(), whole);
    }

    #[test]
    fn budget_never_allows_more_than_its_bound(
        percent in 0.0f64..50.0,
        floor_per_sec in 0.0f64..5.0,
        max_tokens in 1.0f64..20.0,
        events in prop::collection::vec((0.0f64..500.0, any::<bool>()), 1..2_000),
    ) {
        let params = BudgetParams { percent, floor_per_sec, max_tokens };
        let mut budget = HedgeBudget::new(params, 0.0);
        let (mut now, mut deposits, mut hedges) = (0.0, 0u64, 0u64);
        for (gap_ms, is_deposit) in events {
            now += gap_ms;
            if is_deposit {
                budget.deposit(now);
                deposits += 1;
            } else if budget.try_withdraw(now) {
                hedges += 1;
            }
        }
        // A new bucket is empty: nothing but deposits and the floor pays.
        let bound = deposits as f64 * percent / 100.0 + now / 1000.0 * floor_per_sec;
        prop_assert!(hedges as f64 <= bound + 1e-6, "{} hedges > bound {}", hedges, bound);
    }

    #[test]
    fn config_parsing_never_panics_and_reports_every_bad_key(
        entries in prop::collection::btree_map(
            prop::sample::select(vec![
                "HEDGE_ORIGINS", "HEDGE_MODE", "HEDGE_TUNING", "HEDGE_BUDGET_PERCENT",
                "HEDGE_ROUTES", "HEDGE_METHODS", "HEDGE_TIMEOUT_MS", "HEDGE_STATS_TOKEN",
                "HEDGE_LOG_LEVEL", "HEDGE_POP_MAX_KEYS", "HEDGE_UNKNOWN_KEY",
            ]),
            ".{0,40}",
            0..8,
        ),
    ) {
        let vars: VecMap<String, String> = entries.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
        match config::parse(&vars) {
            Ok(params) => prop_assert!(!params.origins.is_empty()),
            Err(errors) => {
                prop_assert!(!errors.is_empty());
                if vars.contains_key("HEDGE_UNKNOWN_KEY") {
                    prop_assert!(errors.iter().any(|e| e.key == "HEDGE_UNKNOWN_KEY"));
                }
            }
        }
    }

    #[test]
    fn push_decoding_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = Push::decode(&bytes);
    }

    #[test]
    fn push_decoding_never_panics_on_mutated_valid_pushes(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
    ) {
        let mut sketch = LatencySketch::new();
        for v in [1.0, 10.0, 100.0, 1_000.0] {
            sketch.record(Sample::Completed(v));
        }
        let mut bytes = Push {
            version: PUSH_VERSION,
            quantile: 0.95,
            eligible: 10,
            hedges: 1,
            keys: vec![KeyDelta::new("a", "/r", &sketch)],
            origins: vec![],
            metrics: None,
            route_delays: Vec::new(),
            errors: Vec::new(),
            route_budgets: Vec::new(),
            worker_version: String::new(),
        }.encode();
        for (index, byte) in flips {
            let i = index.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = Push::decode(&bytes);
    }
}
