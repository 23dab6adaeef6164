//! Per-isolate latency estimates per (origin, route key), with bounded keys.
//!
//! Every sample is recorded twice: under its route key and under its origin as
//! a whole, so a route without enough data can fall back to its origin's
//! distribution. Route keys are capped: a key idle for a whole window is
//! evicted to make room, and when every slot is busy a new key is simply not
//! tracked on its own (its samples still count for the origin). Under a flood
//! of distinct paths, memory stays at `max_route_keys` windows.

use std::collections::HashMap;

use crate::capped_map::CappedMap;

use crate::estimation::sketch::{LatencySketch, Sample};
use crate::estimation::window::{each_snapshot, WindowParams, WindowedSketch};

/// Settings for a [`LatencyEstimator`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EstimatorParams {
    /// The sliding window every estimate covers.
    pub window: WindowParams,
    /// Most (origin, route key) pairs tracked at once.
    pub max_route_keys: usize,
}

/// A quantile and how many samples it rests on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QuantileEstimate {
    /// The quantile, in milliseconds.
    pub value_ms: f64,
    /// Samples (completed and censored) inside the window.
    pub samples: u64,
}

/// The estimates available for one request: its route's and its origin's.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimates {
    /// From samples of this origin and route key.
    pub route: Option<QuantileEstimate>,
    /// From all samples of this origin.
    pub origin: Option<QuantileEstimate>,
    /// The PoP-wide estimate for this origin and route key, when fresh.
    pub pop: Option<QuantileEstimate>,
}

/// Latency distributions per origin and per (origin, route key).
#[derive(Debug)]
pub struct LatencyEstimator {
    params: EstimatorParams,
    routes: CappedMap<(usize, String), WindowedSketch>,
    origins: HashMap<usize, WindowedSketch>,
}

// === impl LatencyEstimator ===

impl LatencyEstimator {
    /// An estimator with no data.
    pub fn new(params: EstimatorParams) -> Self {
        Self {
            params,
            // A key idle for a whole window holds no data any more.
            routes: CappedMap::new(params.max_route_keys, params.window.window_ms),
            origins: HashMap::new(),
        }
    }

    /// Records a sample for `origin` (an index into the configured origins) and `route`.
    pub fn record(&mut self, origin: usize, route: &str, sample: Sample, now_ms: f64) {
        let window = self.params.window;
        self.origins
            .entry(origin)
            .or_insert_with(|| WindowedSketch::new(window, now_ms))
            .record(sample, now_ms);
        if let Some(window) =
            self.routes
                .get_or_insert_with((origin, route.to_string()), now_ms, || {
                    WindowedSketch::new(window, now_ms)
                })
        {
            window.record(sample, now_ms);
        }
    }

    /// The `q`-quantile for `origin`/`route` and for `origin` as a whole.
    pub fn estimates(&mut self, origin: usize, route: &str, q: f64, now_ms: f64) -> Estimates {
        let route_estimate = self
            .routes
            .get_mut(&(origin, route.to_string()), now_ms)
            .and_then(|window| estimate(window, q, now_ms));
        let origin_estimate = self
            .origins
            .get_mut(&origin)
            .and_then(|window| estimate(window, q, now_ms));
        Estimates {
            route: route_estimate,
            origin: origin_estimate,
            pop: None,
        }
    }

    /// The samples inside the window for `origin` on `route` when the route
    /// has at least `route_min`, else the origin's over all its routes when
    /// it has at least `min_samples` (as the quantile falls back), with the
    /// newest part that holds `min_samples` on its own. `None` without
    /// enough of either. No side effects on the key's idle time.
    pub fn samples(
        &mut self,
        origin: usize,
        route: &str,
        route_min: u64,
        min_samples: u64,
        now_ms: f64,
    ) -> Option<Samples> {
        let key = (origin, route.to_string());
        let route_has_enough = (self.routes.get_mut(&key, f64::NEG_INFINITY))
            .is_some_and(|w| w.count(now_ms) >= route_min.max(min_samples));
        let window = if route_has_enough {
            self.routes.get_mut(&key, f64::NEG_INFINITY)?
        } else {
            let w = self.origins.get_mut(&origin)?;
            if w.count(now_ms) < min_samples {
                return None;
            }
            w
        };
        Some(Samples {
            whole: window.snapshot(now_ms).clone(),
            recent: window.recent(min_samples, now_ms),
        })
    }

