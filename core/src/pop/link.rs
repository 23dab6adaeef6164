//! The isolate's side of the PoP aggregate: what it has seen since its last
//! push, when to push, and what the PoP last said.
//!
//! A push is due when the isolate has never pushed and has a key to ask
//! about (so a cold isolate learns the PoP quantiles after its first
//! request), or every `push_interval_ms`, or after `push_every_requests`
//! requests, whichever comes first; never while one is in flight. A quiet
//! isolate (fewer than [`QUIET_PUSH_REQUESTS`] requests since its last push)
//! waits up to [`QUIET_INTERVALS`] intervals: its push would tell the PoP
//! little and cost a Durable Object request all the same. A failed
//! push backs off exponentially (doubling from the interval up to
//! `max_backoff_ms`) and its delta is dropped: the PoP window is a sample,
//! and re-sending would let a struggling aggregator's backlog grow.
//!
//! The PoP answers are used for `stale_ms` after they arrive; past that the
//! isolate is on its local estimates alone.

use crate::vec_map::VecMap;
use std::collections::HashMap;

use crate::capped_map::CappedMap;

use crate::estimation::estimator::QuantileEstimate;
use crate::estimation::sketch::{LatencySketch, Sample};
use crate::pop::push::{
    KeyDelta, OriginDelta, Push, PushReply, RouteShare, MAX_PUSH_KEYS, PUSH_VERSION,
};

/// Push timing and limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PopLinkParams {
    /// Whether an aggregator is configured at all.
    pub enabled: bool,
    /// Longest time between pushes while there is traffic.
    pub push_interval_ms: f64,
    /// Requests after which a push is due sooner than the interval.
    pub push_every_requests: u64,
    /// Longest back-off after failed pushes.
    pub max_backoff_ms: f64,
    /// How long a PoP answer is used.
    pub stale_ms: f64,
}

/// Longest back-off after failed pushes: an aggregator that is down is
/// asked again at least every five minutes.
pub const MAX_PUSH_BACKOFF_MS: f64 = 300_000.0;

/// Fewer requests than this since the last push make a push wait longer
/// (4 rps and more push every interval, as before).
pub const QUIET_PUSH_REQUESTS: u64 = 20;
/// How many intervals a quiet isolate waits at most.
pub const QUIET_INTERVALS: f64 = 4.0;

#[derive(Debug, Clone, Copy)]
struct PopAnswer {
    estimate: Option<QuantileEstimate>,
    at_ms: f64,
}

/// Counters about the pushes, for stats and logs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PushCounts {
    /// Pushes answered.
    pub succeeded: u64,
    /// Pushes that failed (unreachable, error status, bad reply, timeout).
    pub failed: u64,
    /// Failures in a row now.
    pub failing_in_a_row: u32,
    /// Bytes of the last push.
    pub last_push_bytes: u64,
}

/// One isolate's push state and view of the PoP.
#[derive(Debug)]
pub struct PopLink {
    params: PopLinkParams,
    delta: CappedMap<(usize, String), LatencySketch>,
    origin_counts: HashMap<usize, (u64, u64)>,
    eligible: u64,
    hedges: u64,
    requests_since_push: u64,
    last_push_ms: Option<f64>,
    in_flight: bool,
    not_before_ms: f64,
    answers: CappedMap<(usize, String), PopAnswer>,
    hedge_fraction: Option<(f64, f64)>,
    counts: PushCounts,
    /// Per route policy with its own budget: (eligible, hedges) since the
    /// last push, and its PoP-wide hedge fraction from the last reply
    /// (fraction, when heard).
    route_counts: VecMap<String, (u64, u64)>,
    route_fractions: VecMap<String, (f64, f64)>,
}

// === impl PopLink ===

impl PopLink {
    /// Nothing seen, nothing pushed.
    pub fn new(params: PopLinkParams) -> Self {
        Self {
            params,
            // Emptied by every push; never idle-evicted in between.
            delta: CappedMap::new(MAX_PUSH_KEYS, f64::INFINITY),
            origin_counts: HashMap::new(),
            eligible: 0,
            hedges: 0,
            requests_since_push: 0,
            last_push_ms: None,
            in_flight: false,
            not_before_ms: f64::NEG_INFINITY,
            // A reply names at most MAX_PUSH_KEYS keys; answers go stale.
            answers: CappedMap::new(2 * MAX_PUSH_KEYS, params.stale_ms),
            hedge_fraction: None,
            counts: PushCounts::default(),
            route_counts: VecMap::new(),
            route_fractions: VecMap::new(),
        }
    }

