//! The event loop: arrivals, legs at origins, hedge timers and deadlines on
//! one virtual clock, every decision made by each isolate's [`Hedger`] (and,
//! where the scenario's answers are cacheable, by the isolate itself).

mod cached;
mod event_loop;
mod intents;
mod pop;
mod serving;
mod setup;
mod tape;

use std::cmp::Ordering;

pub use cached::CacheCounts;
use cached::{CacheSide, CachedRequest};
use intents::{Intent, Intents};
use std::collections::{BTreeMap, BinaryHeap};
pub use tape::{Tape, TapeEntry};

use crate::vec_map::VecMap;

use super::isolate_cpu::IsolateCpu;
use super::origin::Origin;
use super::rng::Rng;
use super::scenario::Scenario;
use super::timeline::Timeline;
use crate::config::{self, ConfigError};
use crate::isolate::Isolate;
use crate::no_hedge::{HedgeDenied, NoHedge};
use crate::pop::aggregate::PopAggregate;
use crate::pop::push::{Push, PushReply};
use crate::pop::upkeep::PushLimiter;
use crate::race::Leg;
use crate::race::{Action, Hedger, RaceEnd, RacePlan, RaceState};
use crate::request::eligibility::Eligibility;

/// One configuration to run: a name for the report and its `HEDGE_*` vars
/// (`HEDGE_ORIGINS` is filled in from the scenario).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Configuration {
    /// Its row label.
    pub name: String,
    /// `HEDGE_*` vars on top of the defaults.
    pub vars: VecMap<String, String>,
}

/// What to simulate.
#[derive(Debug, Clone)]
pub struct SimParams {
    /// The origins.
    pub scenario: Scenario,
    /// Arrivals per second, PoP-wide.
    pub rate_rps: f64,
    /// Measured seconds (after the warm-up).
    pub seconds: f64,
    /// Seconds run before measuring.
    pub warmup_seconds: f64,
    /// Isolates the arrivals are spread over (uniformly at random).
    pub isolates: usize,
    /// Poisson arrivals (else evenly spaced).
    pub poisson: bool,
    /// The same seed gives the same numbers.
    pub seed: u64,
    /// Time the Worker itself adds to every request, ms (workerd: ~1.5).
    pub worker_overhead_ms: f64,
    /// The PoP aggregator, with its round trip in ms; `None`: isolates work alone.
    pub aggregator_rtt_ms: Option<f64>,
    /// Pushes per second the aggregator takes before it sheds (the Worker's
    /// is [`SHED_ABOVE_PUSHES_PER_S`], measured in workerd).
    pub aggregator_capacity_per_s: f64,
    /// Route keys the requests are spread over, uniformly (`/r0`, `/r1`, ...).
    pub routes: usize,
    /// Each isolate's event loop and what each step costs it; `None`: an
    /// isolate that costs nothing and never queues.
    pub isolate_cpu: Option<IsolateCpu>,
}

