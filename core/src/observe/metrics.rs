//! The counters and histograms behind `/__hedge/metrics`: what an isolate
//! counted since it started, and (summed from its pushes) what a PoP counted.
//!
//! Counters, not per-request JSON: a request adds to a few numbers in maps
//! keyed by its route and origins. Labels are bounded: configured routes and
//! at most 64 others at a time ([`RouteLabels`]; further ones count under
//! [`OTHER_ROUTE`]),
//! the configured origins, three causes, five leg outcomes and the fixed set
//! of skip reasons. Pushes carry the difference since the last push
//! ([`MetricCounts::minus`]); the aggregator adds them up
//! ([`MetricCounts::merge`]).

use crate::vec_map::VecMap;

use serde::{Deserialize, Serialize};

use crate::admission::payoff::CAUSES;
use crate::observe::route_labels::RouteLabels;
pub use crate::observe::route_labels::OTHER_ROUTE;
use crate::race::{Leg, LegRecord, RaceEnd, RaceState, RaceSummary};

mod wire;
pub use wire::{MetricsWire, WireNumber};

/// Upper bounds of the latency histograms' buckets, seconds (+Inf follows).
pub const BUCKETS_S: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];
/// Most route labels a push may carry: 64 route policies, 64
/// `HEDGE_ROUTES`, 64 unconfigured labels and [`OTHER_ROUTE`], with room.
pub const MAX_METRIC_ROUTES: usize = 256;
/// How a leg ended, in the order of [`OriginMetrics::legs`].
pub const LEG_OUTCOMES: [&str; 5] = ["won", "lost", "aborted", "shed", "failed"];
/// The legs, in the order of [`OriginMetrics::legs`].
pub const LEGS: [&str; 2] = ["primary", "hedge"];
/// How a request was answered, in the order of [`RouteMetrics::served`]
/// (the names of [`Served::as_str`]).
pub const SERVED: [&str; 6] = [
    "origin",
    "stale-if-error",
    "hit",
    "coalesced",
    "stale-while-revalidate",
    "refresh",
];

/// How a request was answered: by a race, or from the shared cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// A race's answer (an origin's, or the Worker's error when none came).
    Origin,
    /// A stale copy stood in for a race's failed answer (RFC 5861
    /// `stale-if-error`).
    StaleIfError,
    /// A fresh stored entry.
    Hit,
    /// An entry stored by the concurrent identical request it waited for.
    Coalesced,
    /// A stale entry within `stale-while-revalidate`, refreshed in the
    /// background.
    StaleWhileRevalidate,
    /// A background refresh: a race that answered no client.
    Refresh,
}

impl Served {
    /// Its name in the metrics and `Server-Timing`.
    pub fn as_str(self) -> &'static str {
        SERVED[self as usize]
    }

    /// Its `x-hedge` value when served from the cache.
    pub fn x_hedge(self) -> &'static str {
        match self {
            Served::Hit => "cache",
            Served::Coalesced => "coalesced",
            _ => "stale",
        }
    }
}

/// Most skip reasons kept (the enum has fewer; a bound for decoded pushes).
const MAX_SKIP_REASONS: usize = 64;
/// Most origins kept.
const MAX_METRIC_ORIGINS: usize = 64;
/// Longest label value accepted from a push.
const MAX_LABEL_BYTES: usize = 256;

/// A latency histogram: a count per bucket of [`BUCKETS_S`] plus +Inf (not
/// cumulative), and the sum of the observations.
#[derive(Debug, Clone, PartialEq)]
pub struct Histogram {
    /// Observations per bucket, `BUCKETS_S.len() + 1` of them.
    pub counts: Vec<u64>,
    /// Sum of the observations, seconds.
    pub sum_s: f64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            counts: vec![0; BUCKETS_S.len() + 1],
            sum_s: 0.0,
        }
    }
}