    /// Calls `each` with every (origin, route key) that has samples inside
    /// the window at `now_ms`, and them, in no particular order (for the
    /// stats page; no side effects on the keys' idle time).
    pub fn each_route_sketch(
        &mut self,
        now_ms: f64,
        mut each: impl FnMut(usize, &str, &LatencySketch),
    ) {
        each_snapshot(&mut self.routes, now_ms, |(origin, route), sketch| {
            each(*origin, route, sketch)
        });
    }

    /// Every (origin, route key) with samples inside the window at
    /// `now_ms`, in no particular order: the keys a delay is reported for.
    pub fn route_keys(&mut self, now_ms: f64) -> Vec<(usize, String)> {
        let mut keys = Vec::new();
        self.each_route_sketch(now_ms, |origin, route, _| {
            keys.push((origin, route.to_string()))
        });
        keys
    }

    /// Number of (origin, route key) pairs tracked now.
    pub fn route_count(&self) -> usize {
        self.routes.len()
    }
}

/// A window's samples, and its newest part when that differs from the whole.
#[derive(Debug, Clone)]
pub struct Samples {
    /// Every sample inside the window.
    pub whole: LatencySketch,
    /// The newest sub-windows holding enough samples on their own.
    pub recent: Option<LatencySketch>,
}

fn estimate(window: &mut WindowedSketch, q: f64, now_ms: f64) -> Option<QuantileEstimate> {
    let value_ms = window.quantile(q, now_ms)?;
    Some(QuantileEstimate {
        value_ms,
        samples: window.count(now_ms),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn estimator(max_route_keys: usize) -> LatencyEstimator {
        LatencyEstimator::new(EstimatorParams {
            window: WindowParams {
                window_ms: 60_000.0,
                sub_windows: 6,
            },
            max_route_keys,
        })
    }

    #[test]
    fn samples_count_for_route_and_origin() {
        let mut est = estimator(8);
        for _ in 0..10 {
            est.record(0, "/a", Sample::Completed(10.0), 0.0);
            est.record(0, "/b", Sample::Completed(100.0), 0.0);
        }
        let a = est.estimates(0, "/a", 0.5, 1.0);
        assert_eq!(a.route.map(|e| e.samples), Some(10));
        assert_eq!(a.origin.map(|e| e.samples), Some(20));
        let unknown = est.estimates(1, "/a", 0.5, 1.0);
        assert_eq!(unknown, Estimates::default());
    }

    #[test]
    fn route_keys_are_capped_and_the_origin_still_counts() {
        let mut est = estimator(4);
        for i in 0..100_000 {
            est.record(0, &format!("/p{i}"), Sample::Completed(10.0), 1.0);
        }
        assert_eq!(est.route_count(), 4);
        let e = est.estimates(0, "/p99999", 0.5, 2.0);
        assert_eq!(e.route, None);
        assert_eq!(e.origin.map(|o| o.samples), Some(100_000));
    }

    #[test]
    fn idle_keys_are_evicted_for_new_ones() {
        let mut est = estimator(1);
        est.record(0, "/old", Sample::Completed(10.0), 0.0);
        est.record(0, "/new", Sample::Completed(10.0), 30_000.0);
        assert!(est.estimates(0, "/new", 0.5, 30_000.0).route.is_none());
        est.record(0, "/new", Sample::Completed(10.0), 61_000.0);
        assert!(est.estimates(0, "/new", 0.5, 61_000.0).route.is_some());
        assert!(est.estimates(0, "/old", 0.5, 61_000.0).route.is_none());
        assert_eq!(est.route_count(), 1);
    }
}
