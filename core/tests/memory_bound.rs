//! Per-isolate state stays bounded under a flood of distinct paths: every
//! structure a request can add to is fed 100,000 distinct paths (each its own
//! route key) and must stay at its configured bound.
//!
//!     cargo test --test memory_bound -- --nocapture    (prints the bounds)

use hedgehog_core::vec_map::VecMap;

use hedgehog_core::cache::policy::CacheRoutes;
use hedgehog_core::config;
use hedgehog_core::estimation::estimator::LatencyEstimator;
use hedgehog_core::estimation::sketch::Sample;
use hedgehog_core::pop::link::PopLink;
use hedgehog_core::request::coalesce::{Coalescer, Role};
use hedgehog_core::request::route_key::route_key;

const PATHS: usize = 100_000;

#[test]
fn state_stays_bounded_under_100k_distinct_paths() {
    let mut vars = VecMap::new();
    vars.insert(
        "HEDGE_ORIGINS".to_string(),
        r#"[{"name":"a","url":"http://127.0.0.1:1"}]"#.to_string(),
    );
    // Every path its own route key: the worst case for the tables.
    vars.insert(
        "HEDGE_TUNING".to_string(),
        r#"{"route_segments":3}"#.to_string(),
    );
    let params = config::parse(&vars).expect("valid config");
    let mut estimator = LatencyEstimator::new(params.estimator);
    let mut coalescer = Coalescer::new(params.coalesce);
    let mut cache_routes = CacheRoutes::new(64);
    let mut pop = PopLink::new(params.pop.link);

    let mut routes = std::collections::HashSet::new();
    for i in 0..PATHS {
        // Requests keep arriving over ten minutes; none is ever idle long enough
        // to be the reason a key goes.
        let now = i as f64 * 6.0;
        let path = format!("/flood/{i}/item");
        let route = route_key(&path, &params.route_keys);
        routes.insert(route.clone());
        estimator.record(0, &route, Sample::Completed(20.0), now);
        if let Role::Leader(id) = coalescer.join(&format!("https://edge.test{path}"), now) {
            // Half the leaders never report back (their request was cancelled).
            if i % 2 == 0 {
                coalescer.stored(&format!("https://edge.test{path}"), id);
            }
        }
        cache_routes.learn(&route);
        pop.note_request(0, &route, true);
        pop.record_sample(0, &route, Sample::Completed(20.0));
    }
    assert_eq!(routes.len(), PATHS, "every path is its own route key");

    let (delta_keys, answers) = pop.key_counts();
    println!("after {PATHS} distinct paths:");
    println!(
        "  latency windows (route keys): {} (bound HEDGE_MAX_ROUTE_KEYS = {})",
        estimator.route_count(),
        params.estimator.max_route_keys
    );
    println!(
        "  coalescing flights: {} (bound HEDGE_COALESCE_MAX_KEYS = {})",
        coalescer.len(),
        params.coalesce.max_flights
    );
    println!(
        "  cacheable routes: {} (bound {})",
        cache_routes.known_count(),
        hedgehog_core::cache::policy::MAX_CACHEABLE_ROUTES
    );
    println!(
        "  PoP delta keys: {delta_keys}, PoP answers: {answers} (bound {})",
        hedgehog_core::pop::push::MAX_PUSH_KEYS
    );
    assert!(estimator.route_count() <= params.estimator.max_route_keys);
    assert!(coalescer.len() <= params.coalesce.max_flights);
    assert!(cache_routes.known_count() <= hedgehog_core::cache::policy::MAX_CACHEABLE_ROUTES);
    assert!(delta_keys <= hedgehog_core::pop::push::MAX_PUSH_KEYS);
    assert!(answers <= hedgehog_core::pop::push::MAX_PUSH_KEYS);
}
