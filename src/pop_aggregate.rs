//! The PoP aggregator's state: every isolate's pushes merged into windowed
//! latency sketches per (origin, route key), the PoP-wide hedge fraction and
//! per-origin 5xx rates. Plain Rust; the Durable Object around it
//! (`edge::pop_object`) only stores records and answers requests.
//!
//! Bounded: at most `max_keys` keys; a key no push has named for `idle_ms`
//! is forgotten (by [`PopAggregate::sweep`], run from the object's alarm, or
//! when room is needed). A full table leaves new keys untracked (their
//! replies carry no PoP quantile) rather than evicting live ones.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::pop_push::{
    KeyDelta, KeyQuantile, OriginRate, Push, PushError, PushReply, SparseBucket, PUSH_VERSION,
};
use crate::sketch::{BucketCounts, LatencySketch};
use crate::window::{WindowParams, WindowedSketch};

/// Aggregator limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PopParams {
    /// The window the PoP quantiles and rates cover.
    pub window: WindowParams,
    /// Most (origin, route key) sketches held.
    pub max_keys: usize,
    /// A key no push names for this long is forgotten.
    pub idle_ms: f64,
}

impl Default for PopParams {
    fn default() -> Self {
        Self {
            window: WindowParams {
                window_ms: 60_000.0,
                sub_windows: 6,
            },
            max_keys: 2_048,
            idle_ms: 600_000.0,
        }
    }
}

/// (origin name, route key).
pub type PopKey = (String, String);

#[derive(Debug)]
struct KeyState {
    window: WindowedSketch,
    last_used_ms: f64,
}

/// Two counters over a sliding window of sub-windows.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct WindowedPair {
    /// epoch -> (a, b)
    slots: BTreeMap<i64, (u64, u64)>,
}

impl WindowedPair {
    fn add(&mut self, params: WindowParams, now_ms: f64, a: u64, b: u64) {
        let slot = self.slots.entry(epoch(params, now_ms)).or_default();
        slot.0 = slot.0.saturating_add(a);
        slot.1 = slot.1.saturating_add(b);
        self.expire(params, now_ms);
    }

    fn totals(&mut self, params: WindowParams, now_ms: f64) -> (u64, u64) {
        self.expire(params, now_ms);
        self.slots
            .values()
            .fold((0, 0), |(a, b), &(x, y)| (a + x, b + y))
    }

    fn expire(&mut self, params: WindowParams, now_ms: f64) {
        let oldest_live = epoch(params, now_ms) - params.sub_windows.max(1) as i64 + 1;
        self.slots.retain(|&e, _| e >= oldest_live);
    }
}

fn epoch(params: WindowParams, now_ms: f64) -> i64 {
    let slot_ms = params.slot_ms();
    if !now_ms.is_finite() || slot_ms <= 0.0 {
        return 0;
    }
    (now_ms / slot_ms).floor() as i64
}

#[derive(Debug, Serialize, Deserialize)]
struct KeyRecord {
    last_used_ms: f64,
    /// (epoch, [index, completed, censored]...)
    slots: Vec<(i64, Vec<SparseBucket>)>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct CountersRecord {
    /// eligible, hedges
    hedges: WindowedPair,
    /// origin -> (responses, 5xx)
    origins: BTreeMap<String, WindowedPair>,
    pushes: u64,
    push_bytes: u64,
}

/// Everything one PoP aggregator knows.
#[derive(Debug)]
pub struct PopAggregate {
    params: PopParams,
    keys: HashMap<PopKey, KeyState>,
    counters: CountersRecord,
}

// === impl PopAggregate ===

impl PopAggregate {
    /// Empty state.
    pub fn new(params: PopParams) -> Self {
        Self {
            params,
            keys: HashMap::new(),
            counters: CountersRecord::default(),
        }
    }

    /// Keys held.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Samples inside the window, over every key.
    pub fn sample_count(&mut self, now_ms: f64) -> u64 {
        self.keys
            .values_mut()
            .map(|state| state.window.count(now_ms))
            .sum()
    }

