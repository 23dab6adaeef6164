//! Sliding windows made of rotating sub-windows: [`SlidingWindow`] is the one
//! building block (any slot type that adds and subtracts), and
//! [`WindowedSketch`] is a latency sketch over it.
//!
//! The window is split into `sub_windows` slots of `window_ms / sub_windows`
//! each. Additions go into the slot of the current time; when time moves past a
//! slot's span, that slot is emptied and reused. A running total of the live
//! slots answers queries in one pass, so a query costs the same however many
//! sub-windows there are.
//!
//! A sketch's quantiles are cached: one is recomputed only after the window has
//! changed by more than 1/64 of its samples (or a slot expired), so under load
//! the per-request cost is a comparison, and the answer lags the exact one by
//! at most ~1.5% of the samples, far inside the sampling noise of a tail
//! quantile.

use std::hash::Hash;

use crate::capped_map::CappedMap;
use crate::estimation::sketch::{LatencySketch, Sample};

/// Settings for a sliding window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowParams {
    /// Length of the whole window in milliseconds.
    pub window_ms: f64,
    /// Number of rotating sub-windows the window is split into (at least 1).
    pub sub_windows: usize,
}

impl WindowParams {
    /// Length of one sub-window in milliseconds.
    pub fn slot_ms(&self) -> f64 {
        self.window_ms / self.sub_windows.max(1) as f64
    }

    /// The sub-window number `now_ms` falls in (0 for a clock that is not a
    /// number or a zero-length window).
    pub fn epoch(&self, now_ms: f64) -> i64 {
        let slot_ms = self.slot_ms();
        if !now_ms.is_finite() || slot_ms <= 0.0 {
            return 0;
        }
        (now_ms / slot_ms).floor() as i64
    }
}

/// What a sub-window holds: something that adds up and can be taken back out.
pub trait WindowSlot: Default + Clone {
    /// Adds another slot's contents.
    fn add(&mut self, other: &Self);
    /// Takes out contents added before (an expired slot, from the total).
    fn subtract(&mut self, other: &Self);
    /// Whether the slot holds nothing.
    fn is_empty(&self) -> bool;
}

impl WindowSlot for LatencySketch {
    fn add(&mut self, other: &Self) {
        self.merge(other);
    }
    fn subtract(&mut self, other: &Self) {
        LatencySketch::subtract(self, other);
    }
    fn is_empty(&self) -> bool {
        self.count() == 0
    }
}

/// Counts over the last `window_ms` milliseconds.
#[derive(Debug, Clone)]
pub struct SlidingWindow<S> {
    params: WindowParams,
    slots: Vec<S>,
    /// The epoch that `slots[epoch % len]` currently holds.
    current_epoch: i64,
    total: S,
}

// === impl SlidingWindow ===

impl<S: WindowSlot> SlidingWindow<S> {
    /// An empty window that starts at `now_ms`.
    pub fn new(params: WindowParams, now_ms: f64) -> Self {
        Self {
            params,
            slots: vec![S::default(); params.sub_windows.max(1)],
            current_epoch: params.epoch(now_ms),
            total: S::default(),
        }
    }

    /// Applies `change` to the current sub-window and to the total (both
    /// must see the same change, or expiry would subtract what was never
    /// added). Returns whether a non-empty sub-window expired first.
    pub fn update(&mut self, now_ms: f64, change: impl Fn(&mut S)) -> bool {
        let expired = self.rotate(now_ms);
        let slot = self.slot_index(self.current_epoch);
        change(&mut self.slots[slot]);
        change(&mut self.total);
        expired
    }

    /// Everything inside the window at `now_ms`.
    pub fn total(&mut self, now_ms: f64) -> &S {
        self.rotate(now_ms);
        &self.total
    }

    /// Everything inside the window as of the last update (no rotation).
    pub fn total_as_of_last_update(&self) -> &S {
        &self.total
    }

    /// The live sub-windows as (epoch, slot), oldest first, empty ones left
    /// out: what storage needs to rebuild the window with [`Self::from_slots`].
    pub fn slots(&mut self, now_ms: f64) -> Vec<(i64, &S)> {
        self.rotate(now_ms);
        self.slots_as_of_last_update()
    }