    /// A hedge-eligible request of route policy `route`, which has its own
    /// budget (its share of the PoP is kept apart).
    pub fn note_route_request(&mut self, route: &str) {
        if self.params.enabled {
            self.route_entry(route).0 += 1;
        }
    }

    /// A hedge of route policy `route`, which has its own budget.
    pub fn record_route_hedge(&mut self, route: &str) {
        if self.params.enabled {
            self.route_entry(route).1 += 1;
        }
    }

    fn route_entry(&mut self, route: &str) -> &mut (u64, u64) {
        if !self.route_counts.contains_key(route) {
            self.route_counts.insert(route.to_string(), (0, 0));
        }
        self.route_counts.entry(route.to_string()).or_default()
    }

    /// Whether route policy `route`'s PoP-wide hedge fraction is above its
    /// own `budget_fraction` (as the last fresh reply said).
    pub fn route_over_budget(&self, route: &str, budget_fraction: f64, now_ms: f64) -> bool {
        self.route_fractions
            .get(route)
            .is_some_and(|(fraction, at_ms)| {
                now_ms - at_ms < self.params.stale_ms && *fraction > budget_fraction
            })
    }

    /// A request for `origin`/`route` starts: the next push asks for its
    /// PoP quantile. New keys beyond the push limit are not tracked.
    pub fn note_request(&mut self, origin: usize, route: &str, eligible: bool) {
        if !self.params.enabled {
            return;
        }
        self.requests_since_push += 1;
        if eligible {
            self.eligible += 1;
        }
        let key = (origin, route.to_string());
        self.delta.get_or_insert_with(key, 0.0, LatencySketch::new);
    }

    /// A latency sample of `origin`/`route`.
    pub fn record_sample(&mut self, origin: usize, route: &str, sample: Sample) {
        if !self.params.enabled {
            return;
        }
        let key = (origin, route.to_string());
        if let Some(sketch) = self.delta.get_or_insert_with(key, 0.0, LatencySketch::new) {
            sketch.record(sample);
        }
    }

    /// A response (or failure) from `origin`.
    pub fn record_response(&mut self, origin: usize, server_error: bool) {
        if !self.params.enabled {
            return;
        }
        let counts = self.origin_counts.entry(origin).or_default();
        counts.0 += 1;
        counts.1 += u64::from(server_error);
    }

    /// A hedge was sent.
    pub fn record_hedge(&mut self) {
        self.hedges += 1;
    }

    /// Whether a push should start now.
    pub fn push_due(&self, now_ms: f64) -> bool {
        if !self.params.enabled || self.in_flight || now_ms < self.not_before_ms {
            return false;
        }
        match self.last_push_ms {
            None => !self.delta.is_empty(),
            Some(last) => {
                let (since_ms, requests) = (now_ms - last, self.requests_since_push);
                let interval = self.params.push_interval_ms;
                let enough = QUIET_PUSH_REQUESTS.min(self.params.push_every_requests);
                requests >= self.params.push_every_requests
                    || (requests >= enough && since_ms >= interval)
                    || (requests > 0 && since_ms >= QUIET_INTERVALS * interval)
            }
        }
    }

    /// Takes the delta as a push (origins named by `origin_names`) and marks
    /// a push in flight. The delta starts again from empty.
    pub fn take_push(&mut self, now_ms: f64, quantile: f64, origin_names: &[String]) -> Push {
        let name = |i: usize| origin_names.get(i).cloned().unwrap_or_default();
        let keys = self
            .delta
            .drain()
            .map(|((origin, route), sketch)| KeyDelta::new(&name(origin), &route, &sketch))
            .collect();
        let origins = self
            .origin_counts
            .drain()
            .map(|(origin, (responses, errors_5xx))| OriginDelta {
                origin: name(origin),
                responses,
                errors_5xx,
            })
            .collect();
        let push = Push {
            version: PUSH_VERSION,
            quantile,
            eligible: std::mem::take(&mut self.eligible),
            hedges: std::mem::take(&mut self.hedges).min(MAX_HEDGE_COUNT),
            keys,
            origins,
            metrics: None,
            worker_version: String::new(),
            route_delays: Vec::new(),
            errors: Vec::new(),
            route_budgets: std::mem::take(&mut self.route_counts)
                .into_iter()
                .map(|(route, (eligible, hedges))| RouteShare {
                    route,
                    eligible,
                    hedges,
                })
                .collect(),
        };
        self.requests_since_push = 0;
        self.last_push_ms = Some(now_ms);
        self.in_flight = true;
        push
    }