impl Histogram {
    /// Counts one observation of `seconds` (negative or NaN ones are not
    /// observations of anything, and are dropped).
    pub fn observe(&mut self, seconds: f64) {
        if seconds.is_nan() || seconds < 0.0 {
            return;
        }
        let slot = BUCKETS_S
            .iter()
            .position(|&b| seconds <= b)
            .unwrap_or(BUCKETS_S.len());
        if let Some(c) = self.counts.get_mut(slot) {
            *c += 1;
        }
        if seconds.is_finite() {
            self.sum_s += seconds;
        }
    }

    /// Observations in all.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    fn merge(&mut self, other: &Histogram) {
        for (c, o) in self.counts.iter_mut().zip(&other.counts) {
            *c = c.saturating_add(*o);
        }
        self.sum_s += other.sum_s;
    }

    fn minus(&self, earlier: &Histogram) -> Histogram {
        Histogram {
            counts: (self.counts.iter().zip(&earlier.counts))
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
            sum_s: (self.sum_s - earlier.sum_s).max(0.0),
        }
    }

    fn is_valid(&self) -> bool {
        self.counts.len() == BUCKETS_S.len() + 1 && self.sum_s.is_finite() && self.sum_s >= 0.0
    }
}

/// One route's requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RouteMetrics {
    /// Requests that ran a race (proxied, or a background refresh; not served
    /// from the cache).
    pub requests: u64,
    /// Of those, answered with a 5xx or without an origin answer.
    pub client_errors: u64,
    /// Hedges by cause (in [`CAUSES`] order) and outcome (won, lost).
    pub hedges: [[u64; 2]; 3],
    /// Latency as the client saw it (from arrival to the answer's headers).
    pub duration: Histogram,
    /// Origin time on legs cut short, and on all legs, seconds.
    pub wasted_origin_s: f64,
    /// Origin time on all legs, seconds.
    pub origin_s: f64,
    /// Requests by how they were answered, in [`SERVED`] order (races and
    /// refreshes are also in `requests`; answers from the cache only here).
    pub served: [u64; 6],
}

impl RouteMetrics {
    /// Adds `other`'s counts into these.
    pub(crate) fn add(&mut self, other: &RouteMetrics) {
        self.requests = self.requests.saturating_add(other.requests);
        self.client_errors = self.client_errors.saturating_add(other.client_errors);
        for (m, o) in (self.hedges.iter_mut().flatten()).zip(other.hedges.iter().flatten()) {
            *m = m.saturating_add(*o);
        }
        self.duration.merge(&other.duration);
        self.wasted_origin_s += other.wasted_origin_s;
        self.origin_s += other.origin_s;
        for (m, o) in self.served.iter_mut().zip(other.served) {
            *m = m.saturating_add(o);
        }
    }
}

/// One origin's legs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OriginMetrics {
    /// Legs by role (primary, hedge) and outcome (in [`LEG_OUTCOMES`] order).
    pub legs: [[u64; 5]; 2],
    /// Time to an answer of each leg that got one, by role (primary, hedge).
    pub leg_duration: [Histogram; 2],
    /// The hedge delay of the races it was the primary of.
    pub hedge_delay: Histogram,
}

/// Everything counted: per route, per origin, and why hedges were skipped.
/// On the wire and in storage it is a [`MetricsWire`] (flat lists of
/// numbers: serde's derived code for nested maps and arrays costs the
/// Worker tens of KB).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "MetricsWire", into = "MetricsWire")]
pub struct MetricCounts {
    /// Per route key (or route policy name).
    pub routes: VecMap<String, RouteMetrics>,
    /// Per origin name.
    pub origins: VecMap<String, OriginMetrics>,
    /// Requests whose race sent no hedge, by reason.
    pub hedge_skips: VecMap<String, u64>,
    /// Third attempts sent.
    pub third_attempts: u64,
}

/// A leg's outcome slot in [`LEG_OUTCOMES`].
fn leg_outcome(record: &LegRecord, role: Leg, won: bool) -> usize {
    let shed = role == Leg::Hedge && matches!(record.status, Some(409 | 425 | 429 | 503));
    match record.status {
        _ if won => 0,
        _ if record.aborted => 2,
        _ if shed => 3,
        Some(s) if s < 500 => 1,
        _ => 4,
    }
}