    /// Pushes applied since the state began (it survives restarts).
    pub fn pushes(&self) -> u64 {
        self.counters.pushes
    }

    /// Bytes of the pushes applied.
    pub fn push_bytes(&self) -> u64 {
        self.counters.push_bytes
    }

    /// Merges a decoded push of `bytes` bytes received at `now_ms`, and
    /// answers it. Returns the keys whose state changed (to be stored).
    pub fn apply(&mut self, push: &Push, bytes: usize, now_ms: f64) -> (PushReply, Vec<PopKey>) {
        let window = self.params.window;
        self.counters.pushes += 1;
        self.counters.push_bytes += bytes as u64;
        self.counters
            .hedges
            .add(window, now_ms, push.eligible, push.hedges);
        for origin in &push.origins {
            self.counters
                .origins
                .entry(origin.origin.clone())
                .or_default()
                .add(window, now_ms, origin.responses, origin.errors_5xx);
        }
        let mut touched = Vec::new();
        let mut keys = Vec::with_capacity(push.keys.len());
        for delta in &push.keys {
            let key = (delta.origin.clone(), delta.route.clone());
            let answer = match self.key_state(&key, now_ms) {
                Some(state) => {
                    state.last_used_ms = now_ms;
                    if !delta.buckets.is_empty() {
                        state.window.merge(&delta.sketch(), now_ms);
                    }
                    let samples = state.window.count(now_ms);
                    let value_ms = state.window.quantile(push.quantile, now_ms);
                    touched.push(key);
                    (value_ms, samples)
                }
                None => (None, 0),
            };
            keys.push(KeyQuantile {
                origin: delta.origin.clone(),
                route: delta.route.clone(),
                value_ms: answer.0,
                samples: answer.1,
            });
        }
        let reply = PushReply {
            version: PUSH_VERSION,
            keys,
            hedge_fraction: self.hedge_fraction(now_ms),
            eligible: self.counters.hedges.totals(window, now_ms).0,
            origins: self.origin_rates(now_ms),
        };
        (reply, touched)
    }

    /// Hedges per eligible request over the window (0 without traffic).
    pub fn hedge_fraction(&mut self, now_ms: f64) -> f64 {
        let (eligible, hedges) = self.counters.hedges.totals(self.params.window, now_ms);
        if eligible == 0 {
            0.0
        } else {
            hedges as f64 / eligible as f64
        }
    }

    /// Responses and 5xx rate per origin over the window.
    pub fn origin_rates(&mut self, now_ms: f64) -> Vec<OriginRate> {
        let window = self.params.window;
        self.counters
            .origins
            .iter_mut()
            .map(|(name, pair)| {
                let (responses, errors) = pair.totals(window, now_ms);
                OriginRate {
                    origin: name.clone(),
                    responses,
                    rate_5xx: if responses == 0 {
                        0.0
                    } else {
                        errors as f64 / responses as f64
                    },
                }
            })
            .collect()
    }

    /// The key's state, created if there is room (after forgetting idle keys).
    fn key_state(&mut self, key: &PopKey, now_ms: f64) -> Option<&mut KeyState> {
        if !self.keys.contains_key(key) {
            if self.keys.len() >= self.params.max_keys {
                self.sweep(now_ms);
            }
            if self.keys.len() >= self.params.max_keys {
                return None;
            }
            let window = WindowedSketch::new(self.params.window, now_ms);
            self.keys.insert(
                key.clone(),
                KeyState {
                    window,
                    last_used_ms: now_ms,
                },
            );
        }
        self.keys.get_mut(key)
    }

