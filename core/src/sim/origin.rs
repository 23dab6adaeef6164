//! Modelled origins: a latency distribution, fast failures, correlated
//! stop-the-world stalls and, optionally, a finite number of workers with a
//! queue in front, so overload is real.

use super::empirical::Empirical;
use std::collections::VecDeque;

use super::rng::Rng;

/// How long an origin takes to serve a request (its own work, no network).
#[derive(Debug, Clone, PartialEq)]
pub enum LatencyModel {
    /// Lognormal with this median (ms) and sigma.
    Lognormal {
        /// Median, ms.
        median: f64,
        /// Shape.
        sigma: f64,
    },
    /// A base model, plus `extra_ms` for a fraction `p` of requests
    /// (packet loss and retransmits, rare long stalls: `extra_max_ms` makes
    /// the extra uniform in [extra_ms, extra_max_ms]).
    Spikes {
        /// The model without the spikes.
        base: Box<LatencyModel>,
        /// Fraction of requests that get the extra.
        p: f64,
        /// Extra milliseconds (lower bound).
        extra_ms: f64,
        /// Upper bound of the extra (equal to `extra_ms` for a fixed one).
        extra_max_ms: f64,
    },
    /// One of two models: `a` with probability `p`, else `b` (a cliff, a cache).
    Mixture {
        /// Probability of `a`.
        p: f64,
        /// The first model.
        a: Box<LatencyModel>,
        /// The second model.
        b: Box<LatencyModel>,
    },
    /// As measured (the advisor's replay of a PoP's own latency).
    Measured(Box<Empirical>),
}

impl LatencyModel {
    /// One draw, ms.
    pub fn sample(&self, rng: &mut Rng) -> f64 {
        match self {
            LatencyModel::Lognormal { median, sigma } => rng.lognormal(*median, *sigma),
            LatencyModel::Spikes {
                base,
                p,
                extra_ms,
                extra_max_ms,
            } => {
                let x = base.sample(rng);
                if rng.uniform() < *p {
                    x + extra_ms + rng.uniform() * (extra_max_ms - extra_ms)
                } else {
                    x
                }
            }
            LatencyModel::Mixture { p, a, b } => {
                if rng.uniform() < *p {
                    a.sample(rng)
                } else {
                    b.sample(rng)
                }
            }
            LatencyModel::Measured(m) => m.at(rng.uniform()),
        }
    }
}

/// Stop-the-world stalls at exponential intervals: every request in service
/// during a stall is stretched by the part of the stall it overlaps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StallSpec {
    /// Mean time between stalls, ms.
    pub mean_interval_ms: f64,
    /// Shortest stall, ms.
    pub min_ms: f64,
    /// Longest stall, ms.
    pub max_ms: f64,
}

/// A spell during which an origin behaves differently (it turns slow or
/// starts failing, then recovers).
#[derive(Debug, Clone, PartialEq)]
pub struct Episode {
    /// When it starts, ms of simulated time (warm-up included).
    pub from_ms: f64,
    /// When it ends.
    pub until_ms: f64,
    /// Service time meanwhile.
    pub latency: LatencyModel,
    /// Fast failures meanwhile.
    pub fast_failure: Option<(f64, u16, f64)>,
}

/// Everything about one modelled origin.
#[derive(Debug, Clone, PartialEq)]
pub struct OriginSpec {
    /// Service time.
    pub latency: LatencyModel,
    /// A fraction of requests answered `status` after `after_ms`.
    pub fast_failure: Option<(f64, u16, f64)>,
    /// Correlated stalls.
    pub stalls: Option<StallSpec>,
    /// Workers serving at once; `None` is unlimited.
    pub workers: Option<usize>,
    /// Network round trip between the PoP and the origin, ms.
    pub rtt_ms: f64,
    /// A spell of different behaviour, if any.
    pub episode: Option<Episode>,
}

/// The answer an origin will give one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Service {
    /// Running time once a worker has it, ms (stalls included).
    pub(crate) duration_ms: f64,
    /// The status it answers with.
    pub(crate) status: u16,
}

/// A request waiting for (or holding) a worker.
pub(crate) type Job = (u32, u8);