impl MetricCounts {
    /// Counts one finished race with its `summary` (the client got its
    /// answer `total_ms` after it arrived).
    pub fn record(
        &mut self,
        origin_names: &[String],
        state: &RaceState,
        summary: &RaceSummary,
        served: Served,
        total_ms: f64,
        now_ms: f64,
    ) {
        let Some(route) = self.route_mut(&state.plan.route.key) else {
            return;
        };
        route.requests += 1;
        route.served[served as usize] += 1;
        route.client_errors += u64::from(summary.error);
        route.duration.observe(total_ms / 1000.0);
        route.wasted_origin_s += summary.wasted_ms.max(0.0) / 1000.0;
        route.origin_s += summary.origin_ms.max(0.0) / 1000.0;
        if let (true, Some(cause)) = (summary.hedge_sent, summary.hedge_cause) {
            if let Some(slot) = CAUSES.iter().position(|c| *c == cause) {
                route.hedges[slot][usize::from(!summary.hedge_won)] += 1;
            }
        }
        if let Some(reason) = state.no_hedge.map(|r| r.as_str()) {
            match self.hedge_skips.get_mut(reason) {
                Some(n) => *n += 1,
                None => {
                    self.hedge_skips.insert(reason.to_string(), 1);
                }
            }
        }
        self.third_attempts += u64::from(state.third_attempt_sent());
        let winner = state
            .end
            .and_then(RaceEnd::kept_leg)
            .filter(|_| matches!(state.end, Some(RaceEnd::Won(_))));
        let failed_hedge = state.failed_hedge.iter().map(|r| (Leg::Hedge, r, false));
        let legs = [Leg::Primary, Leg::Hedge]
            .into_iter()
            .map(|leg| (leg, state.leg(leg), winner == Some(leg)))
            .chain(failed_hedge);
        for (role, record, won) in legs {
            if record.started_ms.is_none() {
                continue;
            }
            let Some(name) = origin_names.get(record.origin) else {
                continue;
            };
            let Some(origin) = self.origin_mut(name) else {
                continue;
            };
            origin.legs[role.index()][leg_outcome(record, role, won)] += 1;
            if let (Some(_), false) = (record.status, record.aborted) {
                if let Some(ms) = record.elapsed_ms(now_ms) {
                    origin.leg_duration[role.index()].observe(ms / 1000.0);
                }
            }
        }
        if let (Some(choice), Some(name)) = (state.plan.delay, origin_names.get(state.plan.primary))
        {
            if let Some(origin) = self.origin_mut(name) {
                origin.hedge_delay.observe(choice.delay_ms / 1000.0);
            }
        }
    }

    /// Counts a request on `route` answered from the cache as `how`.
    pub fn served_from_cache(&mut self, route: &str, how: Served) {
        if let Some(r) = self.route_mut(route) {
            r.served[how as usize] += 1;
        }
    }

    /// `name`'s entry; a key is allocated only on its first use. Labels are
    /// bounded before they get here ([`RouteLabels`]).
    fn route_mut(&mut self, name: &str) -> Option<&mut RouteMetrics> {
        if !self.routes.contains_key(name) {
            self.routes
                .insert(name.to_string(), RouteMetrics::default());
        }
        self.routes.get_mut(name)
    }

    /// `label` gave its place up ([`RouteLabels::label`]): its counts move
    /// into [`OTHER_ROUTE`], so totals stay whole and a push's difference
    /// stays right when the pushed counts are folded alike.
    pub fn fold_route(&mut self, label: &str) {
        if label == OTHER_ROUTE || !self.routes.contains_key(label) {
            return;
        }
        // Rebuilt rather than removed from: rare, and a VecMap removal
        // costs the Worker ~5 KB of code.
        let mut folded = RouteMetrics::default();
        for (name, r) in std::mem::take(&mut self.routes) {
            if name == label {
                folded = r;
            } else {
                self.routes.insert(name, r);
            }
        }
        if let Some(other) = self.route_mut(OTHER_ROUTE) {
            other.add(&folded);
        }
    }

