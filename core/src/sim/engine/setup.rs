//! A simulation's setup from its parameters, the booking of each measured
//! request as it is answered, and its summary once the last event has run.

use std::collections::BinaryHeap;

use super::{CacheCounts, CacheSide, RunResult, Sim, SimParams, Tape};
use crate::config;
use crate::isolate::Isolate;
use crate::pop::aggregate::PopAggregate;
use crate::pop::upkeep::PushLimiter;
use crate::sim::origin::Origin;
use crate::sim::rng::Rng;
use crate::sim::timeline::Timeline;

impl<'a> Sim<'a> {
    /// A simulation of `params` whose isolates run `hedge_params`, before
    /// its first arrival.
    pub(super) fn new(params: &'a SimParams, hedge_params: &config::Params) -> Self {
        Sim {
            params,
            now: 0.0,
            seq: 0,
            queue: BinaryHeap::new(),
            isolates: (0..params.isolates.max(1))
                .map(|i| {
                    Isolate::new(
                        hedge_params.clone(),
                        params.aggregator_rtt_ms.is_some(),
                        0.0,
                        Rng::new(params.seed, 1_000 + i as u64).next_u64(),
                    )
                })
                .collect(),
            aggregator: params
                .aggregator_rtt_ms
                .map(|_| PopAggregate::new(hedge_params.pop.aggregate)),
            push_limiter: PushLimiter::new(params.aggregator_capacity_per_s),
            pushes: Vec::new(),
            origin_names: (0..params.scenario.origins.len())
                .map(|i| format!("o{i}"))
                .collect(),
            route_names: (0..params.routes.max(1))
                .map(|i| format!("/r{i}"))
                .collect(),
            origins: params
                .scenario
                .origins
                .iter()
                .enumerate()
                .map(|(i, spec)| Origin::new(spec.clone(), params.seed, i as u64))
                .collect(),
            requests: Vec::new(),
            cache: (params.scenario.cache.clone()).map(|spec| CacheSide::new(spec, params.seed)),
            rng: Rng::new(params.seed, 1),
            result: RunResult {
                per_origin: vec![0; params.scenario.origins.len()],
                tape: Tape {
                    queue_waits: vec![Vec::new(); params.scenario.origins.len()],
                    ..Tape::default()
                },
                timeline: Timeline::new(params.scenario.origins.len()),
                ..RunResult::default()
            },
            measure_from_ms: params.warmup_seconds * 1000.0,
            loop_free_at: vec![0.0; params.isolates.max(1)],
            loop_busy_ms: 0.0,
        }
    }

    /// Books request `req`, answered now, when it is measured: its latency
    /// (the response leaves once its isolate's loop has done the work for
    /// it), in the timeline with `hedged` and its `primary` origin (none:
    /// `usize::MAX`) and among the run's latencies. `None` when unmeasured.
    pub(super) fn book_latency(&mut self, req: u32, hedged: bool, primary: usize) -> Option<f64> {
        let r = &self.requests[req as usize];
        if !r.measured {
            return None;
        }
        let done = self.loop_free_at[r.isolate as usize].max(self.now);
        let latency = done - r.arrival_ms + self.params.worker_overhead_ms;
        let arrived_s = (r.arrival_ms - self.measure_from_ms) / 1000.0;
        let res = &mut self.result;
        res.timeline.record(arrived_s, latency, hedged, primary);
        res.requests += 1;
        res.latencies_ms.push(latency);
        Some(latency)
    }

    /// The run's result, with what is summed over its isolates and requests.
    pub(super) fn summarise(mut self) -> RunResult {
        self.result.simulated = self.requests.len() as u64;
        for iso in &self.isolates {
            let h = iso.hedger();
            for origin in 0..self.params.scenario.origins.len() {
                if let Some(cells) = h.payoff.cells(origin) {
                    self.result.unpaid_skips += cells.iter().map(|c| c.left_out).sum::<u64>();
                }
            }
        }
        self.result.isolate_busy_share =
            self.loop_busy_ms / (self.params.seconds * 1000.0 * self.isolates.len() as f64);
        if let Some(side) = self.cache.take() {
            self.result.cache = CacheCounts {
                served: Self::served_counts(&self.isolates),
                ..side.counts
            };
        }
        let (wait_sum, waits) = self.result.loop_waits;
        self.result.mean_loop_wait_ms = if waits > 0 {
            wait_sum / waits as f64
        } else {
            0.0
        };
        let p99 = crate::sim::percentile::percentile(&mut self.result.latencies_ms.clone(), 0.99);
        for &(latency, why) in &self.result.unhedged {
            if latency >= p99 {
                *self.result.slow_unhedged.entry(why).or_default() += 1;
            }
        }
        self.result
    }
}
