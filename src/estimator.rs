//! Per-isolate latency estimates per (origin, route key), with bounded keys.
//!
//! Every sample is recorded twice: under its route key and under its origin as
//! a whole, so a route without enough data can fall back to its origin's
//! distribution. Route keys are capped: a key idle for a whole window is
//! evicted to make room, and when every slot is busy a new key is simply not
//! tracked on its own (its samples still count for the origin). Under a flood
//! of distinct paths, memory stays at `max_route_keys` windows.

use std::collections::HashMap;

use crate::sketch::Sample;
use crate::window::{WindowParams, WindowedSketch};

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

#[derive(Debug)]
struct RouteEntry {
    window: WindowedSketch,
    last_used_ms: f64,
}

/// Latency distributions per origin and per (origin, route key).
#[derive(Debug)]
pub struct LatencyEstimator {
    params: EstimatorParams,
    routes: HashMap<(usize, String), RouteEntry>,
    origins: HashMap<usize, WindowedSketch>,
}

// === impl LatencyEstimator ===

impl LatencyEstimator {
    /// An estimator with no data.
    pub fn new(params: EstimatorParams) -> Self {
        Self {
            params,
            routes: HashMap::new(),
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
        if let Some(entry) = self.route_entry(origin, route, now_ms) {
            entry.window.record(sample, now_ms);
            entry.last_used_ms = now_ms;
        }
    }

    /// The `q`-quantile for `origin`/`route` and for `origin` as a whole.
    pub fn estimates(&mut self, origin: usize, route: &str, q: f64, now_ms: f64) -> Estimates {
        let route_estimate = self
            .routes
            .get_mut(&(origin, route.to_string()))
            .and_then(|entry| {
                entry.last_used_ms = now_ms;
                estimate(&mut entry.window, q, now_ms)
            });
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

    /// Number of (origin, route key) pairs tracked now.
    pub fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// The entry for a route, created if there is room (evicting a key idle
    /// for a whole window if needed); `None` when the cap is reached.
    fn route_entry(&mut self, origin: usize, route: &str, now_ms: f64) -> Option<&mut RouteEntry> {
        let key = (origin, route.to_string());
        if !self.routes.contains_key(&key) {
            if self.routes.len() >= self.params.max_route_keys && !self.evict_idle(now_ms) {
                return None;
            }
            let window = WindowedSketch::new(self.params.window, now_ms);
            self.routes.insert(
                key.clone(),
                RouteEntry {
                    window,
                    last_used_ms: now_ms,
                },
            );
        }
        self.routes.get_mut(&key)
    }

    /// Evicts the least recently used key if it has been idle for a whole
    /// window (so its data has expired anyway). Returns whether one was evicted.
    fn evict_idle(&mut self, now_ms: f64) -> bool {
        let oldest = self
            .routes
            .iter()
            .min_by(|a, b| a.1.last_used_ms.total_cmp(&b.1.last_used_ms))
            .map(|(key, entry)| (key.clone(), entry.last_used_ms));
        match oldest {
            Some((key, last_used)) if now_ms - last_used >= self.params.window.window_ms => {
                self.routes.remove(&key);
                true
            }
            _ => false,
        }
    }
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
