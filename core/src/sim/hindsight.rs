//! The hindsight bound: the best fixed hedge delay `d`, and probability `q`
//! of hedging at it, chosen after the fact for the very arrivals, primaries
//! and origin draws of one run, at that run's own extra load (SingleR, SPAA
//! 2017, in its randomised form). No delay policy that sees only the past
//! can beat it by more than luck, so a policy's p99 over the bound's says how
//! far from the best it is.
//!
//! The replay keeps what the run did that is not the delay's choice: each
//! request's arrival, primary origin, the primary's queue wait and the
//! Worker's own time (overhead and loop waits), and the draws of every
//! origin, which are keyed by request ([`Origin::draws`]). The hedge goes to
//! the next origin after the primary or, where the origins are unlike, to
//! the fastest of them (the primary itself, as a new request, when it is the
//! fastest: what the Worker does when the peer is much slower): the target
//! is one more fixed choice made in hindsight, the better of the two. Like
//! the Worker, a fast failure is retried at once at the other origin and,
//! after two, once more at the first; a retry counts as the request's extra
//! leg, as a hedge does.
//!
//! A leg the run did not send meets the queue the run's own legs met at
//! that origin at that moment ([`Tape::queue_wait`]): the bound is held to
//! the run's own extra load, so the queues it would meet are much the run's.
//! What it leaves out: the queue its own choice of legs would make (more
//! hedges in one spell, fewer in another), so on the overload scenarios it
//! is still an estimate, no longer one that lets hedges skip the queue.
//! It keeps the run's primaries, so it is a paired yardstick: where the
//! slow share or the queues depend on where the primaries went (cliff,
//! overload-spell), another run of the same seed replays to a bound about
//! 1.5x apart at the same load (docs/lab.md, "What the bound is
//! conditioned on").

use super::engine::{SimParams, Tape, TapeEntry};
use super::origin::Origin;

/// The best (d, q) for one percentile, and what it gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BoundPoint {
    /// The hedge delay, ms (infinite: no hedge but retries).
    pub delay_ms: f64,
    /// The probability of hedging a request still unanswered at the delay.
    pub q: f64,
    /// The percentile it reaches, ms.
    pub latency_ms: f64,
    /// Whether the hedge goes to the fastest origin (else to the next one).
    pub to_fastest: bool,
}

/// The bound at one extra load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HindsightBound {
    /// The extra origin requests it was held to, % of requests.
    pub extra_pct: f64,
    /// The best p99, and the (d, q) that reaches it.
    pub p99: BoundPoint,
    /// The best p99.9, and its (d, q).
    pub p999: BoundPoint,
}

/// Delays the coarse sweep tries between 0 and a fifth past the delay that
/// spends the whole load with q = 1; the fine sweep then tries 40 across
/// the two coarse steps around the best. For a 100 ms range: 0.5 ms steps,
/// then 0.025 ms.
const COARSE_STEPS: usize = 240;
const FINE_STEPS: usize = 40;
/// Origins whose medians are this far apart (as a ratio) are unlike enough
/// for the bound to try hedging on the fastest.
const MEDIANS_APART: f64 = 1.25;

/// One request replayed: the primary, and the request with no hedge.
#[derive(Debug, Clone, Copy)]
struct Replayed {
    /// The primary's answer, ms after it was sent.
    primary_ms: f64,
    /// Whether that answer was good (below 500).
    primary_ok: bool,
    /// With no hedge (a failure retried): its latency (overhead included)
    /// and the legs it added.
    alone: (f64, u8),
    entry: TapeEntry,
}

/// A leg's answer: when (ms after the primary was sent) and whether good.
type Answer = (f64, bool);

/// The replay of a run's requests under a fixed (d, q) policy.
#[derive(Debug)]
pub struct Replay<'a> {
    params: &'a SimParams,
    tape: &'a Tape,
    origins: Vec<Origin>,
    requests: Vec<Replayed>,
    /// Hedges go to this origin (else to the next one after the primary).
    hedge_to: Option<usize>,
}

impl<'a> Replay<'a> {
    /// The requests of `tape` (one run of `params`) replayed.
    pub fn new(params: &'a SimParams, tape: &'a Tape) -> Self {
        let mut replay = Replay {
            params,
            tape,
            origins: (params.scenario.origins.iter().enumerate())
                .map(|(i, spec)| Origin::for_replay(spec.clone(), params.seed, i as u64))
                .collect(),
            requests: Vec::with_capacity(tape.requests.len()),
            hedge_to: None,
        };
        for &entry in &tape.requests {
            let p = usize::from(entry.primary);
            let rtt = replay.rtt(p);
            let start = entry.sent_ms + rtt / 2.0 + entry.primary_wait_ms;
            let (duration, status) = replay.serve(p, entry.req, 0, start);
            let primary = (rtt + entry.primary_wait_ms + duration, status < 500);
            let (ms, legs) = replay.play(entry, primary, None);
            replay.requests.push(Replayed {
                primary_ms: primary.0,
                primary_ok: primary.1,
                alone: (ms + entry.overhead_ms, legs),
                entry,
            });
        }
        replay
    }