    /// Forgets keys idle for `idle_ms` and origins with nothing in the
    /// window; returns the forgotten keys (to delete from storage).
    pub fn sweep(&mut self, now_ms: f64) -> Vec<PopKey> {
        let idle_ms = self.params.idle_ms;
        let forgotten: Vec<PopKey> = self
            .keys
            .iter()
            .filter(|(_, state)| now_ms - state.last_used_ms >= idle_ms)
            .map(|(key, _)| key.clone())
            .collect();
        for key in &forgotten {
            self.keys.remove(key);
        }
        let window = self.params.window;
        self.counters.origins.retain(|_, pair| {
            pair.expire(window, now_ms);
            !pair.slots.is_empty()
        });
        self.counters.hedges.expire(window, now_ms);
        forgotten
    }

    /// The stored form of one key's state.
    pub fn export_key(&mut self, key: &PopKey, now_ms: f64) -> Option<String> {
        let state = self.keys.get_mut(key)?;
        let record = KeyRecord {
            last_used_ms: state.last_used_ms,
            slots: state
                .window
                .slots(now_ms)
                .into_iter()
                .map(|(e, sketch)| (e, KeyDelta::new("", "", sketch).buckets))
                .collect(),
        };
        serde_json::to_string(&record).ok()
    }

    /// Restores one key from its stored form (at start-up).
    pub fn import_key(&mut self, key: PopKey, record: &str, now_ms: f64) -> Result<(), PushError> {
        let record: KeyRecord = serde_json::from_str(record)
            .map_err(|e| PushError(format!("stored key {}{}: {e}", key.0, key.1)))?;
        let slots = record.slots.into_iter().map(|(e, buckets)| {
            let mut sketch = LatencySketch::new();
            for (index, completed, censored) in buckets {
                sketch.add_counts(
                    index,
                    BucketCounts {
                        completed,
                        censored,
                    },
                );
            }
            (e, sketch)
        });
        let window = WindowedSketch::from_slots(self.params.window, now_ms, slots);
        self.keys.insert(
            key,
            KeyState {
                window,
                last_used_ms: record.last_used_ms,
            },
        );
        Ok(())
    }

    /// The stored form of the counters.
    pub fn export_counters(&self) -> String {
        serde_json::to_string(&self.counters).unwrap_or_default()
    }

    /// Restores the counters (at start-up).
    pub fn import_counters(&mut self, record: &str) -> Result<(), PushError> {
        self.counters =
            serde_json::from_str(record).map_err(|e| PushError(format!("stored counters: {e}")))?;
        Ok(())
    }

    /// The PoP quantile of one key, without a push (for stats).
    pub fn quantile(&mut self, key: &PopKey, q: f64, now_ms: f64) -> Option<f64> {
        self.keys.get_mut(key)?.window.quantile(q, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pop_push::OriginDelta;
    use crate::sketch::{Sample, RELATIVE_ERROR};

    fn params() -> PopParams {
        PopParams {
            window: WindowParams {
                window_ms: 60_000.0,
                sub_windows: 6,
            },
            max_keys: 2,
            idle_ms: 120_000.0,
        }
    }

    fn push_of(route: &str, values: impl IntoIterator<Item = f64>) -> Push {
        let mut sketch = LatencySketch::new();
        for v in values {
            sketch.record(Sample::Completed(v));
        }
        Push {
            version: PUSH_VERSION,
            quantile: 0.95,
            eligible: 100,
            hedges: 10,
            keys: vec![KeyDelta::new("a", route, &sketch)],
            origins: vec![OriginDelta {
                origin: "a".into(),
                responses: 100,
                errors_5xx: 3,
            }],
        }
    }

    /// A deterministic heavy-tailed sample: mostly 20-60 ms, 5% up to 900 ms.
    fn latencies(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                if u < 0.95 {
                    20.0 + 40.0 * u
                } else {
                    100.0 + 16_000.0 * (u - 0.95)
                }
            })
            .collect()
    }

    fn exact_quantile(values: &[f64], q: f64) -> f64 {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let rank = ((q * sorted.len() as f64).ceil() as usize).max(1);
        sorted[rank - 1]
    }

