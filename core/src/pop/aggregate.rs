//! The PoP aggregator's state: every isolate's pushes merged into windowed
//! latency sketches per (origin, route key), the PoP-wide hedge fraction and
//! per-origin 5xx rates. Plain Rust; the Durable Object around it
//! (`edge::pop_object`) only stores records and answers requests.
//!
//! Bounded: at most `max_keys` keys; a key no push has named for `idle_ms`
//! is forgotten (by [`PopAggregate::sweep`], run from the object's alarm, or
//! when room is needed). A full table leaves new keys untracked (their
//! replies carry no PoP quantile) rather than evicting live ones.

mod metrics_view;

use crate::vec_map::VecMap;
use std::collections::VecDeque;

use crate::capped_map::CappedMap;

use serde::{Deserialize, Serialize};

use crate::estimation::sketch::{BucketCounts, LatencySketch};
use crate::estimation::window::{
    each_snapshot, SlidingWindow, WindowParams, WindowSlot, WindowedSketch,
};
use crate::observe::latency_export::LatencyExport;
use crate::observe::metrics::{MetricCounts, RouteMetrics};
use crate::observe::route_labels::RouteLabels;
use crate::pop::probes::{ProbeBook, ProbeParams, ProbeResult};
use crate::pop::push::{
    ErrorReport, KeyDelta, KeyQuantile, OriginRate, Push, PushError, PushReply, RouteDelayReport,
    RouteShare, SparseBucket, MAX_PUSH_ERRORS, MAX_PUSH_ORIGINS, PUSH_VERSION,
};

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

/// (origin name, route key).
pub type PopKey = (String, String);

/// Two counters that add up in a sliding window.
#[derive(Debug, Clone, Copy, Default)]
struct Pair(u64, u64);

impl WindowSlot for Pair {
    fn add(&mut self, other: &Self) {
        self.0 = self.0.saturating_add(other.0);
        self.1 = self.1.saturating_add(other.1);
    }
    fn subtract(&mut self, other: &Self) {
        self.0 = self.0.saturating_sub(other.0);
        self.1 = self.1.saturating_sub(other.1);
    }
    fn is_empty(&self) -> bool {
        self.0 == 0 && self.1 == 0
    }
}

/// A [`Pair`] window's stored form: epoch -> (a, b).
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoredPair {
    slots: VecMap<i64, (u64, u64)>,
}

impl StoredPair {
    fn of(window: &SlidingWindow<Pair>) -> Self {
        // Inserted one by one: collecting into a VecMap would link in a
        // stable sort (~5 KB of compressed Worker).
        let mut slots = VecMap::new();
        for (e, pair) in window.slots_as_of_last_update() {
            slots.insert(e, (pair.0, pair.1));
        }
        Self { slots }
    }

