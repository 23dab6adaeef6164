//! The isolate as one event loop that spends CPU on each thing it does.
//!
//! A Worker's isolate runs one event at a time: admitting a request,
//! sending a leg, handling an answer, aborting a loser, a timer. While it
//! works on one, every other event waits, so the latency it measures for a
//! leg includes the time the leg's answer waited for the loop, and every
//! hedge it sends delays the requests queued behind it. A proxy that costs
//! nothing (the model without this) cannot show a hedge making the tail
//! worse; this one can.

/// Milliseconds of the isolate's event loop each step takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IsolateCpu {
    /// A request arrives: its intake, the plan, the primary built and sent.
    pub admit_ms: f64,
    /// The winner's answer handled and its response streamed to the client.
    pub respond_ms: f64,
    /// A further leg (a hedge, a retry, a third attempt) built, sent and its
    /// answer's headers handled.
    pub leg_ms: f64,
    /// A loser aborted.
    pub abort_ms: f64,
    /// A timer firing (the hedge delay, a stall check, the deadline).
    pub timer_ms: f64,
}

impl IsolateCpu {
    /// Calibrated on the lab's machine (2 cores shared by workerd, the load
    /// generator and the origins), 2026-12-04. The shape from `node
    /// lab/run.mjs --scenario none --overhead --overhead-rounds 3`: with
    /// hedging off the Worker saturated at 806 requests/s in a closed loop,
    /// with every request hedged at once and the loser aborted at 535, so a
    /// hedge costs half a request. The scale from the open-loop lab, which
    /// costs the machine more per request (the load generator's timers and
    /// connections compete for the same cores): `busy-isolate` saturates
    /// between 350 and 500 requests/s, and these costs (2 times the
    /// closed-loop ones, about 400 requests/s at full use) give the
    /// pass-through's p99 at 350 Poisson requests/s close to the lab's at
    /// 350 (docs/isolate-cost.md has both). How a total splits between its steps is
    /// an estimate (the V8 profile in docs/cost.md: about half of a
    /// request's work is building and sending the outbound fetch).
    pub fn lab() -> Self {
        Self {
            admit_ms: 1.40,
            respond_ms: 1.08,
            leg_ms: 0.90,
            abort_ms: 0.32,
            timer_ms: 0.03,
        }
    }

    /// Every cost times `factor` (a faster machine: below 1).
    pub fn scaled(self, factor: f64) -> Self {
        Self {
            admit_ms: self.admit_ms * factor,
            respond_ms: self.respond_ms * factor,
            leg_ms: self.leg_ms * factor,
            abort_ms: self.abort_ms * factor,
            timer_ms: self.timer_ms * factor,
        }
    }

    /// Requests per second one isolate can serve with no hedges.
    pub fn capacity_rps(&self) -> f64 {
        1000.0 / (self.admit_ms + self.respond_ms)
    }
}