    /// The aggregator answered a push of `bytes` bytes.
    pub fn push_succeeded(
        &mut self,
        reply: &PushReply,
        bytes: usize,
        now_ms: f64,
        origin_names: &[String],
    ) {
        self.in_flight = false;
        self.counts.succeeded += 1;
        self.counts.failing_in_a_row = 0;
        self.counts.last_push_bytes = bytes as u64;
        self.not_before_ms = f64::NEG_INFINITY;
        for key in &reply.keys {
            let Some(origin) = origin_names.iter().position(|n| *n == key.origin) else {
                continue;
            };
            let estimate = key.value_ms.map(|value_ms| QuantileEstimate {
                value_ms,
                samples: key.samples,
            });
            if let Some(answer) =
                self.answers
                    .get_or_insert_with((origin, key.route.clone()), now_ms, || PopAnswer {
                        estimate,
                        at_ms: now_ms,
                    })
            {
                *answer = PopAnswer {
                    estimate,
                    at_ms: now_ms,
                };
            }
        }
        // Bounded like the push: answers for keys no longer asked about go stale and are dropped.
        self.answers.drop_idle(now_ms);
        self.hedge_fraction = Some((reply.hedge_fraction, now_ms));
        for r in &reply.route_budgets {
            let fraction = if r.eligible == 0 {
                0.0
            } else {
                r.hedges as f64 / r.eligible as f64
            };
            // At most the routes pushed (bounded by the route policies).
            self.route_fractions
                .insert(r.route.clone(), (fraction, now_ms));
        }
    }

    /// A push failed: back off before the next one.
    pub fn push_failed(&mut self, now_ms: f64) {
        self.in_flight = false;
        self.counts.failed += 1;
        self.counts.failing_in_a_row = self.counts.failing_in_a_row.saturating_add(1);
        let doublings = self.counts.failing_in_a_row.min(16) - 1;
        let backoff = (self.params.push_interval_ms * f64::from(1u32 << doublings))
            .min(self.params.max_backoff_ms);
        self.not_before_ms = now_ms + backoff;
    }

    /// The PoP quantile for `origin`/`route`, if a fresh one is known.
    pub fn estimate(&self, origin: usize, route: &str, now_ms: f64) -> Option<QuantileEstimate> {
        let answer = self.answers.get(&(origin, route.to_string()))?;
        (now_ms - answer.at_ms < self.params.stale_ms)
            .then_some(answer.estimate)
            .flatten()
    }

    /// Whether the PoP-wide hedge fraction is above `budget_fraction`; then
    /// this isolate does not hedge until a reply says it is back under.
    pub fn over_budget(&self, budget_fraction: f64, now_ms: f64) -> bool {
        self.hedge_fraction.is_some_and(|(fraction, at_ms)| {
            now_ms - at_ms < self.params.stale_ms && fraction > budget_fraction
        })
    }

    /// Keys in the pending delta and PoP answers held (for memory bounds).
    pub fn key_counts(&self) -> (usize, usize) {
        (self.delta.len(), self.answers.len())
    }

    /// Whether an aggregator is configured.
    pub fn enabled(&self) -> bool {
        self.params.enabled
    }

    /// Push counters.
    pub fn counts(&self) -> PushCounts {
        self.counts
    }
}

/// Hedges can never exceed what the format accepts.
const MAX_HEDGE_COUNT: u64 = crate::pop::push::MAX_COUNT;