    /// The newest sub-windows added up until `enough` says so, as of the
    /// last update; `None` when that takes every live sub-window (nothing
    /// newer to tell apart from the whole) or never is enough.
    pub fn recent(&self, enough: impl Fn(&S) -> bool) -> Option<S> {
        let slots = self.slots_as_of_last_update();
        let mut sum = S::default();
        for (taken, (_, slot)) in slots.iter().rev().enumerate() {
            sum.add(slot);
            if enough(&sum) {
                return (taken + 1 < slots.len()).then_some(sum);
            }
        }
        None
    }

    /// The sub-windows as of the last update (no rotation): (epoch, slot),
    /// oldest first, empty ones left out.
    pub fn slots_as_of_last_update(&self) -> Vec<(i64, &S)> {
        let len = self.slots.len() as i64;
        (0..len)
            .rev()
            .map(|k| self.current_epoch - k)
            .map(|e| (e, &self.slots[e.rem_euclid(len) as usize]))
            .filter(|(_, slot)| !slot.is_empty())
            .collect()
    }

    /// A window rebuilt from stored sub-windows; those already outside the
    /// window at `now_ms`, or from the future, are dropped.
    pub fn from_slots(
        params: WindowParams,
        now_ms: f64,
        slots: impl IntoIterator<Item = (i64, S)>,
    ) -> Self {
        let mut window = Self::new(params, now_ms);
        let len = window.slots.len() as i64;
        for (e, slot) in slots {
            if e > window.current_epoch || e <= window.current_epoch - len {
                continue;
            }
            let index = window.slot_index(e);
            window.total.add(&slot);
            window.slots[index].add(&slot);
        }
        window
    }

    /// Drops the slots that time has moved past; returns whether a non-empty
    /// one was dropped. A clock that goes backwards (it can, across isolates'
    /// clocks) leaves the window as it is.
    fn rotate(&mut self, now_ms: f64) -> bool {
        let now_epoch = self.params.epoch(now_ms);
        if now_epoch <= self.current_epoch {
            return false;
        }
        let mut dropped = false;
        let expired = (now_epoch - self.current_epoch).min(self.slots.len() as i64);
        for step in 1..=expired {
            let slot = self.slot_index(self.current_epoch + step);
            let old = std::mem::take(&mut self.slots[slot]);
            if !old.is_empty() {
                self.total.subtract(&old);
                dropped = true;
            }
        }
        self.current_epoch = now_epoch;
        dropped
    }

    fn slot_index(&self, epoch: i64) -> usize {
        epoch.rem_euclid(self.slots.len() as i64) as usize
    }
}

/// A latency sketch over the last `window_ms` milliseconds.
#[derive(Debug, Clone)]
pub struct WindowedSketch {
    window: SlidingWindow<LatencySketch>,
    /// The last quantile computed: (q, answer).
    cached: Option<(f64, Option<f64>)>,
    /// Samples recorded since `cached` was computed.
    changes_since_cache: u64,
}

// === impl WindowedSketch ===

impl WindowedSketch {
    /// An empty window that starts at `now_ms`.
    pub fn new(params: WindowParams, now_ms: f64) -> Self {
        Self::over(SlidingWindow::new(params, now_ms))
    }

    fn over(window: SlidingWindow<LatencySketch>) -> Self {
        Self {
            window,
            cached: None,
            changes_since_cache: 0,
        }
    }

    /// Records a sample taken at `now_ms`.
    pub fn record(&mut self, sample: Sample, now_ms: f64) {
        if self.window.update(now_ms, |sketch| sketch.record(sample)) {
            self.cached = None;
        }
        self.changes_since_cache += 1;
    }

    /// Adds a whole sketch of samples taken at `now_ms` (a delta from elsewhere).
    pub fn merge(&mut self, delta: &LatencySketch, now_ms: f64) {
        if self.window.update(now_ms, |sketch| sketch.merge(delta)) {
            self.cached = None;
        }
        self.changes_since_cache += delta.count();
    }

    /// The live sub-windows as (epoch, sketch), oldest first, empty ones left
    /// out: what storage needs to rebuild the window with [`Self::from_slots`].
    pub fn slots(&mut self, now_ms: f64) -> Vec<(i64, &LatencySketch)> {
        self.expire(now_ms);
        self.window.slots_as_of_last_update()
    }

    /// A window rebuilt from stored sub-windows; those already outside the
    /// window at `now_ms`, or from the future, are dropped.
    pub fn from_slots(
        params: WindowParams,
        now_ms: f64,
        slots: impl IntoIterator<Item = (i64, LatencySketch)>,
    ) -> Self {
        Self::over(SlidingWindow::from_slots(params, now_ms, slots))
    }