    fn into_window(self, params: WindowParams, now_ms: f64) -> SlidingWindow<Pair> {
        let slots = self.slots.into_iter().map(|(e, (a, b))| (e, Pair(a, b)));
        SlidingWindow::from_slots(params, now_ms, slots)
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct KeyRecord {
    last_used_ms: f64,
    /// (epoch, [index, completed, censored]...)
    slots: Vec<(i64, Vec<SparseBucket>)>,
}

#[derive(Debug)]
struct Counters {
    /// eligible, hedges
    hedges: SlidingWindow<Pair>,
    /// origin -> (responses, 5xx)
    origins: VecMap<String, SlidingWindow<Pair>>,
    pushes: u64,
    push_bytes: u64,
    /// Every isolate's metrics, summed (the PoP-scope metrics).
    metrics: MetricCounts,
}

/// [`Counters`]' stored form (records stored before the metrics have none).
#[derive(Debug, Default, Serialize, Deserialize)]
struct CountersRecord {
    hedges: StoredPair,
    origins: VecMap<String, StoredPair>,
    #[serde(default)]
    metrics: MetricCounts,
    pushes: u64,
    push_bytes: u64,
}

/// Everything one PoP aggregator knows.
#[derive(Debug)]
pub struct PopAggregate {
    params: PopParams,
    keys: CappedMap<PopKey, WindowedSketch>,
    counters: Counters,
    /// The active health probes' settings and results.
    probe_params: ProbeParams,
    probes: ProbeBook,
    /// When the last push arrived (probes run only while the PoP has traffic).
    last_push_ms: Option<f64>,
    /// Per route policy with its own budget: eligible and hedges over the
    /// window (at most [`MAX_ROUTE_SHARES`] routes; kept in memory only).
    route_shares: VecMap<String, SlidingWindow<Pair>>,
    /// The latest delay any isolate reported per (origin, route), and when
    /// (at most `max_keys`; older than a window, not shown).
    route_delays: VecMap<(String, String), (RouteDelayReport, f64)>,
    /// The PoP's last errors, newest last (at most [`MAX_PUSH_ERRORS`]).
    errors: VecDeque<ErrorReport>,
    /// Which routes have a label of their own in the PoP's metrics (in
    /// memory: after a restart every stored label starts as just used).
    route_labels: RouteLabels,
    /// Per Worker version, every route's counts summed, with when it last
    /// pushed: a rollout's versions side by side. In memory only (an
    /// evicted aggregator starts them again); at most [`MAX_VERSIONS`].
    versions: VecMap<String, (RouteMetrics, f64)>,
}

/// Versions the aggregator keeps apart (two live in a gradual deployment;
/// the least recently heard of goes first).
const MAX_VERSIONS: usize = 4;

/// Most route policies whose PoP share is kept.
const MAX_ROUTE_SHARES: usize = 64;

// === impl PopAggregate ===

impl PopAggregate {
    /// Empty state.
    pub fn new(params: PopParams) -> Self {
        Self {
            params,
            keys: CappedMap::new(params.max_keys, params.idle_ms),
            counters: Counters {
                hedges: SlidingWindow::new(params.window, 0.0),
                origins: VecMap::new(),
                pushes: 0,
                push_bytes: 0,
                metrics: MetricCounts::default(),
            },
            probe_params: ProbeParams {
                path: None,
                interval_ms: f64::INFINITY,
                timeout_ms: 0.0,
            },
            probes: ProbeBook::default(),
            last_push_ms: None,
            route_shares: VecMap::new(),
            route_delays: VecMap::new(),
            errors: VecDeque::new(),
            route_labels: RouteLabels::new([]),
            versions: VecMap::new(),
        }
    }

    /// Keeps a label for each of `configured` routes whatever else pushes
    /// bring ([`Params::configured_route_labels`](crate::config::Params::configured_route_labels)).
    /// The labels already in the stored metrics count as used at `now_ms`,
    /// so they give their places up once idle (stored metrics never hold
    /// more than the bound: they were merged under it).
    pub fn with_route_labels(mut self, configured: Vec<String>, now_ms: f64) -> Self {
        self.route_labels = RouteLabels::new(configured);
        for name in self.counters.metrics.routes.keys() {
            self.route_labels.label(name.clone(), now_ms);
        }
        self
    }

    /// Runs active health probes with these settings (none without a path).
    pub fn with_probes(mut self, probes: ProbeParams) -> Self {
        self.probe_params = probes;
        self
    }

    /// The probe settings.
    pub fn probe_params(&self) -> &ProbeParams {
        &self.probe_params
    }

    /// Whether a probe round is due at `now_ms`: probes are configured, a
    /// push arrived within the idle time (the PoP has traffic: an idle PoP
    /// sends its origins nothing) and the interval has passed.
    pub fn probes_due(&self, now_ms: f64) -> bool {
        self.probing(now_ms) && self.probes.due(&self.probe_params, now_ms)
    }

    /// Whether probes run at all now: configured, and the PoP has traffic.
    pub fn probing(&self, now_ms: f64) -> bool {
        self.probe_params.path.is_some()
            && self
                .last_push_ms
                .is_some_and(|t| now_ms - t <= self.params.idle_ms)
    }

    /// A probe round begins at `now_ms`.
    pub fn probe_round_started(&mut self, now_ms: f64) {
        self.probes.round_started(now_ms);
    }

    /// What a probe of `origin` got.
    pub fn probe_result(
        &mut self,
        origin: &str,
        result: ProbeResult,
        latency_ms: f64,
        now_ms: f64,
    ) {
        self.probes.record(origin, result, latency_ms, now_ms);
    }

    /// Keys held.
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Samples inside the window, over every key.
    pub fn sample_count(&mut self, now_ms: f64) -> u64 {
        self.keys
            .values_mut()
            .map(|window| window.count(now_ms))
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
        self.counters.pushes += 1;
        self.last_push_ms = Some(now_ms);
        self.counters.push_bytes += bytes as u64;
        if let Some(metrics) = &push.metrics {
            (self.counters.metrics).merge(metrics, &mut self.route_labels, now_ms);
            self.count_version(&push.worker_version, metrics, now_ms);
        }
        let pair = Pair(push.eligible, push.hedges);
        self.counters.hedges.update(now_ms, |p| p.add(&pair));
        self.take_reports(push, now_ms);
        let route_budgets = self.take_route_shares(push, now_ms);
        let (keys, touched) = self.take_keys(push, now_ms);
        let reply = PushReply {
            version: PUSH_VERSION,
            keys,
            hedge_fraction: self.hedge_fraction(now_ms),
            eligible: self.counters.hedges.total(now_ms).0,
            origins: self.origin_rates(now_ms),
            probes: self.probes.verdicts(&self.probe_params, now_ms),
            route_budgets,
        };
        (reply, touched)
    }

    /// A push's per-origin answers, route delays and errors.
    fn take_reports(&mut self, push: &Push, now_ms: f64) {
        let window = self.params.window;
        for origin in &push.origins {
            // Bounded like every other map here: isolates name the same
            // few origins, so a new one past the cap is left out.
            if self.counters.origins.len() >= MAX_PUSH_ORIGINS
                && !self.counters.origins.contains_key(&origin.origin)
            {
                continue;
            }
            self.counters
                .origins
                .entry(origin.origin.clone())
                .or_insert_with(|| SlidingWindow::new(window, now_ms))
                .update(now_ms, |p| {
                    p.add(&Pair(origin.responses, origin.errors_5xx))
                });
        }
        for d in &push.route_delays {
            let key = (d.origin.clone(), d.route.clone());
            if self.route_delays.len() < self.params.max_keys
                || self.route_delays.contains_key(&key)
            {
                self.route_delays.insert(key, (d.clone(), now_ms));
            }
        }
        for e in &push.errors {
            if self.errors.len() >= MAX_PUSH_ERRORS {
                self.errors.pop_front();
            }
            self.errors.push_back(e.clone());
        }
    }

    /// A push's route budget shares, summed over the window: each route's
    /// PoP-wide share, for the reply.
    fn take_route_shares(&mut self, push: &Push, now_ms: f64) -> Vec<RouteShare> {
        let window = self.params.window;
        let mut route_budgets = Vec::new();
        for share in &push.route_budgets {
            if !self.route_shares.contains_key(&share.route)
                && self.route_shares.len() >= MAX_ROUTE_SHARES
            {
                continue;
            }
            let route_window = (self.route_shares.entry(share.route.clone()))
                .or_insert_with(|| SlidingWindow::new(window, now_ms));
            route_window.update(now_ms, |p| p.add(&Pair(share.eligible, share.hedges)));
            let Pair(eligible, hedges) = *route_window.total(now_ms);
            route_budgets.push(RouteShare {
                route: share.route.clone(),
                eligible,
                hedges,
            });
        }
        route_budgets
    }

    /// A push's latency deltas merged into the keys' windows: each key's
    /// PoP quantile for the reply, and the keys whose state changed.
    fn take_keys(&mut self, push: &Push, now_ms: f64) -> (Vec<KeyQuantile>, Vec<PopKey>) {
        let mut touched = Vec::new();
        let mut keys = Vec::with_capacity(push.keys.len());
        for delta in &push.keys {
            let key = (delta.origin.clone(), delta.route.clone());
            let state_window = self.params.window;
            let answer = match self.keys.get_or_insert_with(key.clone(), now_ms, || {
                WindowedSketch::new(state_window, now_ms)
            }) {
                Some(window) => {
                    if !delta.buckets.is_empty() {
                        window.merge(&delta.sketch(), now_ms);
                    }
                    let samples = window.count(now_ms);
                    let value_ms = window.quantile(push.quantile, now_ms);
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
        (keys, touched)
    }

    /// What the advisor reads of the PoP at `now_ms`: every (origin, route
    /// key)'s sketch over the window and the window's hedge share, with the
    /// setting in force (`budget_percent`, `policy`) as the Worker's
    /// configuration gives it.
    pub fn latency_export(
        &mut self,
        budget_percent: f64,
        policy: &str,
        now_ms: f64,
    ) -> LatencyExport {
        let mut keys = Vec::new();
        each_snapshot(&mut self.keys, now_ms, |(origin, route), sketch| {
            keys.push(KeyDelta::new(origin, route, sketch));
        });
        LatencyExport {
            window_s: self.params.window.window_ms / 1000.0,
            hedge_share: self.hedge_fraction(now_ms),
            budget_percent,
            policy: policy.to_string(),
            keys,
        }
    }

    /// Hedges per eligible request over the window (0 without traffic).
    pub fn hedge_fraction(&mut self, now_ms: f64) -> f64 {
        let Pair(eligible, hedges) = *self.counters.hedges.total(now_ms);
        if eligible == 0 {
            0.0
        } else {
            hedges as f64 / eligible as f64
        }
    }

    /// Responses and 5xx rate per origin over the window.
    pub fn origin_rates(&mut self, now_ms: f64) -> Vec<OriginRate> {
        self.counters
            .origins
            .iter_mut()
            .map(|(name, pair)| {
                let Pair(responses, errors) = *pair.total(now_ms);
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

    /// Forgets keys idle for `idle_ms` and origins with nothing in the
    /// window; returns the forgotten keys (to delete from storage).
    pub fn sweep(&mut self, now_ms: f64) -> Vec<PopKey> {
        let forgotten = self.keys.forget_idle(now_ms);
        self.counters
            .origins
            .retain(|_, pair| !pair.total(now_ms).is_empty());
        self.counters.hedges.total(now_ms);
        forgotten
    }

    /// The stored form of one key's state.
    pub fn export_key(&mut self, key: &PopKey, now_ms: f64) -> Option<String> {
        let last_used_ms = self.keys.last_used_ms(key)?;
        let window = self.keys.get_mut(key, f64::NEG_INFINITY)?;
        let record = KeyRecord {
            last_used_ms,
            slots: window
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
        // A restored key beyond the cap is left out, as a new one would be.
        self.keys.restore(key, window, record.last_used_ms, now_ms);
        Ok(())
    }

    /// The stored form of the counters.
    pub fn export_counters(&self) -> String {
        let mut origins = VecMap::new();
        for (name, pair) in &self.counters.origins {
            origins.insert(name.clone(), StoredPair::of(pair));
        }
        let record = CountersRecord {
            hedges: StoredPair::of(&self.counters.hedges),
            origins,
            pushes: self.counters.pushes,
            push_bytes: self.counters.push_bytes,
            metrics: self.counters.metrics.clone(),
        };
        serde_json::to_string(&record).unwrap_or_default()
    }

    /// Restores the counters (at start-up).
    pub fn import_counters(&mut self, record: &str, now_ms: f64) -> Result<(), PushError> {
        let record: CountersRecord =
            serde_json::from_str(record).map_err(|e| PushError(format!("stored counters: {e}")))?;
        let window = self.params.window;
        let mut origins = VecMap::new();
        for (name, pair) in record.origins {
            origins.insert(name, pair.into_window(window, now_ms));
        }
        self.counters = Counters {
            hedges: record.hedges.into_window(window, now_ms),
            origins,
            pushes: record.pushes,
            push_bytes: record.push_bytes,
            metrics: record.metrics,
        };
        Ok(())
    }

    /// Adds a push's counts to its Worker version's.
    fn count_version(&mut self, version: &str, metrics: &MetricCounts, now_ms: f64) {
        if version.is_empty() {
            return;
        }
        if !self.versions.contains_key(version) && self.versions.len() >= MAX_VERSIONS {
            let oldest = (self.versions.iter())
                .min_by(|a, b| a.1 .1.total_cmp(&b.1 .1))
                .map(|(v, _)| v.clone());
            if let Some(oldest) = oldest {
                self.versions.remove(&oldest);
            }
        }
        let (sum, seen_ms) = self.versions.entry(version.to_string()).or_default();
        for route in metrics.routes.values() {
            sum.add(route);
        }
        *seen_ms = now_ms;
    }

    /// The PoP's last errors, oldest first.
    pub fn recent_errors(&self) -> &VecDeque<ErrorReport> {
        &self.errors
    }

    /// The PoP quantile of one key, without a push (for stats).
    pub fn quantile(&mut self, key: &PopKey, q: f64, now_ms: f64) -> Option<f64> {
        self.keys
            .get_mut(key, f64::NEG_INFINITY)?
            .quantile(q, now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimation::sketch::{Sample, RELATIVE_ERROR};
    use crate::pop::push::OriginDelta;

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
            metrics: None,
            route_delays: Vec::new(),
            errors: Vec::new(),
            route_budgets: Vec::new(),
            worker_version: String::new(),
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
    fn a_route_budget_share_is_summed_apart_over_the_window() {
        let mut pop = PopAggregate::new(params());
        let with_share = |eligible, hedges| Push {
            route_budgets: vec![RouteShare {
                route: "api".into(),
                eligible,
                hedges,
            }],
            ..push_of("/r", [10.0])
        };
        pop.apply(&with_share(50, 5), 0, 1_000.0);
        let (reply, _) = pop.apply(&with_share(50, 15), 0, 2_000.0);
        assert_eq!(reply.route_budgets.len(), 1);
        assert_eq!(
            (
                reply.route_budgets[0].eligible,
                reply.route_budgets[0].hedges
            ),
            (100, 20)
        );
        assert_eq!(
            reply.eligible, 200,
            "the global counts are the global pushes'"
        );
        // Past the window the share is forgotten.
        let (reply, _) = pop.apply(&with_share(10, 0), 0, 200_000.0);
        assert_eq!(
            (
                reply.route_budgets[0].eligible,
                reply.route_budgets[0].hedges
            ),
            (10, 0)
        );
    }

    #[test]
    fn the_origins_held_stay_bounded_whatever_the_pushes_name() {
        let mut pop = PopAggregate::new(params());
        for p in 0..10 {
            let push = Push {
                origins: (0..MAX_PUSH_ORIGINS)
                    .map(|i| OriginDelta {
                        origin: format!("o-{p}-{i}"),
                        responses: 1,
                        errors_5xx: 0,
                    })
                    .collect(),
                ..push_of("/r", [10.0])
            };
            pop.apply(&push, 0, 1_000.0);
        }
        assert_eq!(pop.origin_rates(1_000.0).len(), MAX_PUSH_ORIGINS);
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
        restarted
            .import_counters(&stored_counters, 6_000.0)
            .unwrap();
        assert_eq!(
            restarted.quantile(&key, 0.95, 6_000.0),
            pop.quantile(&key, 0.95, 6_000.0)
        );
        assert_eq!(restarted.hedge_fraction(6_000.0), 0.1);
        assert_eq!(restarted.pushes(), 1);
        assert!(restarted.import_key(key, "{not json", 0.0).is_err());
    }
}