    fn rtt(&self, origin: usize) -> f64 {
        self.params.scenario.origins[origin].rtt_ms
    }

    fn other(&self, origin: usize) -> usize {
        (origin + 1) % self.origins.len().max(1)
    }

    /// Attempt `attempt` of request `req` at `origin`, running from `start_ms`:
    /// its duration and status.
    fn serve(&mut self, origin: usize, req: u32, attempt: u8, start_ms: f64) -> (f64, u16) {
        let o = &mut self.origins[origin];
        let s = o.serve(start_ms, &mut o.draws(req, attempt));
        (s.duration_ms, s.status)
    }

    /// A leg to `origin` sent `at_ms` after the primary.
    fn leg(&mut self, e: TapeEntry, origin: usize, attempt: u8, at_ms: f64) -> Answer {
        let rtt = self.rtt(origin);
        let arrives = e.sent_ms + at_ms + rtt / 2.0;
        let wait = self.tape.queue_wait(origin, arrives);
        let (duration, status) = self.serve(origin, e.req, attempt, arrives + wait);
        (at_ms + rtt + wait + duration, status < 500)
    }

    /// The fastest origin, when the origins' typical answers are far enough
    /// apart for the hedge's target to matter: the median over the run's
    /// requests of what each origin would have answered them, the slowest at
    /// least [`MEDIANS_APART`] times the fastest. On origins alike the two
    /// targets differ only by their draws, and the better of two such sweeps
    /// credits the bound with luck (seeds 1-4, 60 s: hedging on the primary
    /// itself as the second sweep put the bound 0.3-1.3% lower on the
    /// scenarios of like origins). With one origin the two are one.
    fn fastest_apart(&mut self) -> Option<usize> {
        let mut medians = Vec::with_capacity(self.origins.len());
        for origin in 0..self.origins.len() {
            let rtt = self.rtt(origin);
            let mut answers = Vec::with_capacity(self.requests.len());
            for i in 0..self.requests.len() {
                let e = self.requests[i].entry;
                answers.push(self.serve(origin, e.req, 0, e.sent_ms + rtt / 2.0).0 + rtt);
            }
            if answers.is_empty() {
                return None;
            }
            let mid = answers.len() / 2;
            answers.select_nth_unstable_by(mid, f64::total_cmp);
            medians.push(answers[mid]);
        }
        let (fastest, &low) = (medians.iter().enumerate()).min_by(|a, b| a.1.total_cmp(b.1))?;
        let high = medians.iter().copied().fold(0.0, f64::max);
        (medians.len() > 1 && high >= MEDIANS_APART * low).then_some(fastest)
    }

    /// The request under the bound's rules, hedged `hedge_at` ms after its
    /// primary (if still unanswered then): when it is answered (ms after the
    /// primary was sent, overhead not included) and the legs it added. A
    /// leg that fails while no good answer is in is followed at once by a
    /// leg to the other origin, up to three legs.
    fn play(&mut self, e: TapeEntry, primary: Answer, hedge_at: Option<f64>) -> (f64, u8) {
        let p = usize::from(e.primary);
        let h = self.other(p);
        let (pa, ok) = primary;
        match hedge_at.filter(|&d| d < pa) {
            None if ok => (pa, 0),
            None => {
                let (ra, ok) = self.leg(e, h, 0, pa);
                if ok {
                    return (ra, 1);
                }
                (self.leg(e, p, 1, ra).0, 2)
            }
            Some(d) => {
                let target = self.hedge_to.unwrap_or(h);
                let hedge = self.leg(e, target, u8::from(target == p), d);
                let (first, first_origin, second) = if hedge.0 < pa {
                    (hedge, target, primary)
                } else {
                    (primary, p, hedge)
                };
                if first.1 {
                    return (first.0, 1);
                }
                // The first answer failed; the other leg is still out. The
                // retry's attempt at its origin follows the legs sent there.
                let to = self.other(first_origin);
                let sent = u8::from(to == p) + u8::from(to == target);
                let third = self.leg(e, to, sent, first.0);
                let good = [second, third].into_iter().filter(|a| a.1).map(|a| a.0);
                let done = good.fold(f64::INFINITY, f64::min);
                let done = if done.is_finite() {
                    done
                } else {
                    second.0.max(third.0)
                };
                (done, 2)
            }
        }
    }