    /// The origin's entry; a key is allocated only on its first use (a
    /// request's hot path allocates nothing here).
    fn origin_mut(&mut self, name: &str) -> Option<&mut OriginMetrics> {
        if !self.origins.contains_key(name) {
            self.origins
                .insert(name.to_string(), OriginMetrics::default());
        }
        self.origins.get_mut(name)
    }

    /// Adds `other` (a push's counts) into these, each route under the label
    /// `labels` gives it at `now_ms` (labels given up fold into [`OTHER_ROUTE`]).
    pub fn merge(&mut self, other: &MetricCounts, labels: &mut RouteLabels, now_ms: f64) {
        for (name, r) in &other.routes {
            let (label, gone) = labels.label(name.clone(), now_ms);
            for g in &gone {
                self.fold_route(g);
            }
            if let Some(mine) = self.route_mut(&label) {
                mine.add(r);
            }
        }
        for (name, o) in &other.origins {
            if self.origins.len() >= MAX_METRIC_ORIGINS && !self.origins.contains_key(name) {
                continue;
            }
            let Some(mine) = self.origin_mut(name) else {
                continue;
            };
            for (m, x) in mine.legs.iter_mut().flatten().zip(o.legs.iter().flatten()) {
                *m = m.saturating_add(*x);
            }
            for (m, x) in mine.leg_duration.iter_mut().zip(&o.leg_duration) {
                m.merge(x);
            }
            mine.hedge_delay.merge(&o.hedge_delay);
        }
        for (reason, n) in &other.hedge_skips {
            if self.hedge_skips.len() < MAX_SKIP_REASONS || self.hedge_skips.contains_key(reason) {
                let mine = self.hedge_skips.entry(reason.clone()).or_default();
                *mine = mine.saturating_add(*n);
            }
        }
        self.third_attempts = self.third_attempts.saturating_add(other.third_attempts);
    }

    /// What was counted since `earlier` (a copy of these counts taken at
    /// the last push); only keys that moved.
    pub fn minus(&self, earlier: &MetricCounts) -> MetricCounts {
        let mut out = MetricCounts::default();
        for (name, r) in &self.routes {
            let e = earlier.routes.get(name).cloned().unwrap_or_default();
            if r.requests == e.requests && r.served == e.served {
                continue;
            }
            let mut served = [0; 6];
            for ((d, a), b) in served.iter_mut().zip(r.served).zip(e.served) {
                *d = a.saturating_sub(b);
            }
            let mut hedges = [[0; 2]; 3];
            for ((d, a), b) in hedges
                .iter_mut()
                .flatten()
                .zip(r.hedges.iter().flatten())
                .zip(e.hedges.iter().flatten())
            {
                *d = a.saturating_sub(*b);
            }
            out.routes.insert(
                name.clone(),
                RouteMetrics {
                    requests: r.requests.saturating_sub(e.requests),
                    client_errors: r.client_errors.saturating_sub(e.client_errors),
                    hedges,
                    duration: r.duration.minus(&e.duration),
                    wasted_origin_s: (r.wasted_origin_s - e.wasted_origin_s).max(0.0),
                    origin_s: (r.origin_s - e.origin_s).max(0.0),
                    served,
                },
            );
        }
        for (name, o) in &self.origins {
            let e = earlier.origins.get(name).cloned().unwrap_or_default();
            if *o == e {
                continue;
            }
            let mut legs = [[0; 5]; 2];
            for ((d, a), b) in legs
                .iter_mut()
                .flatten()
                .zip(o.legs.iter().flatten())
                .zip(e.legs.iter().flatten())
            {
                *d = a.saturating_sub(*b);
            }
            out.origins.insert(
                name.clone(),
                OriginMetrics {
                    legs,
                    leg_duration: [
                        o.leg_duration[0].minus(&e.leg_duration[0]),
                        o.leg_duration[1].minus(&e.leg_duration[1]),
                    ],
                    hedge_delay: o.hedge_delay.minus(&e.hedge_delay),
                },
            );
        }
        for (reason, n) in &self.hedge_skips {
            let d = n.saturating_sub(earlier.hedge_skips.get(reason).copied().unwrap_or(0));
            if d > 0 {
                out.hedge_skips.insert(reason.clone(), d);
            }
        }
        out.third_attempts = self.third_attempts.saturating_sub(earlier.third_attempts);
        out
    }

