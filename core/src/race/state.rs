//! One race as it runs: what each leg did, how the race ended, the action the
//! driver takes next, and the I/O it takes it with.

use super::machine::{Leg, Race};
use super::plan::{HedgeCause, RacePlan};
use crate::no_hedge::NoHedge;

/// What one finished request contributes to the metrics' route counters.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RaceSummary {
    /// A hedge went out.
    pub hedge_sent: bool,
    /// Why it went out.
    pub hedge_cause: Option<HedgeCause>,
    /// The hedge's answer was the one served.
    pub hedge_won: bool,
    /// The client got a 5xx (the origin's or ours) or no origin answer.
    pub error: bool,
    /// Milliseconds of origin work on legs cut short (losers, timeouts).
    pub wasted_ms: f64,
    /// Milliseconds of origin work on every leg.
    pub origin_ms: f64,
}

/// What one leg did, for headers, error bodies, logs and stats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LegRecord {
    /// The origin it went to.
    pub origin: usize,
    /// When it was sent.
    pub started_ms: Option<f64>,
    /// When its answer (or failure) arrived.
    pub finished_ms: Option<f64>,
    /// The answer's status.
    pub status: Option<u16>,
    /// The runtime's error, when it failed without an answer (logs only).
    pub error: Option<String>,
    /// Cut short (lost, timed out, client gone) before it answered.
    pub aborted: bool,
    /// Its id in the origin load tracker, once sent.
    pub load_id: Option<u64>,
}

/// How a leg's error starts when the origin answered with a status outside
/// 200-599, which no response may carry.
pub const INVALID_STATUS: &str = "invalid status from the origin";

impl LegRecord {
    /// The kind of its failure without an answer, for public bodies (the
    /// runtime's text can carry an origin's URL, so it stays in the logs):
    /// `invalid_status` or `unreachable`.
    pub fn failure_kind(&self) -> Option<&'static str> {
        self.error.as_ref().map(|e| {
            if e.starts_with(INVALID_STATUS) {
                "invalid_status"
            } else {
                "unreachable"
            }
        })
    }

    /// Milliseconds from the leg's start to its answer (or to `now_ms` if unfinished).
    pub fn elapsed_ms(&self, now_ms: f64) -> Option<f64> {
        self.started_ms
            .map(|start| self.finished_ms.unwrap_or(now_ms) - start)
    }
}

/// How a race ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RaceEnd {
    /// This leg's answer goes to the client.
    Won(Leg),
    /// Only the primary ran and it failed retriably: its failure goes to the
    /// client as it is.
    PrimaryFailed,
    /// Both legs failed retriably. `answered` is the leg whose own HTTP
    /// answer (a 5xx, or a hedge's refusal) goes to the client, unchanged: the
    /// primary's when both answered, else the one that did; `None` when no
    /// origin answered at all (the Worker then says so in a 502).
    BothFailed {
        /// The leg whose answer is delivered.
        answered: Option<Leg>,
    },
    /// No leg answered within the timeout.
    TimedOut,
    /// The client ended the exchange first: it went away, or its upload
    /// broke off (nothing about any origin either way).
    ClientGone,
}

impl RaceEnd {
    /// The leg whose response goes to the client, if any; every other leg
    /// is aborted.
    pub fn kept_leg(self) -> Option<Leg> {
        match self {
            RaceEnd::Won(leg) => Some(leg),
            RaceEnd::PrimaryFailed => Some(Leg::Primary),
            RaceEnd::BothFailed { answered } => answered,
            RaceEnd::TimedOut | RaceEnd::ClientGone => None,
        }
    }
}

/// One request's race: its plan, the state machine and what each leg did
/// (one record per leg, indexed by [`Leg::index`]).
#[derive(Debug, Clone)]
pub struct RaceState {
    /// The plan the race runs.
    pub plan: RacePlan,
    pub(super) race: Race,
    /// What each leg did, by [`Leg::index`].
    pub legs: [LegRecord; 2],
    /// Why no hedge went out: the plan's reason, or the gate's refusal.
    pub no_hedge: Option<NoHedge>,
    /// How it ended, once it has.
    pub end: Option<RaceEnd>,
    /// Why the hedge was asked for, once it was.
    pub hedge_cause: Option<HedgeCause>,
    /// The stall check has not fired yet.
    pub(super) stall_check_pending: bool,
    /// The timer must be set again, this many ms from now (after a stall
    /// check that found none, for the rest of the hedge delay).
    pub(super) rearm_ms: Option<f64>,
    /// When the race's timer is due (its lateness is the isolate's lag).
    pub(super) timer_due_ms: Option<f64>,
    /// The hedge leg's first attempt, when it failed fast and a third
    /// attempt took its place (for the error body and the logs).
    pub failed_hedge: Option<LegRecord>,
}

impl RaceState {
    /// Takes a pending timer change: the driver sets its hedge timer to fire
    /// this many ms from now.
    pub fn take_rearm(&mut self) -> Option<f64> {
        self.rearm_ms.take()
    }

    /// What `leg` did.
    pub fn leg(&self, leg: Leg) -> &LegRecord {
        &self.legs[leg.index()]
    }

    /// Whether a hedge went out.
    pub fn hedge_sent(&self) -> bool {
        self.race.hedge_sent()
    }

    /// Whether a third attempt went out (after both legs failed fast, or
    /// in place of a hedge that failed while the primary ran).
    pub fn third_attempt_sent(&self) -> bool {
        self.race.third_sent() && self.legs[Leg::Hedge.index()].started_ms.is_some()
    }

    /// What the race contributes to the metrics' route counters, at `now_ms`.
    pub fn summary(&self, client_error: bool, now_ms: f64) -> RaceSummary {
        let elapsed = |l: &LegRecord| l.elapsed_ms(now_ms).unwrap_or(0.0);
        RaceSummary {
            hedge_sent: self.hedge_sent(),
            hedge_cause: self.hedge_cause,
            hedge_won: self.end == Some(RaceEnd::Won(Leg::Hedge)),
            error: client_error,
            wasted_ms: self.legs.iter().filter(|l| l.aborted).map(elapsed).sum(),
            origin_ms: self.legs.iter().map(elapsed).sum(),
        }
    }
}

/// What the Worker must do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Nothing: wait for the next event.
    Wait,
    /// Send the hedge to this origin (first aborting the primary, in the
    /// retry mode), then report [`Hedger::hedge_sent`](super::Hedger::hedge_sent) or
    /// [`Hedger::hedge_not_sent`](super::Hedger::hedge_not_sent).
    SendHedge {
        /// The origin to send it to.
        origin: usize,
        /// Abort the primary first (retry mode: its time ran out).
        abort_primary: bool,
    },
    /// The race is over ([`RaceState::end`] says how): abort every leg but
    /// the kept one ([`RaceEnd::kept_leg`]) first (every millisecond a loser
    /// runs is wasted origin work), and answer.
    Finish(RaceEnd),
}

/// One event of a race, as the driver saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RaceEvent {
    /// A leg finished: `Ok(status)` for an answer, `Err(error)` for a
    /// failure without one (with the runtime's text, for the logs).
    Answered(Leg, Result<u16, String>),
    /// The hedge timer (stall check, delay or retry timeout) fired.
    TimerFired,
    /// No answer within the timeout.
    DeadlinePassed,
    /// The client ended the exchange: it went away, or a leg failed
    /// because the client's upload broke off.
    ClientGone,
}