/// What one configuration's run measured (after the warm-up).
#[derive(Debug, Clone, Default)]
pub struct RunResult {
    /// Client-seen latency of every measured request, ms.
    pub latencies_ms: Vec<f64>,
    /// Measured requests.
    pub requests: u64,
    /// Hedges (or retries) sent for them (and for background refreshes).
    pub hedges: u64,
    /// Requests (and refreshes) the hedge's answer served.
    pub hedge_wins: u64,
    /// Legs aborted before they answered.
    pub aborted: u64,
    /// Origin time spent on all legs, ms.
    pub origin_work_ms: f64,
    /// Origin time spent on legs later aborted, ms.
    pub wasted_ms: f64,
    /// Legs sent to each origin.
    pub per_origin: Vec<u64>,
    /// Requests the client saw fail (5xx, 502 for both failed, 504).
    pub errors: u64,
    /// Requests simulated in all (warm-up included).
    pub simulated: u64,
    /// Pushes the aggregator merged.
    pub pushes: u64,
    /// Pushes the aggregator shed (past its capacity).
    pub pushes_shed: u64,
    /// Hedges sent, by why (delay, stall, failure).
    pub hedge_causes: BTreeMap<&'static str, u64>,
    /// Requests at or above the run's p99 that got no hedge, by why not.
    pub slow_unhedged: BTreeMap<&'static str, u64>,
    /// The measured requests second by second (by arrival).
    pub timeline: Timeline,
    /// Third attempts sent after both legs failed fast.
    pub third_attempts: u64,
    /// Measured requests that got no hedge because the isolate was busy.
    pub isolate_busy_skips: u64,
    /// ... and hedges left out because their cause stopped winning.
    pub unpaid_skips: u64,
    /// The share of each isolate's time its event loop was busy, measured.
    pub isolate_busy_share: f64,
    /// Mean wait of an event for its isolate's loop, ms (measured requests' events).
    pub mean_loop_wait_ms: f64,
    /// Every measured request raced at the origins, and the origins' queues,
    /// as the hindsight bound replays them.
    pub tape: Tape,
    /// What the cache did (a scenario with cacheable answers).
    pub cache: CacheCounts,
    /// Every measured request that got no hedge: (latency, why not).
    unhedged: Vec<(f64, &'static str)>,
    loop_waits: (f64, u64),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Arrive,
    /// An arrival waiting for its isolate's loop.
    TakeUp {
        isolate: u32,
        route: u32,
        arrival_ms: f64,
    },
    /// A leg's answer reaches the PoP.
    Answer {
        req: u32,
        leg: u8,
    },
    /// A leg reaches its origin (it queues or starts).
    AtOrigin {
        req: u32,
        leg: u8,
    },
    /// A worker at this origin finishes a job.
    WorkerFree {
        origin: u8,
    },
    Timer {
        req: u32,
    },
    Deadline {
        req: u32,
    },
    /// An isolate's push reaches the aggregator.
    PushArrives {
        push: u32,
    },
    /// The aggregator's reply reaches the isolate.
    ReplyArrives {
        push: u32,
    },
    /// A waiter on a coalesced flight polls it.
    FlightPoll {
        req: u32,
    },
    /// The cache answers a lookup (`coalesced`: after a flight that stored).
    CacheRead {
        req: u32,
        coalesced: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Scheduled {
    at: f64,
    seq: u64,
    event: Event,
}

impl Eq for Scheduled {}

impl Ord for Scheduled {
    // Earliest first (BinaryHeap is a max-heap); ties in scheduling order.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .total_cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// One leg's life at its origin.
#[derive(Debug, Clone, Copy, Default)]
struct LegSim {
    origin: u8,
    /// Legs of this request sent to that origin before this one.
    attempt: u8,
    sent_ms: f64,
    /// When its answer reaches the PoP (once it runs).
    answered_ms: Option<f64>,
    /// Started running at the origin (`None`: still queued or never sent).
    started_ms: Option<f64>,
    status: u16,
    /// Aborted by the race (the origin may still be working on it).
    aborted: bool,
    sent: bool,
}

#[derive(Debug)]
struct Request {
    isolate: u32,
    arrival_ms: f64,
    measured: bool,
    race: Option<RaceState>,
    legs: [LegSim; 2],
    /// Legs sent to each origin so far.
    sent_to: [u8; MAX_ORIGINS],
    /// The primary as first sent: its origin, send time and queue wait.
    primary: LegSim,
    /// Its part in the cache (a scenario with cacheable answers).
    cached: Option<Box<CachedRequest>>,
}

/// Origins a scenario may have (the draws key and the per-request counts).
const MAX_ORIGINS: usize = 8;

struct Sim<'a> {
    params: &'a SimParams,
    now: f64,
    seq: u64,
    queue: BinaryHeap<Scheduled>,
    isolates: Vec<Isolate>,
    /// The runtime's cache and its traffic (a scenario with cacheable answers).
    cache: Option<CacheSide>,
    origins: Vec<Origin>,
    requests: Vec<Request>,
    rng: Rng,
    result: RunResult,
    measure_from_ms: f64,
    aggregator: Option<PopAggregate>,
    push_limiter: PushLimiter,
    /// Pushes in flight: (isolate, push, its size, the reply once made).
    pushes: Vec<PushInFlight>,
    origin_names: Vec<String>,
    route_names: Vec<String>,
    /// When each isolate's event loop is next free.
    loop_free_at: Vec<f64>,
    /// Loop time spent per isolate while measuring.
    loop_busy_ms: f64,
}

/// A push between an isolate and the aggregator.
type PushInFlight = (u32, Option<Push>, usize, Option<PushReply>);

const GET: Eligibility = Eligibility::Hedgeable {
    buffer_body: false,
    peer_only: false,
};

/// Runs `configuration` on `params`; the same inputs give the same result.
pub fn run(
    params: &SimParams,
    configuration: &Configuration,
) -> Result<RunResult, Vec<ConfigError>> {
    let mut vars = configuration.vars.clone();
    let origins: Vec<String> = (0..params.scenario.origins.len())
        .map(|i| format!(r#"{{"name":"o{i}","url":"http://o{i}.sim","zone":"z{i}"}}"#))
        .collect();
    vars.insert("HEDGE_ORIGINS".into(), format!("[{}]", origins.join(",")));
    if params.scenario.origins.len() > MAX_ORIGINS {
        return Err(vec![ConfigError {
            key: "HEDGE_ORIGINS".into(),
            reason: format!("the simulator models at most {MAX_ORIGINS} origins"),
        }]);
    }
    let hedge_params = config::parse(&vars)?;
    let mut sim = Sim::new(params, &hedge_params);
    let end_ms = (params.warmup_seconds + params.seconds) * 1000.0;
    sim.schedule(0.0, Event::Arrive);
    while let Some(next) = sim.queue.pop() {
        sim.now = next.at;
        match next.event {
            Event::Arrive => {
                if sim.now < end_ms {
                    sim.arrive();
                    let gap = 1000.0 / params.rate_rps;
                    let gap = if params.poisson {
                        sim.rng.exponential(gap)
                    } else {
                        gap
                    };
                    sim.schedule(sim.now + gap, Event::Arrive);
                }
            }
            Event::TakeUp {
                isolate,
                route,
                arrival_ms,
            } => sim.take_up(isolate as usize, route as usize, arrival_ms),
            Event::AtOrigin { req, leg } => sim.at_origin(req, leg),
            Event::WorkerFree { origin } => sim.worker_free(origin),
            Event::Answer { req, leg } => sim.answer(req, leg),
            Event::Timer { req } => {
                if !sim.waits_for_loop(req, next.event) {
                    sim.on_race(req, |h, s, now| h.timer_fired(s, now));
                }
            }
            Event::Deadline { req } => {
                if !sim.waits_for_loop(req, next.event) {
                    sim.on_race(req, |h, s, now| h.deadline_passed(s, now));
                }
            }
            Event::PushArrives { push } => sim.push_arrives(push),
            Event::ReplyArrives { push } => sim.reply_arrives(push),
            Event::FlightPoll { req } => sim.flight_poll(req),
            Event::CacheRead { req, coalesced } => sim.cache_read(req, coalesced),
        }
    }
    Ok(sim.summarise())
}

impl Sim<'_> {
    fn schedule(&mut self, at: f64, event: Event) {
        self.seq += 1;
        self.queue.push(Scheduled {
            at,
            seq: self.seq,
            event,
        });
    }

    fn arrive(&mut self) {
        let isolate = self.rng.below(self.isolates.len());
        let route = self.rng.below(self.route_names.len());
        self.take_up(isolate, route, self.now);
    }

    /// The isolate takes up a request that arrived at `arrival_ms` (now, or
    /// later when its loop was busy).
    fn take_up(&mut self, isolate: usize, route: usize, arrival_ms: f64) {
        if let Some(free) = self.loop_busy_until(isolate) {
            let event = Event::TakeUp {
                isolate: isolate as u32,
                route: route as u32,
                arrival_ms,
            };
            self.schedule(free, event);
            return;
        }
        self.note_wait(arrival_ms);
        let admit_ms = self.params.isolate_cpu.map_or(0.0, |c| c.admit_ms);
        self.spend(isolate, admit_ms);
        if self.cache.is_some() {
            return self.take_up_cached(isolate, route, arrival_ms);
        }
        let hedger = self.isolates[isolate].hedger_mut();
        let plan = hedger.plan(GET, &self.route_names[route], self.now);
        let id = self.new_request(isolate, arrival_ms);
        self.begin_race(id, plan);
    }

    /// A request that arrived at `arrival_ms`, taken up by `isolate`: its
    /// index.
    fn new_request(&mut self, isolate: usize, arrival_ms: f64) -> u32 {
        let id = self.requests.len() as u32;
        self.requests.push(Request {
            isolate: isolate as u32,
            arrival_ms,
            measured: arrival_ms >= self.measure_from_ms,
            race: None,
            legs: [LegSim::default(); 2],
            sent_to: [0; MAX_ORIGINS],
            primary: LegSim::default(),
            cached: None,
        });
        id
    }

    /// Request `id`'s race begins now, as `plan` says: its primary goes out,
    /// its hedge timer and deadline are set.
    fn begin_race(&mut self, id: u32, plan: RacePlan) {
        let now = self.now;
        let r = &mut self.requests[id as usize];
        let hedger = self.isolates[r.isolate as usize].hedger_mut();
        let delay = plan.first_timer_ms();
        let primary = plan.primary;
        r.race = Some(hedger.start(plan, now));
        let timeout = hedger.params().timeout_ms;
        self.send(id, Leg::Primary, primary);
        let r = &mut self.requests[id as usize];
        r.primary = r.legs[Leg::Primary.index()];
        if let Some(d) = delay {
            self.schedule(now + d, Event::Timer { req: id });
        }
        self.schedule(now + timeout, Event::Deadline { req: id });
    }

    fn send(&mut self, req: u32, leg: Leg, origin: usize) {
        let now = self.now;
        let rtt = self.origins[origin].spec.rtt_ms;
        let r = &mut self.requests[req as usize];
        let attempt = r.sent_to[origin];
        r.sent_to[origin] = attempt.saturating_add(1);
        r.legs[leg.index()] = LegSim {
            origin: origin as u8,
            attempt,
            sent_ms: now,
            sent: true,
            ..LegSim::default()
        };
        if r.measured {
            self.result.per_origin[origin] += 1;
        }
        self.schedule(
            now + rtt / 2.0,
            Event::AtOrigin {
                req,
                leg: leg.index() as u8,
            },
        );
    }

    /// Hands an event to the request's isolate and carries out the action.
    fn on_race(
        &mut self,
        req: u32,
        event: impl FnOnce(&mut Hedger, &mut RaceState, f64) -> Action,
    ) {
        let now = self.now;
        let r = &mut self.requests[req as usize];
        let Some(mut race) = r.race.take() else {
            return; // the race is over
        };
        let isolate = r.isolate as usize;
        let hedger = self.isolates[isolate].hedger_mut();
        let action = event(hedger, &mut race, now);
        let (intents, end) = Intents::of(hedger, &mut race, action, now);
        if let Some(cpu) = self.params.isolate_cpu {
            let mut ms = cpu.timer_ms;
            for intent in intents.list.iter().take(intents.len).flatten() {
                ms += match intent {
                    // Only a leg in flight has anything to abort.
                    Intent::Abort(leg)
                        if race.leg(*leg).started_ms.is_some()
                            && race.leg(*leg).finished_ms.is_none() =>
                    {
                        cpu.abort_ms
                    }
                    Intent::Abort(_) => 0.0,
                    Intent::SendHedge(_) => cpu.leg_ms,
                };
            }
            if end.is_some_and(|e| e.kept_leg().is_some()) {
                ms += cpu.respond_ms;
            }
            self.spend(isolate, ms);
        }
        // Carried out in the order the Hedger asked (in retry mode, the
        // primary is aborted before the hedge goes out).
        for intent in intents.list.into_iter().take(intents.len).flatten() {
            match intent {
                Intent::Abort(leg) => {
                    if race.leg(leg).finished_ms.is_none() {
                        self.abort(req, leg);
                    }
                }
                Intent::SendHedge(origin) => self.send(req, Leg::Hedge, origin),
            }
        }
        match end {
            Some(end) => self.finish(req, &race, end),
            None => {
                if let Some(ms) = race.take_rearm() {
                    self.schedule(now + ms, Event::Timer { req });
                }
                self.requests[req as usize].race = Some(race);
            }
        }
    }

    fn abort(&mut self, req: u32, leg: Leg) {
        let now = self.now;
        let measured = self.requests[req as usize].measured;
        let l = &mut self.requests[req as usize].legs[leg.index()];
        if !l.sent || l.aborted {
            return;
        }
        l.aborted = true;
        if measured {
            self.result.aborted += 1;
            // Work done so far is wasted; a job in service keeps its worker
            // (the origin finishes it), but the race no longer waits for it.
            let worked = l.started_ms.map_or(0.0, |s| now - s);
            self.result.wasted_ms += worked;
            self.result.origin_work_ms += worked;
        }
    }

    /// The race is over (its losers already aborted): books the request.
    fn finish(&mut self, req: u32, race: &RaceState, end: RaceEnd) {
        // A cached request's completion is the isolate's (it says the
        // status); a refresh's ends there: nobody waits on it.
        let answered = match self.requests[req as usize].cached.is_some() {
            true => Some(self.complete_cached(req, race, end)),
            false => None,
        };
        if matches!(answered, Some((_, true))) {
            // Its hedges are extra origin requests all the same.
            let measured = self.requests[req as usize].measured;
            self.result.hedges += u64::from(measured && race.hedge_sent());
            self.result.hedge_wins += u64::from(measured && end == RaceEnd::Won(Leg::Hedge));
            return;
        }
        self.maybe_push(self.requests[req as usize].isolate);
        let primary = usize::from(self.requests[req as usize].legs[Leg::Primary.index()].origin);
        let Some(latency) = self.book_latency(req, race.hedge_sent(), primary) else {
            return;
        };
        let r = &self.requests[req as usize];
        let error = match (answered, end) {
            (Some((status, _)), _) => status >= 500,
            (None, RaceEnd::Won(leg)) => race.leg(leg).status.is_some_and(|s| s >= 500),
            (None, _) => true,
        };
        let kept_answer_ms = match end {
            RaceEnd::Won(leg) => r.legs[leg.index()].answered_ms.unwrap_or(self.now),
            _ => self.now,
        };
        let first = r.primary;
        let at_origin = first.sent_ms + self.origins[usize::from(first.origin)].spec.rtt_ms / 2.0;
        let tape = TapeEntry {
            req,
            primary: first.origin,
            sent_ms: first.sent_ms,
            primary_wait_ms: (first.started_ms.unwrap_or(self.now) - at_origin).max(0.0),
            overhead_ms: latency - (kept_answer_ms - first.sent_ms),
        };
        let res = &mut self.result;
        res.tape.requests.push(tape);
        res.hedges += u64::from(race.hedge_sent());
        res.hedge_wins += u64::from(end == RaceEnd::Won(Leg::Hedge));
        res.third_attempts += u64::from(race.third_attempt_sent());
        res.errors += u64::from(error);
        if let (true, Some(cause)) = (race.hedge_sent(), race.hedge_cause) {
            *res.hedge_causes.entry(cause.as_str()).or_default() += 1;
        }
        if !race.hedge_sent() {
            let busy = race.no_hedge == Some(NoHedge::Denied(HedgeDenied::IsolateBusy));
            res.isolate_busy_skips += u64::from(busy);
            res.unhedged
                .push((latency, race.no_hedge.map_or("none", |n| n.as_str())));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::pop::upkeep::SHED_ABOVE_PUSHES_PER_S;
    use crate::sim::scenario::scenario;

    /// One isolate at 200 rps on `name`, seed 1 (the simulator's tests share it).
    pub(crate) fn params(name: &str, seconds: f64) -> SimParams {
        SimParams {
            scenario: scenario(name).expect("known scenario"),
            rate_rps: 200.0,
            seconds,
            warmup_seconds: 3.0,
            isolates: 1,
            poisson: false,
            seed: 1,
            worker_overhead_ms: 1.5,
            aggregator_rtt_ms: None,
            aggregator_capacity_per_s: SHED_ABOVE_PUSHES_PER_S,
            routes: 1,
            isolate_cpu: None,
        }
    }

    /// The defaults with these `HEDGE_*` vars on top.
    pub(crate) fn config(pairs: &[(&str, &str)]) -> Configuration {
        Configuration {
            name: "test".into(),
            vars: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let p = params("heavy-tail", 5.0);
        let a = run(&p, &config(&[])).expect("runs");
        let b = run(&p, &config(&[])).expect("runs");
        assert_eq!(a.latencies_ms, b.latencies_ms);
        assert_eq!(a.hedges, b.hedges);
        assert_eq!(a.requests, 1_000);
    }

    #[test]
    fn hedging_off_sends_one_leg_per_request() {
        let r = run(
            &params("heavy-tail", 5.0),
            &config(&[("HEDGE_MODE", "off")]),
        )
        .expect("runs");
        assert_eq!(r.hedges, 0);
        assert_eq!(r.per_origin.iter().sum::<u64>(), r.requests);
    }

    #[test]
    fn adaptive_hedging_cuts_the_heavy_tail_within_budget() {
        let p = params("heavy-tail", 15.0);
        let mut off = run(&p, &config(&[("HEDGE_MODE", "off")])).expect("runs");
        let mut on = run(&p, &config(&[])).expect("runs");
        let p99 = |r: &mut RunResult| super::super::percentile(&mut r.latencies_ms, 0.99);
        let (off99, on99) = (p99(&mut off), p99(&mut on));
        assert!(on99 < 0.3 * off99, "p99 {on99} vs pass-through {off99}");
        let extra = on.hedges as f64 / on.requests as f64;
        assert!(extra <= 0.12, "extra load {extra}");
    }

    #[test]
    fn a_pop_of_many_isolates_with_the_aggregator_holds_the_budget() {
        let p = SimParams {
            rate_rps: 2_000.0,
            isolates: 100,
            aggregator_rtt_ms: Some(5.0),
            aggregator_capacity_per_s: SHED_ABOVE_PUSHES_PER_S,
            ..params("heavy-tail", 10.0)
        };
        let r = run(&p, &config(&[])).expect("runs");
        assert!(r.pushes > 100, "{} pushes", r.pushes);
        let extra = r.hedges as f64 / r.requests as f64;
        assert!(extra <= 0.14, "extra load {extra}");
    }

    #[test]
    fn hedging_comes_back_within_half_a_window_after_an_overload_spell() {
        // The spell covers measured seconds 12 to 27; the latency window is
        // 60 s, so a delay chosen on the whole window would hedge little
        // until the spell slid out of it.
        let r = run(&params("overload-spell", 60.0), &config(&[])).expect("runs");
        let back = r.timeline.back_after(12, 27, 5, 0.8, |b| b.hedge_pct);
        assert!(
            back.is_some_and(|s| s <= 30),
            "hedging back after {back:?} s"
        );
    }

    #[test]
    fn a_busy_isolate_makes_hedging_worse_and_the_default_does_not_hedge_there() {
        // Poisson arrivals at 350 rps keep the lab-calibrated isolate ~87% busy.
        let p = SimParams {
            rate_rps: 350.0,
            poisson: true,
            isolate_cpu: Some(IsolateCpu::lab()),
            worker_overhead_ms: 0.3,
            ..params("busy-isolate", 20.0)
        };
        let p99 = |r: &mut RunResult| super::super::percentile(&mut r.latencies_ms, 0.99);
        let mut off = run(&p, &config(&[("HEDGE_MODE", "off")])).expect("runs");
        // Hedging at p95 costs here: each leg is the isolate's work.
        let mut fixed = run(&p, &config(&[("HEDGE_POLICY", "fixed-quantile")])).expect("runs");
        let mut default = run(&p, &config(&[])).expect("runs");
        let (off99, fixed99, default99) = (p99(&mut off), p99(&mut fixed), p99(&mut default));
        assert!(
            fixed99 > off99 * 1.03,
            "hedging at p95 should cost: {fixed99} vs {off99}"
        );
        // The default sees too little to gain on an origin tail this short
        // (the load price), and the isolate guard stops what it would send.
        let extra = default.hedges as f64 / default.requests as f64;
        assert!(extra <= 0.01, "extra {extra}");
        assert!(default99 <= off99 * 1.03, "{default99} vs {off99}");
    }

    #[test]
    fn a_third_attempt_saves_double_fast_failures() {
        let p = params("fast-503-both", 30.0);
        let without = run(
            &p,
            &config(&[("HEDGE_TUNING", r#"{"third_attempt":false}"#)]),
        )
        .expect("runs");
        let with = run(&p, &config(&[])).expect("runs");
        assert!(without.errors > 0, "2% x 2% of 6,000 requests fail twice");
        assert_eq!(with.errors, 0);
        assert!(with.third_attempts > 0);
    }

    #[test]
    fn a_queueing_origin_keeps_aborted_work_in_service() {
        let r = run(&params("overload", 5.0), &config(&[])).expect("runs");
        assert!(r.requests > 0);
        assert!(r.wasted_ms <= r.origin_work_ms);
    }
}