    /// Whether nothing was counted.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
            && self.origins.is_empty()
            && self.hedge_skips.is_empty()
            && self.third_attempts == 0
    }

    /// Why counts decoded from a push cannot be merged, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        // Every label is printed in each PoP scrape: bounded, one line.
        let label = |s: &str| s.len() <= MAX_LABEL_BYTES && !s.chars().any(char::is_control);
        if self.routes.len() > MAX_METRIC_ROUTES
            || self.origins.len() > MAX_METRIC_ORIGINS
            || self.hedge_skips.len() > MAX_SKIP_REASONS
        {
            return Err("metrics: too many routes, origins or skip reasons".into());
        }
        for (name, r) in &self.routes {
            let finite = r.wasted_origin_s.is_finite()
                && r.origin_s.is_finite()
                && r.wasted_origin_s >= 0.0
                && r.origin_s >= 0.0;
            if !label(name) || !r.duration.is_valid() || !finite {
                return Err(format!("metrics: route {name:?} is malformed"));
            }
        }
        for (name, o) in &self.origins {
            let histograms_ok =
                o.leg_duration.iter().all(Histogram::is_valid) && o.hedge_delay.is_valid();
            if !label(name) || !histograms_ok {
                return Err(format!("metrics: origin {name:?} is malformed"));
            }
        }
        if !self.hedge_skips.keys().all(|k| label(k)) {
            return Err("metrics: a skip reason is too long".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_histogram_puts_each_observation_in_its_bucket() {
        let mut h = Histogram::default();
        for s in [0.001, 0.005, 0.006, 0.2, 31.0, f64::NAN, -1.0] {
            h.observe(s);
        }
        assert_eq!(h.count(), 5);
        assert_eq!(h.counts[0], 2, "le 0.005 is inclusive");
        assert_eq!(h.counts[1], 1);
        assert_eq!(h.counts[6], 1, "0.2 s is under 0.25");
        assert_eq!(h.counts[BUCKETS_S.len()], 1, "past the last bound: +Inf");
        assert!((h.sum_s - 31.212).abs() < 1e-9);
    }

    #[test]
    fn the_difference_since_a_push_merges_back_to_the_total() {
        let mut total = MetricCounts::default();
        let r = total.routes.entry("/a".into()).or_default();
        r.requests = 10;
        r.hedges[0] = [2, 1];
        r.duration.observe(0.04);
        *total.hedge_skips.entry("budget".into()).or_default() += 3;
        let pushed = total.clone();
        let r = total.routes.get_mut("/a").unwrap();
        r.requests = 15;
        r.hedges[0] = [4, 1];
        r.duration.observe(0.3);
        total.routes.entry("/b".into()).or_default().requests = 1;
        let delta = total.minus(&pushed);
        assert_eq!(delta.routes["/a"].requests, 5);
        assert_eq!(delta.routes["/a"].hedges[0], [2, 0]);
        assert_eq!(delta.routes["/a"].duration.count(), 1);
        assert!(delta.hedge_skips.is_empty(), "unchanged keys are left out");
        let mut pop = pushed.clone();
        pop.merge(&delta, &mut RouteLabels::new([]), 0.0);
        assert_eq!(pop, total);
        assert!(delta.check().is_ok());
    }

    #[test]
    fn counts_travel_as_flat_lists_and_come_back_the_same() {
        let mut m = MetricCounts::default();
        let r = m.routes.entry("/a".into()).or_default();
        r.requests = 7;
        r.hedges[2] = [1, 3];
        r.wasted_origin_s = 0.5;
        r.duration.observe(0.07);
        let o = m.origins.entry("o".into()).or_default();
        o.legs[1][3] = 2;
        o.hedge_delay.observe(0.09);
        o.leg_duration[1].observe(0.02);
        m.hedge_skips.insert("budget".into(), 4);
        m.third_attempts = 1;
        let json = serde_json::to_string(&m).unwrap();
        let back: MetricCounts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, m);
        assert!(back.check().is_ok());
        assert!(
            json.contains("[7,0,"),
            "whole numbers go without a fraction: {json}"
        );
        let short = json.replacen("[7,", "[", 1);
        let bad: MetricCounts = serde_json::from_str(&short).unwrap();
        assert!(
            bad.check().is_err(),
            "a list of the wrong length is refused"
        );
    }

    #[test]
    fn answers_from_the_cache_are_counted_pushed_and_merged_beside_the_races() {
        let mut total = MetricCounts::default();
        total.served_from_cache("/a", Served::Hit);
        total.routes.get_mut("/a").unwrap().requests = 1;
        total.routes.get_mut("/a").unwrap().served[Served::Origin as usize] = 1;
        let pushed = total.clone();
        // Only hits since the push: the route still moved.
        total.served_from_cache("/a", Served::Hit);
        total.served_from_cache("/a", Served::Coalesced);
        total.served_from_cache("/b", Served::StaleWhileRevalidate);
        let delta = total.minus(&pushed);
        assert_eq!(delta.routes["/a"].requests, 0);
        assert_eq!(delta.routes["/a"].served, [0, 0, 1, 1, 0, 0]);
        assert_eq!(delta.routes["/b"].served, [0, 0, 0, 0, 1, 0]);
        let json = serde_json::to_string(&delta).unwrap();
        let back: MetricCounts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, delta);
        let mut pop = pushed.clone();
        pop.merge(&back, &mut RouteLabels::new([]), 0.0);
        assert_eq!(pop, total);
        assert_eq!(
            Served::StaleWhileRevalidate.as_str(),
            "stale-while-revalidate"
        );
        // A push from a version that counted no answers still decodes.
        let old = json.replace(
            r#","served":[["/a",[0,0,1,1,0,0]],["/b",[0,0,0,0,1,0]]]"#,
            "",
        );
        assert_ne!(old, json);
        let old: MetricCounts = serde_json::from_str(&old).unwrap();
        assert!(old.check().is_ok());
        assert_eq!(old.routes["/a"].served, [0; 6]);
    }

    #[test]
    fn a_scanners_routes_share_one_label_and_configured_ones_keep_theirs() {
        let mut pop = MetricCounts::default();
        let mut labels = RouteLabels::new(["api".to_string()]);
        for i in 0..100 {
            let mut one = MetricCounts::default();
            one.routes.entry(format!("/r{i}")).or_default().requests = 1;
            pop.merge(&one, &mut labels, 0.0);
        }
        let mut api = MetricCounts::default();
        api.routes.entry("api".into()).or_default().requests = 2;
        pop.merge(&api, &mut labels, 0.0);
        assert_eq!(pop.routes.len(), 64 + 2);
        assert_eq!(pop.routes[OTHER_ROUTE].requests, 36);
        assert_eq!(pop.routes["api"].requests, 2);
        // Later, one new key: the idle scanner labels fold into `_other`.
        let mut one = MetricCounts::default();
        one.routes.entry("/new".into()).or_default().requests = 1;
        pop.merge(&one, &mut labels, 1e9);
        assert_eq!(pop.routes.len(), 3, "api, _other and /new");
        assert_eq!(pop.routes[OTHER_ROUTE].requests, 100, "no count lost");
    }

    #[test]
    fn malformed_counts_are_refused() {
        let mut bad = MetricCounts::default();
        bad.routes.entry("/a".into()).or_default().duration.counts = vec![1];
        assert!(bad.check().is_err());
        let mut bad = MetricCounts::default();
        bad.routes.entry("/a".into()).or_default().origin_s = f64::INFINITY;
        assert!(bad.check().is_err());
        let mut bad = MetricCounts::default();
        bad.origins
            .insert("x".repeat(300), OriginMetrics::default());
        assert!(bad.check().is_err());
    }
}