    /// The p99 and p99.9 of (d, q), with q chosen to spend `extra` legs per
    /// request (clamped to [0, 1]); returns (q, p99, p99.9).
    fn at_delay(&mut self, d: f64, extra: f64, samples: &mut Vec<(f64, f64)>) -> (f64, f64, f64) {
        let n = self.requests.len() as f64;
        // Hedged outcomes of the requests still out at d.
        let mut hedged = Vec::new();
        let (mut base, mut gain) = (0.0, 0.0);
        for i in 0..self.requests.len() {
            let r = self.requests[i];
            base += f64::from(r.alone.1);
            if r.primary_ms > d {
                let (ms, legs) = self.play(r.entry, (r.primary_ms, r.primary_ok), Some(d));
                gain += f64::from(legs) - f64::from(r.alone.1);
                hedged.push((i, ms + r.entry.overhead_ms));
            }
        }
        let q = if gain > 0.0 {
            ((extra * n - base) / gain).clamp(0.0, 1.0)
        } else {
            0.0
        };
        samples.clear();
        let mut next = hedged.iter().peekable();
        for (i, r) in self.requests.iter().enumerate() {
            match next.peek() {
                Some(&&(j, ms)) if j == i && q > 0.0 => {
                    next.next();
                    samples.push((ms, q));
                    if q < 1.0 {
                        samples.push((r.alone.0, 1.0 - q));
                    }
                }
                _ => samples.push((r.alone.0, 1.0)),
            }
        }
        samples.sort_unstable_by(|a, b| a.0.total_cmp(&b.0));
        let at = |p: f64| {
            let need = (p * n).ceil() - 1e-9;
            let mut sum = 0.0;
            for &(v, w) in samples.iter() {
                sum += w;
                if sum >= need {
                    return v;
                }
            }
            samples.last().map_or(f64::NAN, |s| s.0)
        };
        (q, at(0.99), at(0.999))
    }