    #[test]
    fn merging_two_halves_gives_the_quantiles_of_the_whole() {
        let all = latencies(20_000, 7);
        let (first, second) = all.split_at(all.len() / 2);
        let mut pop = PopAggregate::new(params());
        pop.apply(&push_of("/r", first.iter().copied()), 0, 1_000.0);
        let (reply, _) = pop.apply(&push_of("/r", second.iter().copied()), 0, 2_000.0);
        assert_eq!(reply.keys[0].samples, 20_000);
        for q in [0.5, 0.9, 0.95, 0.99, 0.999] {
            let got = pop
                .quantile(&("a".into(), "/r".into()), q, 2_000.0)
                .unwrap();
            let exact = exact_quantile(&all, q);
            let error = (got - exact).abs() / exact;
            assert!(error <= RELATIVE_ERROR, "q {q}: {got} vs {exact} ({error})");
        }
    }

    #[test]
    fn reply_carries_hedge_fraction_and_origin_5xx_rate() {
        let mut pop = PopAggregate::new(params());
        let (reply, touched) = pop.apply(&push_of("/r", [10.0]), 250, 0.0);
        assert_eq!(reply.hedge_fraction, 0.1);
        assert_eq!(reply.origins[0].rate_5xx, 0.03);
        assert_eq!(touched, vec![("a".to_string(), "/r".to_string())]);
        assert_eq!((pop.pushes(), pop.push_bytes()), (1, 250));
    }

    #[test]
    fn window_rotation_drops_old_pushes() {
        let mut pop = PopAggregate::new(params());
        pop.apply(&push_of("/r", [10.0; 10]), 0, 0.0);
        let (reply, _) = pop.apply(&push_of("/r", []), 0, 30_000.0);
        assert_eq!(reply.keys[0].samples, 10);
        let (reply, _) = pop.apply(&push_of("/r", []), 0, 61_000.0);
        assert_eq!(reply.keys[0].samples, 0);
        assert_eq!(reply.keys[0].value_ms, None);
        // The 0.0 push's counters have left the window too; 30 s and 61 s remain.
        assert_eq!(reply.eligible, 200);
    }

    #[test]
    fn idle_keys_are_evicted_and_a_full_table_leaves_new_keys_untracked() {
        let mut pop = PopAggregate::new(params());
        pop.apply(&push_of("/a", [10.0]), 0, 0.0);
        pop.apply(&push_of("/b", [10.0]), 0, 100_000.0);
        let (reply, touched) = pop.apply(&push_of("/c", [10.0]), 0, 110_000.0);
        assert_eq!(reply.keys[0].value_ms, None, "table full, nothing idle");
        assert!(touched.is_empty());
        assert_eq!(
            pop.sweep(120_000.0),
            vec![("a".to_string(), "/a".to_string())]
        );
        let (reply, _) = pop.apply(&push_of("/c", [10.0]), 0, 121_000.0);
        assert!(reply.keys[0].value_ms.is_some());
        assert_eq!(pop.key_count(), 2);
    }

    #[test]
    fn state_survives_export_and_import() {
        let mut pop = PopAggregate::new(params());
        pop.apply(&push_of("/r", latencies(1_000, 3)), 100, 5_000.0);
        let key = ("a".to_string(), "/r".to_string());
        let stored_key = pop.export_key(&key, 5_000.0).unwrap();
        let stored_counters = pop.export_counters();
        let mut restarted = PopAggregate::new(params());
        restarted
            .import_key(key.clone(), &stored_key, 6_000.0)
            .unwrap();
        restarted.import_counters(&stored_counters).unwrap();
        assert_eq!(
            restarted.quantile(&key, 0.95, 6_000.0),
            pop.quantile(&key, 0.95, 6_000.0)
        );
        assert_eq!(restarted.hedge_fraction(6_000.0), 0.1);
        assert_eq!(restarted.pushes(), 1);
        assert!(restarted.import_key(key, "{not json", 0.0).is_err());
    }
}