    /// The `q`-quantile of the samples inside the window at `now_ms` (cached; see the module docs).
    pub fn quantile(&mut self, q: f64, now_ms: f64) -> Option<f64> {
        self.expire(now_ms);
        let total = self.window.total_as_of_last_update();
        let tolerance = (total.count() / 64).max(1);
        if let Some((cached_q, answer)) = self.cached {
            if cached_q == q && self.changes_since_cache < tolerance {
                return answer;
            }
        }
        let answer = total.quantile(q);
        self.cached = Some((q, answer));
        self.changes_since_cache = 0;
        answer
    }

    /// The sketch of every sample still inside the window at `now_ms`.
    pub fn snapshot(&mut self, now_ms: f64) -> &LatencySketch {
        self.expire(now_ms);
        self.window.total_as_of_last_update()
    }

    /// The newest sub-windows that together hold at least `min_samples`,
    /// merged; `None` when that takes the whole window (nothing newer to
    /// tell apart from it).
    pub fn recent(&mut self, min_samples: u64, now_ms: f64) -> Option<LatencySketch> {
        self.expire(now_ms);
        self.window.recent(|s| s.count() >= min_samples)
    }

    /// Number of samples still inside the window at `now_ms`.
    pub fn count(&mut self, now_ms: f64) -> u64 {
        self.snapshot(now_ms).count()
    }

    /// Moves the window to `now_ms`; a dropped sub-window invalidates the cache.
    fn expire(&mut self, now_ms: f64) {
        if self.window.rotate(now_ms) {
            self.cached = None;
        }
    }
}