    /// The best (d, q) at `extra` legs per request beyond the first (0-1):
    /// for each delay, q is the one that spends exactly that.
    pub fn bound(&mut self, extra: f64) -> Option<HindsightBound> {
        if self.requests.is_empty() {
            return None;
        }
        let mut ok_times: Vec<f64> = (self.requests.iter())
            .filter(|r| r.primary_ok)
            .map(|r| r.primary_ms)
            .collect();
        ok_times.sort_unstable_by(f64::total_cmp);
        // Past the delay that hedges as many requests as the load left after
        // the retries of failures allows, q would have to exceed 1 (a fifth
        // more range covers hedges that bring a third leg with them).
        let n = self.requests.len() as f64;
        let retries: f64 = self.requests.iter().map(|r| f64::from(r.alone.1)).sum();
        let spare = (extra * n - retries).max(0.0);
        let late = (spare.ceil() as usize).min(ok_times.len());
        let d_max = 1.2
            * match ok_times.len().checked_sub(late + 1) {
                Some(rank) => ok_times[rank],
                None => 0.0,
            };
        let mut samples = Vec::with_capacity(2 * self.requests.len());
        let mut best = [None::<BoundPoint>; 2];
        let mut try_delay = |replay: &mut Self, d: f64, best: &mut [Option<BoundPoint>; 2]| {
            let (q, p99, p999) = replay.at_delay(d, extra, &mut samples);
            let delay_ms = if q > 0.0 { d } else { f64::INFINITY };
            let to_fastest = q > 0.0 && replay.hedge_to.is_some();
            for (slot, latency_ms) in best.iter_mut().zip([p99, p999]) {
                if slot.is_none_or(|b| latency_ms < b.latency_ms) {
                    *slot = Some(BoundPoint {
                        delay_ms,
                        q,
                        latency_ms,
                        to_fastest,
                    });
                }
            }
        };
        let step = d_max / COARSE_STEPS as f64;
        let targets = match self.fastest_apart() {
            Some(fastest) => vec![None, Some(fastest)],
            None => vec![None],
        };
        for hedge_to in targets {
            self.hedge_to = hedge_to;
            let mut own = [None::<BoundPoint>; 2];
            for k in 0..=COARSE_STEPS {
                try_delay(self, step * k as f64, &mut own);
            }
            for centre in own.map(|b| b.map(|b| b.delay_ms)).into_iter().flatten() {
                for k in 0..=FINE_STEPS {
                    let d = centre - step + 2.0 * step * k as f64 / FINE_STEPS as f64;
                    if (0.0..=d_max).contains(&d) {
                        try_delay(self, d, &mut own);
                    }
                }
            }
            for (slot, point) in best.iter_mut().zip(own) {
                if let Some(p) = point.filter(|p| slot.is_none_or(|b| p.latency_ms < b.latency_ms))
                {
                    *slot = Some(p);
                }
            }
        }
        self.hedge_to = None;
        Some(HindsightBound {
            extra_pct: 100.0 * extra,
            p99: best[0]?,
            p999: best[1]?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::engine::run;
    use crate::sim::engine::tests::config;
    use crate::sim::{percentile, RunResult};

    fn params(name: &str, seconds: f64) -> SimParams {
        SimParams {
            seed: 7,
            ..crate::sim::engine::tests::params(name, seconds)
        }
    }

    fn p99(r: &RunResult) -> f64 {
        percentile(&mut r.latencies_ms.clone(), 0.99)
    }

    #[test]
    fn with_no_load_to_spend_the_bound_is_the_run_itself() {
        // Hedging off: the replay meets the same draws, so with nothing to
        // spend it gives back the pass-through's own percentiles exactly.
        let p = params("heavy-tail", 10.0);
        let off = run(&p, &config(&[("HEDGE_MODE", "off")])).expect("runs");
        let b = Replay::new(&p, &off.tape).bound(0.0).expect("a bound");
        assert!((b.p99.latency_ms - p99(&off)).abs() < 1e-9, "{b:?}");
        assert_eq!(b.p99.q, 0.0);
    }

    #[test]
    fn a_fixed_delay_run_is_one_point_the_bound_beats_or_meets() {
        // A static 60 ms hedge is one fixed-delay policy at its own load:
        // the bound at that load is at least as good (within the replay's
        // model of the Worker's time, which it takes from the run).
        let p = params("heavy-tail", 20.0);
        let fixed = run(
            &p,
            &config(&[
                ("HEDGE_MODE", "static"),
                ("HEDGE_STATIC_DELAY_MS", "60"),
                ("HEDGE_POLICY", "fixed-quantile"),
            ]),
        )
        .expect("runs");
        let extra = fixed.hedges as f64 / fixed.requests as f64;
        assert!(extra > 0.05, "extra {extra}");
        let b = Replay::new(&p, &fixed.tape).bound(extra).expect("a bound");
        assert!(
            b.p99.latency_ms <= p99(&fixed) * 1.01,
            "bound {b:?} vs the static run's p99 {}",
            p99(&fixed)
        );
        // ... and far below the pass-through's 840 ms.
        assert!(b.p99.latency_ms < 200.0, "{b:?}");
    }

    #[test]
    fn a_hedge_meets_the_queue_the_run_met() {
        // On queueing origins a hedge that starts at once reads far better
        // than it is: replaying a static hedge's own run (no budget to cut
        // it) at its own delay gives back about its own p99.
        let p = params("overload-spell", 40.0);
        let fixed = run(
            &p,
            &config(&[
                ("HEDGE_MODE", "static"),
                ("HEDGE_STATIC_DELAY_MS", "700"),
                ("HEDGE_POLICY", "fixed-quantile"),
                ("HEDGE_BUDGET_PERCENT", "100"),
            ]),
        )
        .expect("runs");
        let extra = fixed.hedges as f64 / fixed.requests as f64;
        let mut replay = Replay::new(&p, &fixed.tape);
        let mut samples = Vec::new();
        let (q, own, _) = replay.at_delay(700.0, extra, &mut samples);
        let run_p99 = p99(&fixed);
        assert!(q > 0.95, "q {q}");
        // Starting hedges at once read 5,286 against the run's 6,630 here.
        assert!((own / run_p99 - 1.0).abs() < 0.02, "{own} vs {run_p99}");
        let b = replay.bound(extra).expect("a bound");
        assert!(b.p99.latency_ms <= run_p99 * 1.01, "{b:?} vs {run_p99}");
    }

    #[test]
    fn on_unlike_origins_the_bound_may_hedge_on_the_fastest() {
        // slow-origin: the primary (120 ms) is hedged best on the healthy
        // peer, and that peer's own stragglers on itself; like origins get
        // the one sweep.
        let p = params("slow-origin", 20.0);
        let off = run(&p, &config(&[("HEDGE_MODE", "off")])).expect("runs");
        let mut replay = Replay::new(&p, &off.tape);
        assert_eq!(replay.fastest_apart(), Some(1));
        let b = replay.bound(0.3).expect("a bound");
        assert!(b.p99.to_fastest, "{b:?}");
        let like = params("heavy-tail", 5.0);
        let off = run(&like, &config(&[("HEDGE_MODE", "off")])).expect("runs");
        assert_eq!(Replay::new(&like, &off.tape).fastest_apart(), None);
    }

    #[test]
    fn more_load_never_makes_the_bound_worse() {
        let p = params("bimodal-cache", 10.0);
        let off = run(&p, &config(&[("HEDGE_MODE", "off")])).expect("runs");
        let mut replay = Replay::new(&p, &off.tape);
        let at = |replay: &mut Replay, x: f64| replay.bound(x).expect("a bound").p99.latency_ms;
        let (a, b, c) = (
            at(&mut replay, 0.02),
            at(&mut replay, 0.08),
            at(&mut replay, 0.2),
        );
        assert!(a >= b && b >= c, "{a} {b} {c}");
    }
}