/// The reply's per-origin 5xx rates as (origin index, rate, responses), for
/// the origins this isolate knows by name.
pub fn origin_rates(reply: &PushReply, origin_names: &[String]) -> Vec<(usize, f64, u64)> {
    reply
        .origins
        .iter()
        .filter_map(|o| {
            let index = origin_names.iter().position(|n| *n == o.origin)?;
            Some((index, o.rate_5xx, o.responses))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pop::push::{KeyQuantile, OriginRate};

    fn params() -> PopLinkParams {
        PopLinkParams {
            enabled: true,
            push_interval_ms: 5_000.0,
            push_every_requests: 1_000,
            max_backoff_ms: 40_000.0,
            stale_ms: 60_000.0,
        }
    }

    fn names() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    fn reply(value_ms: Option<f64>, hedge_fraction: f64) -> PushReply {
        PushReply {
            version: PUSH_VERSION,
            keys: vec![KeyQuantile {
                origin: "a".into(),
                route: "/r".into(),
                value_ms,
                samples: 500,
            }],
            hedge_fraction,
            eligible: 1_000,
            origins: vec![],
            probes: Vec::new(),
            route_budgets: Vec::new(),
        }
    }

    #[test]
    fn origin_rates_are_matched_by_name_and_unknown_origins_skipped() {
        let mut r = reply(None, 0.0);
        r.origins = vec![
            OriginRate {
                origin: "b".into(),
                responses: 40,
                rate_5xx: 0.25,
            },
            OriginRate {
                origin: "gone".into(),
                responses: 9,
                rate_5xx: 1.0,
            },
        ];
        assert_eq!(origin_rates(&r, &names()), vec![(1, 0.25, 40)]);
    }

    /// Pushes a link makes in `seconds` at `rps`, every push answered at once.
    fn pushes_at(rps: f64, seconds: f64) -> u64 {
        let mut link = PopLink::new(params());
        let mut pushes = 0;
        let requests = (rps * seconds) as u64;
        for i in 0..requests {
            let now = i as f64 * 1_000.0 / rps;
            link.note_request(0, "/r", true);
            if link.push_due(now) {
                link.take_push(now, 0.95, &names());
                link.push_succeeded(&reply(Some(50.0), 0.05), 300, now, &names());
                pushes += 1;
            }
        }
        pushes
    }

    #[test]
    fn a_quiet_isolate_pushes_less_often() {
        // 1 rps: 5 requests per interval, a push every 4 intervals (20 s).
        assert_eq!(pushes_at(1.0, 120.0), 6);
        // 4 rps and more: every interval.
        assert_eq!(pushes_at(4.0, 60.0), 12);
    }

    #[test]
    fn a_cold_isolate_pushes_on_its_first_request() {
        let mut link = PopLink::new(params());
        assert!(!link.push_due(0.0), "nothing to ask about yet");
        link.note_request(0, "/r", true);
        assert!(link.push_due(0.0));
        let push = link.take_push(0.0, 0.95, &names());
        assert_eq!(push.keys.len(), 1);
        assert!(push.keys[0].buckets.is_empty(), "asks, has nothing to tell");
        assert!(!link.push_due(1.0), "one in flight");
    }

    #[test]
    fn pushes_per_minute_follow_the_interval_and_the_request_count() {
        // 100 rps: every 5 s. 1,000 rps: every 1,000 requests (1 s).
        assert_eq!(pushes_at(100.0, 60.0), 12);
        assert_eq!(pushes_at(1_000.0, 60.0), 60);
    }

    #[test]
    fn delta_carries_samples_and_origin_counts_then_starts_over() {
        let mut link = PopLink::new(params());
        link.note_request(0, "/r", true);
        link.record_sample(0, "/r", Sample::Completed(42.0));
        link.record_response(1, true);
        link.record_hedge();
        let push = link.take_push(0.0, 0.95, &names());
        assert_eq!(push.keys[0].sketch().count(), 1);
        assert_eq!((push.eligible, push.hedges), (1, 1));
        assert_eq!(push.origins[0].origin, "b");
        assert_eq!(push.origins[0].errors_5xx, 1);
        link.push_succeeded(&reply(None, 0.0), 100, 1.0, &names());
        let next = link.take_push(2.0, 0.95, &names());
        assert!(next.keys.is_empty() && next.origins.is_empty() && next.eligible == 0);
    }

    #[test]
    fn failures_back_off_exponentially_up_to_the_cap() {
        let mut link = PopLink::new(params());
        let mut now = 0.0;
        let mut waits = Vec::new();
        for _ in 0..5 {
            link.note_request(0, "/r", true);
            link.take_push(now, 0.95, &names());
            link.push_failed(now);
            let failed_at = now;
            // Traffic goes on (enough not to be quiet); the push waits for the back-off.
            for _ in 0..QUIET_PUSH_REQUESTS {
                link.note_request(0, "/r", true);
            }
            while !link.push_due(now) && now - failed_at < 1e6 {
                now += 1_000.0;
            }
            waits.push(now - failed_at);
        }
        assert_eq!(waits, vec![5_000.0, 10_000.0, 20_000.0, 40_000.0, 40_000.0]);
        assert_eq!(link.counts().failed, 5);
        assert_eq!(link.counts().failing_in_a_row, 5);
    }

    #[test]
    fn pop_answers_are_used_until_stale() {
        let mut link = PopLink::new(params());
        link.note_request(0, "/r", true);
        link.take_push(0.0, 0.95, &names());
        link.push_succeeded(&reply(Some(80.0), 0.2), 100, 0.0, &names());
        assert_eq!(link.estimate(0, "/r", 1.0).map(|e| e.value_ms), Some(80.0));
        assert!(link.over_budget(0.12, 1.0));
        assert!(!link.over_budget(0.25, 1.0));
        assert_eq!(link.estimate(0, "/r", 60_000.0), None);
        assert!(!link.over_budget(0.12, 60_000.0));
    }

    #[test]
    fn a_disabled_link_never_pushes() {
        let mut link = PopLink::new(PopLinkParams {
            enabled: false,
            ..params()
        });
        link.note_request(0, "/r", true);
        assert!(!link.push_due(0.0));
    }
}