/// Calls `each` with every window of `windows` that holds samples at
/// `now_ms`, and its key: the stats pages' read of an estimator or an
/// aggregator (the keys' idle times are left alone).
pub fn each_snapshot<K: Hash + Eq + Clone>(
    windows: &mut CappedMap<K, WindowedSketch>,
    now_ms: f64,
    mut each: impl FnMut(&K, &LatencySketch),
) {
    let keys: Vec<K> = windows.iter().map(|(k, _)| k.clone()).collect();
    for key in keys {
        if let Some(window) = windows.get_mut(&key, f64::NEG_INFINITY) {
            let sketch = window.snapshot(now_ms);
            if sketch.count() > 0 {
                each(&key, sketch);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: WindowParams = WindowParams {
        window_ms: 60_000.0,
        sub_windows: 6,
    };

    #[test]
    fn stored_slots_rebuild_the_same_window_and_expired_ones_are_dropped() {
        let mut window = WindowedSketch::new(PARAMS, 0.0);
        window.record(Sample::Completed(10.0), 1_000.0);
        window.record(Sample::Completed(20.0), 25_000.0);
        window.record(Sample::Censored(30.0), 55_000.0);
        let stored: Vec<(i64, LatencySketch)> = window
            .slots(55_000.0)
            .into_iter()
            .map(|(e, s)| (e, s.clone()))
            .collect();
        assert_eq!(stored.len(), 3);
        let mut rebuilt = WindowedSketch::from_slots(PARAMS, 55_000.0, stored.clone());
        assert_eq!(rebuilt.count(55_000.0), 3);
        assert_eq!(
            rebuilt.quantile(0.5, 55_000.0),
            window.quantile(0.5, 55_000.0)
        );
        // Rebuilt later, the first sub-window has left the window.
        let mut later = WindowedSketch::from_slots(PARAMS, 65_000.0, stored);
        assert_eq!(later.count(65_000.0), 2);
    }

    #[test]
    fn merging_a_delta_counts_like_recording_its_samples() {
        let mut delta = LatencySketch::new();
        let mut recorded = WindowedSketch::new(PARAMS, 0.0);
        for v in 1..=100 {
            delta.record(Sample::Completed(f64::from(v)));
            recorded.record(Sample::Completed(f64::from(v)), 5_000.0);
        }
        let mut merged = WindowedSketch::new(PARAMS, 0.0);
        merged.merge(&delta, 5_000.0);
        assert_eq!(merged.count(5_000.0), 100);
        assert_eq!(
            merged.quantile(0.95, 5_000.0),
            recorded.quantile(0.95, 5_000.0)
        );
        assert_eq!(merged.count(70_000.0), 0);
    }

    #[test]
    fn samples_stay_for_the_window_then_expire() {
        let mut window = WindowedSketch::new(PARAMS, 0.0);
        window.record(Sample::Completed(10.0), 1_000.0);
        assert_eq!(window.count(50_000.0), 1);
        // The slot holding t=1s covers [0, 10s); it is reused at t=60s.
        assert_eq!(window.count(59_999.0), 1);
        assert_eq!(window.count(60_000.0), 0);
    }

    #[test]
    fn rotation_drops_only_the_oldest_slots() {
        let mut window = WindowedSketch::new(PARAMS, 0.0);
        window.record(Sample::Completed(10.0), 5_000.0);
        window.record(Sample::Completed(20.0), 25_000.0);
        window.record(Sample::Completed(30.0), 45_000.0);
        assert_eq!(window.count(45_000.0), 3);
        assert_eq!(window.count(65_000.0), 2);
        assert_eq!(window.count(85_000.0), 1);
        let p50 = window.snapshot(85_000.0).quantile(0.5).expect("one sample");
        assert!((p50 - 30.0).abs() / 30.0 <= 0.01);
    }

    #[test]
    fn recent_takes_the_newest_sub_windows_with_enough_samples() {
        let mut w = WindowedSketch::new(PARAMS, 0.0);
        // 100 samples at 10 ms in each of the first three 10 s sub-windows,
        // then 100 at 50 ms in the fourth.
        for slot in 0..4 {
            let value = if slot == 3 { 50.0 } else { 10.0 };
            for i in 0..100 {
                w.record(
                    Sample::Completed(value),
                    f64::from(slot) * 10_000.0 + f64::from(i),
                );
            }
        }
        let now = 35_000.0;
        let newest = w.recent(100, now).expect("the newest sub-window has 100");
        assert_eq!(newest.count(), 100);
        assert!(newest.quantile(0.5).is_some_and(|m| m > 45.0));
        let two = w.recent(150, now).expect("two sub-windows");
        assert_eq!(two.count(), 200);
        // All four are needed for 400: that is the whole window, no "recent".
        assert!(w.recent(400, now).is_none());
        assert!(w.recent(1_000, now).is_none());
    }

    #[test]
    fn a_long_idle_gap_empties_the_window() {
        let mut window = WindowedSketch::new(PARAMS, 0.0);
        for i in 0..100 {
            window.record(Sample::Completed(10.0), i as f64 * 500.0);
        }
        assert_eq!(window.count(10_000_000.0), 0);
        window.record(Sample::Completed(10.0), 10_000_001.0);
        assert_eq!(window.count(10_000_001.0), 1);
    }

    #[test]
    fn cached_quantiles_follow_the_data() {
        let mut window = WindowedSketch::new(PARAMS, 0.0);
        for _ in 0..100 {
            window.record(Sample::Completed(10.0), 1.0);
        }
        let p50 = window.quantile(0.5, 1.0).expect("data");
        assert!((p50 - 10.0).abs() < 0.2);
        // One more sample is within the 1/64 tolerance: the cached answer stands.
        window.record(Sample::Completed(500.0), 2.0);
        assert_eq!(window.quantile(0.5, 2.0), Some(p50));
        // Enough new samples force a recomputation.
        for _ in 0..200 {
            window.record(Sample::Completed(500.0), 3.0);
        }
        let moved = window.quantile(0.5, 3.0).expect("data");
        assert!((moved - 500.0).abs() < 10.0, "{moved}");
        // A different quantile is never answered from the cache.
        assert!(window.quantile(0.1, 3.0).expect("data") < 20.0);
    }

    #[test]
    fn cached_quantiles_expire_with_the_window() {
        let mut window = WindowedSketch::new(PARAMS, 0.0);
        window.record(Sample::Completed(10.0), 1.0);
        assert!(window.quantile(0.5, 1.0).is_some());
        assert_eq!(window.quantile(0.5, 120_000.0), None);
    }

    #[test]
    fn a_clock_going_backwards_loses_nothing() {
        let mut window = WindowedSketch::new(PARAMS, 30_000.0);
        window.record(Sample::Completed(10.0), 30_000.0);
        window.record(Sample::Completed(10.0), 29_000.0);
        assert_eq!(window.count(20_000.0), 2);
    }
}