/// An origin's state during a run.
#[derive(Debug)]
pub(crate) struct Origin {
    pub(crate) spec: OriginSpec,
    seed: u64,
    index: u64,
    stall_rng: Rng,
    /// Stalls as [start, end), generated as far as needed.
    stalls: Vec<(f64, f64)>,
    stall_horizon: f64,
    pub(crate) busy: usize,
    pub(crate) queue: VecDeque<Job>,
    /// Asked out of time order (the hindsight replay): keeps every stall.
    replay: bool,
}

impl Origin {
    pub(crate) fn new(spec: OriginSpec, seed: u64, index: u64) -> Self {
        Self {
            spec,
            seed,
            index,
            stall_rng: Rng::new(seed, 200 + index),
            stalls: Vec::new(),
            stall_horizon: 0.0,
            busy: 0,
            queue: VecDeque::new(),
            replay: false,
        }
    }

    /// The same origin for a replay that asks about any time in any order.
    pub(crate) fn for_replay(spec: OriginSpec, seed: u64, index: u64) -> Self {
        Self {
            replay: true,
            ..Self::new(spec, seed, index)
        }
    }

    /// Whether a worker is free for a request arriving now.
    pub(crate) fn has_free_worker(&self) -> bool {
        self.spec.workers.is_none_or(|w| self.busy < w)
    }

    /// The draws of attempt `attempt` of request `req` at this origin. Keyed
    /// by request rather than taken in turn, so every policy, and the
    /// hindsight bound replaying the run, meets the same service for the
    /// same request whatever else it sent.
    pub(crate) fn draws(&self, req: u32, attempt: u8) -> Rng {
        let key = (self.index << 40) | (u64::from(attempt) << 32) | u64::from(req);
        // Started at a hash of the key, not at the key: SplitMix streams
        // whose states lie a few steps apart repeat each other's draws, and
        // neighbouring requests' keys are a step apart.
        Rng::from_state(Rng::new(self.seed, 1 << 48 | key).next_u64())
    }

    /// The service of a request that starts running at `start_ms`, from its
    /// own `draws` (see [`Origin::draws`]).
    pub(crate) fn serve(&mut self, start_ms: f64, draws: &mut Rng) -> Service {
        let episode =
            (self.spec.episode.as_ref()).filter(|e| (e.from_ms..e.until_ms).contains(&start_ms));
        let (latency, fast_failure) = match episode {
            Some(e) => (&e.latency, e.fast_failure),
            None => (&self.spec.latency, self.spec.fast_failure),
        };
        if let Some((fraction, status, after_ms)) = fast_failure {
            if draws.uniform() < fraction {
                return Service {
                    duration_ms: after_ms,
                    status,
                };
            }
        }
        let work = latency.sample(draws).max(0.0);
        let duration_ms = match self.spec.stalls {
            Some(spec) => self.stretch(spec, start_ms, work) - start_ms,
            None => work,
        };
        Service {
            duration_ms,
            status: 200,
        }
    }

    /// The end of `work_ms` of running time begun at `start_ms`, stalls included.
    fn stretch(&mut self, spec: StallSpec, start_ms: f64, work_ms: f64) -> f64 {
        let mut end = start_ms + work_ms;
        self.extend_stalls(spec, end + spec.max_ms * 4.0);
        // Stalls that ended long before are never needed again by a run
        // moving forward in time; a replay asks out of order and keeps them.
        let first = self
            .stalls
            .partition_point(|&(_, e)| e <= start_ms - spec.max_ms * 4.0);
        if first > 1_000 && !self.replay {
            self.stalls.drain(..first);
        }
        let mut i = self.stalls.partition_point(|&(_, e)| e <= start_ms);
        while i < self.stalls.len() {
            let (s, e) = self.stalls[i];
            if s >= end {
                break;
            }
            end += e - s.max(start_ms);
            self.extend_stalls(spec, end + spec.max_ms * 4.0);
            i += 1;
        }
        end
    }

    fn extend_stalls(&mut self, spec: StallSpec, until: f64) {
        while self.stall_horizon < until {
            let start = self.stall_horizon + self.stall_rng.exponential(spec.mean_interval_ms);
            let end = start + spec.min_ms + self.stall_rng.uniform() * (spec.max_ms - spec.min_ms);
            self.stalls.push((start, end));
            self.stall_horizon = end;
        }
    }
}
