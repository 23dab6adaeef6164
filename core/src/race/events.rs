//! The race's event handlers: each event of one request's race (the timer
//! fired, a leg answered or failed, the deadline passed, the client left)
//! goes to the Hedger, which books what it says about the origins and
//! returns the [`Action`] the driver takes next.

use super::machine::{classify_status, health_outcome, Leg, LegOutcome, Race, Step};
use super::plan::{HedgeCause, RacePlan};
use super::state::{Action, LegRecord, RaceEnd, RaceEvent, RaceState};
use super::Hedger;
use crate::admission::health::{route_tag, Outcome};
use crate::admission::hedge_gate::Urgency;
use crate::estimation::delay_plan::RaceHedge;
use crate::estimation::delay_policy::DelayBasis;
use crate::estimation::sketch::Sample;
use crate::no_hedge::{HedgeDenied, NoHedge};

// === impl Hedger ===

impl Hedger {
    /// Hands `event` to the race (the driver's one call per event): the
    /// [`Action`] the driver takes next.
    pub fn handle(&mut self, state: &mut RaceState, event: RaceEvent, now_ms: f64) -> Action {
        match event {
            RaceEvent::Answered(leg, answer) => self.leg_finished(state, leg, answer, now_ms),
            RaceEvent::TimerFired => self.timer_fired(state, now_ms),
            RaceEvent::DeadlinePassed => self.deadline_passed(state, now_ms),
            RaceEvent::ClientGone => self.client_gone(state, now_ms),
        }
    }

    /// The primary is sent at `now_ms`: the race begins.
    pub fn start(&mut self, plan: RacePlan, now_ms: f64) -> RaceState {
        let hedge_possible = plan.delay.is_some();
        let race = if plan.retry {
            Race::retry(hedge_possible)
        } else {
            Race::new(hedge_possible)
        };
        let primary = LegRecord {
            origin: plan.primary,
            started_ms: Some(now_ms),
            load_id: Some(self.gate.load.leg_sent(plan.primary, now_ms)),
            ..LegRecord::default()
        };
        let hedge = LegRecord {
            origin: plan.primary,
            ..LegRecord::default()
        };
        RaceState {
            timer_due_ms: plan.first_timer_ms().map(|ms| now_ms + ms),
            failed_hedge: None,
            no_hedge: plan.no_hedge,
            stall_check_pending: plan.stall_check_ms.is_some(),
            plan,
            race,
            legs: [primary, hedge],
            end: None,
            hedge_cause: None,
            rearm_ms: None,
        }
    }

    /// The hedge delay (or retry timeout) ran out.
    pub fn timer_fired(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        if let Some(due) = state.timer_due_ms.take() {
            self.isolate_lag.timer_ran(due, now_ms);
        }
        if state.end.is_some() {
            return Action::Wait;
        }
        let cause = if std::mem::take(&mut state.stall_check_pending) {
            let primary = state.plan.primary;
            if !self.gate.load.stalled(primary, now_ms) {
                // No stall yet: look again at half the stall silence (a
                // stall that began after this request did shows up later),
                // up to the hedge delay.
                if let (Some(delay), Some(start)) = (state.plan.delay, state.legs[0].started_ms) {
                    let to_delay = (start + delay.delay_ms - now_ms).max(0.0);
                    let next_check = self.gate.load.stall_after_ms(primary).map(|ms| ms / 2.0);
                    let rearm = match next_check {
                        Some(ms) if ms < to_delay => {
                            state.stall_check_pending = true;
                            ms
                        }
                        _ => to_delay,
                    };
                    state.rearm_ms = Some(rearm);
                    state.timer_due_ms = Some(now_ms + rearm);
                    return Action::Wait;
                }
            }
            HedgeCause::Stall
        } else if self.gate.load.stalled(state.plan.primary, now_ms) {
            // The delay ran out on a stalled origin: as urgent as a stall.
            HedgeCause::Stall
        } else {
            HedgeCause::Delay
        };
        let step = state.race.timer_fired();
        if step == Step::StartHedge {
            state.hedge_cause = Some(cause);
        }
        self.step(state, step, now_ms)
    }

    /// `leg` finished: `Ok(status)` for an answer, `Err(error)` for a failure
    /// without one (a connection error, with the runtime's text for the logs).
    pub fn leg_finished(
        &mut self,
        state: &mut RaceState,
        leg: Leg,
        answer: Result<u16, String>,
        now_ms: f64,
    ) -> Action {
        // Events after the end (a late answer) change nothing.
        if state.end.is_some() {
            return Action::Wait;
        }
        let record = &mut state.legs[leg.index()];
        record.finished_ms = Some(now_ms);
        let (health, outcome) = match answer {
            Ok(status) => {
                record.status = Some(status);
                (health_outcome(leg, status), classify_status(leg, status))
            }
            Err(error) => {
                record.error = Some(error);
                (Outcome::Unreachable, LegOutcome::RetriableFailure)
            }
        };
        let origin = record.origin;
        if let (Some(id), Some(elapsed)) = (record.load_id, record.elapsed_ms(now_ms)) {
            let elapsed = self.isolate_lag.origin_part(elapsed, now_ms);
            let failed = health != Outcome::Success;
            self.gate
                .load
                .leg_answered(origin, id, elapsed, failed, now_ms);
        }
        self.book(origin, health, &state.plan.route.key, now_ms);
        let step = state.race.leg_finished(leg, outcome);
        if step == Step::StartHedge && leg == Leg::Primary {
            state.hedge_cause = Some(HedgeCause::Failure);
        }
        self.step(state, step, now_ms)
    }

    /// The Worker could not build the primary it planned (its own failure):
    /// the origin was never asked, so nothing is booked against it, and a
    /// recovery trial the plan claimed is given back.
    pub fn primary_not_sent(&mut self, state: &mut RaceState, now_ms: f64) {
        let record = &mut state.legs[Leg::Primary.index()];
        if let Some(id) = record.load_id.take() {
            self.gate.load.leg_cut(record.origin, id);
        }
        self.gate.abandoned(record.origin, now_ms);
        state.end = Some(RaceEnd::ClientGone);
    }

    /// The hedge went out at `now_ms`.
    pub fn hedge_sent(&mut self, state: &mut RaceState, now_ms: f64) {
        let hedge = &mut state.legs[Leg::Hedge.index()];
        hedge.started_ms = Some(now_ms);
        hedge.load_id = Some(self.gate.load.leg_sent(hedge.origin, now_ms));
        // A route with its own budget has its own PoP share.
        match self.own_budget(state.plan.route.policy) {
            Some(_) => self.pop.record_route_hedge(&state.plan.route.key),
            None => self.pop.record_hedge(),
        }
        state.race.hedge_started();
    }

    /// The Worker could not build the hedge: the origin was never asked, so
    /// it is not blamed, and a recovery trial the permit claimed is given back.
    pub fn hedge_not_sent(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        let target = state.legs[Leg::Hedge.index()].origin;
        self.gate.abandoned(target, now_ms);
        let step = state.race.hedge_declined();
        self.step(state, step, now_ms)
    }

    /// No answer within the timeout: every leg in flight is cut short, a
    /// failure of its origin.
    pub fn deadline_passed(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        if state.end.is_some() {
            return Action::Wait;
        }
        self.cut_pending(state, CutShort::TimedOut, now_ms);
        self.finish(state, RaceEnd::TimedOut, now_ms)
    }

    /// The client went away: every leg in flight is cut short, which says
    /// nothing about its origin.
    pub fn client_gone(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        if state.end.is_some() {
            return Action::Wait;
        }
        self.cut_pending(state, CutShort::Lost, now_ms);
        self.finish(state, RaceEnd::ClientGone, now_ms)
    }

    fn step(&mut self, state: &mut RaceState, step: Step, now_ms: f64) -> Action {
        match step {
            Step::Wait => Action::Wait,
            Step::StartHedge => self.ask_for_hedge(state, false, now_ms),
            Step::AbandonPrimaryAndRetry => {
                // For a timeout-and-retry client, the timeout is the primary's failure.
                self.cut_short(state, Leg::Primary, CutShort::TimedOut, now_ms);
                self.ask_for_hedge(state, true, now_ms)
            }
            Step::Deliver(winner) => {
                let loser = winner.other();
                if state.race.is_pending(loser) {
                    self.cut_short(state, loser, CutShort::Lost, now_ms);
                }
                self.record_sample(state, winner, false, now_ms);
                self.finish(state, RaceEnd::Won(winner), now_ms)
            }
            Step::DeliverPrimaryFailure => self.finish(state, RaceEnd::PrimaryFailed, now_ms),
            // The bound's replay does the same: the request is unhedged
            // again, and one more leg goes where the hedge did not fail.
            Step::HedgeFailedFirst => self.replace_failed_hedge(state, now_ms),
            Step::FailBoth => {
                if let Some(action) = self.third_attempt(state, now_ms) {
                    return action;
                }
                // A proxy stays transparent: an origin's own failure answer
                // (its status, Retry-After, body) reaches the client.
                // The hedge leg's first attempt counts when its third got no
                // answer: the driver keeps that answer for this.
                let earlier_hedge =
                    (state.failed_hedge.as_ref()).is_some_and(|l| l.status.is_some());
                let answered = [Leg::Primary, Leg::Hedge].into_iter().find(|leg| {
                    state.leg(*leg).status.is_some() || (*leg == Leg::Hedge && earlier_hedge)
                });
                self.finish(state, RaceEnd::BothFailed { answered }, now_ms)
            }
        }
    }

    fn ask_for_hedge(&mut self, state: &mut RaceState, abort_primary: bool, now_ms: f64) -> Action {
        if let Err(denied) = self.hedge_pays(state, now_ms) {
            state.no_hedge = Some(NoHedge::Denied(denied));
            let step = state.race.hedge_declined();
            return self.step(state, step, now_ms);
        }
        let plan = &state.plan;
        let urgency = match state.hedge_cause {
            _ if plan.retry || !self.params.policy.hedges_urgently() => None,
            Some(HedgeCause::Failure) => Some(Urgency::Failure),
            Some(HedgeCause::Stall) => Some(Urgency::Stall),
            Some(HedgeCause::Delay) | None => None,
        };
        self.gate.scope(plan.route.policy);
        let permit = if let Some(urgency) = urgency {
            self.gate
                .permit_urgent(plan.primary, now_ms, urgency, plan.peer_only)
        } else if plan.peer_only {
            self.gate.permit_to_peer(plan.primary, now_ms)
        } else {
            self.gate.permit(plan.primary, now_ms, !plan.retry)
        };
        match permit {
            Ok(origin) => {
                state.legs[Leg::Hedge.index()].origin = origin;
                Action::SendHedge {
                    origin,
                    abort_primary,
                }
            }
            Err(denied) => {
                state.no_hedge = Some(NoHedge::Denied(denied));
                let step = state.race.hedge_declined();
                self.step(state, step, now_ms)
            }
        }
    }

    fn finish(&mut self, state: &mut RaceState, end: RaceEnd, now_ms: f64) -> Action {
        state.end = Some(end);
        if let (true, Some(cause), false) = (
            state.race.hedge_sent(),
            state.hedge_cause,
            end == RaceEnd::ClientGone,
        ) {
            let won = end == RaceEnd::Won(Leg::Hedge);
            self.payoff.record(cause, state.plan.primary, won);
        }
        if state.plan.delay.is_some() {
            let hedge = match (state.race.hedge_sent(), state.hedge_cause) {
                (true, Some(HedgeCause::Stall | HedgeCause::Failure)) => RaceHedge::Urgent,
                (true, Some(HedgeCause::Delay)) => match state.plan.delay.map(|d| d.basis) {
                    Some(DelayBasis::Benefit) => RaceHedge::Planned,
                    _ => RaceHedge::Unplanned,
                },
                _ => RaceHedge::None,
            };
            let took_ms = (state.legs[Leg::Primary.index()].started_ms)
                .filter(|_| end != RaceEnd::ClientGone)
                .map(|started| now_ms - started);
            (self.delays).note_race_end(state.plan.primary, took_ms, hedge, now_ms);
        }
        Action::Finish(end)
    }

    /// Books `outcome` on `origin`'s health, and on the PoP's rates when it
    /// counted against the origin (one path's failures do not).
    fn book(&mut self, origin: usize, outcome: Outcome, route: &str, now_ms: f64) {
        let counted = self.gate.record(origin, outcome, route_tag(route), now_ms);
        self.pop.record_response(origin, counted);
    }

    fn cut_pending(&mut self, state: &mut RaceState, why: CutShort, now_ms: f64) {
        for leg in [Leg::Primary, Leg::Hedge] {
            if state.race.is_pending(leg) {
                self.cut_short(state, leg, why, now_ms);
            }
        }
    }

    /// Books a leg cut short before it answered: its elapsed time as a
    /// censored latency sample, and what it says about its origin's health.
    fn cut_short(&mut self, state: &mut RaceState, leg: Leg, why: CutShort, now_ms: f64) {
        self.record_sample(state, leg, true, now_ms);
        let borrowed = (state.plan.delay).is_some_and(|d| d.basis == DelayBasis::Target);
        let record = &mut state.legs[leg.index()];
        record.aborted = true;
        let origin = record.origin;
        match (record.load_id, leg == Leg::Primary && borrowed) {
            (Some(id), true) => self.gate.load.leg_cut_early(origin, id, now_ms),
            (Some(id), false) => self.gate.load.leg_cut(origin, id),
            (None, _) => {}
        }
        match why {
            CutShort::TimedOut => {
                self.book(origin, Outcome::TimedOut, &state.plan.route.key, now_ms)
            }
            CutShort::Lost => self.gate.abandoned(origin, now_ms),
        }
    }

    /// Records a leg's latency: a completion, or (cut short) a lower bound.
    fn record_sample(&mut self, state: &RaceState, leg: Leg, censored: bool, now_ms: f64) {
        let record = state.leg(leg);
        let Some(elapsed) = record.elapsed_ms(now_ms) else {
            return;
        };
        // What the origin caused: the isolate's own lag is not its doing.
        let elapsed = self.isolate_lag.origin_part(elapsed, now_ms);
        let sample = if censored {
            Sample::Censored(elapsed)
        } else {
            Sample::Completed(elapsed)
        };
        let route = &state.plan.route.key;
        self.estimator.record(record.origin, route, sample, now_ms);
        self.pop.record_sample(record.origin, route, sample);
    }
}

// === the guards on what a hedge costs ===

impl Hedger {
    /// Whether a hedge for a slow or stalled primary is worth its cost to
    /// the isolate: not while the isolate itself is the bottleneck and such
    /// hedges have stopped winning (a hedge that keeps winning fixes the
    /// origin's delay, however busy the isolate: a heavy tail's +800 ms is
    /// not the isolate's), and only its share while hedges of its cause win
    /// almost never. A retry of a failed primary is exempt from the first
    /// (it saves a client error).
    fn hedge_pays(&mut self, state: &RaceState, now_ms: f64) -> Result<(), HedgeDenied> {
        if state.plan.retry {
            return Ok(());
        }
        let cause = state.hedge_cause.unwrap_or(HedgeCause::Delay);
        let primary = state.plan.primary;
        let own_budget = self.own_budget(state.plan.route.policy);
        if cause != HedgeCause::Failure
            && self.pop_over_budget(&state.plan.route.key, own_budget, now_ms)
        {
            return Err(HedgeDenied::PopBudget);
        }
        if cause != HedgeCause::Failure
            && !self.payoff.winning(cause, primary)
            && self.isolate_lag.busy(now_ms)
        {
            return Err(HedgeDenied::IsolateBusy);
        }
        if !self.payoff.allow(cause, state.plan.primary) {
            return Err(HedgeDenied::NotPaying);
        }
        Ok(())
    }

    /// Both legs failed: when both failed fast, the request may be hedged
    /// and the isolate's allowance and the budget have room, one more
    /// attempt goes out on the hedge leg to the healthier origin.
    fn third_attempt(&mut self, state: &mut RaceState, now_ms: f64) -> Option<Action> {
        let plan = &state.plan;
        let started = state.leg(Leg::Primary).started_ms.unwrap_or(0.0);
        let fast_by = started + self.params.timeout_ms / 4.0;
        let hedge = state.leg(Leg::Hedge);
        let failed_fast = |l: &LegRecord| {
            l.finished_ms.is_some_and(|t| t <= fast_by)
                && (l.error.is_some() || l.status.is_some_and(|s| (502..=504).contains(&s)))
        };
        if !self.params.guards.third_attempt
            || plan.delay.is_none()
            || plan.retry
            || plan.peer_only
            || state.race.third_sent()
            || !failed_fast(state.leg(Leg::Primary))
            || !failed_fast(hedge)
        {
            return None;
        }
        // The origin that failed worse is the one to stay away from.
        let (a, b) = (state.leg(Leg::Primary).origin, hedge.origin);
        let failure = |gate: &mut crate::admission::hedge_gate::HedgeGate, o: usize| {
            gate.origin_snapshot(o, now_ms)
                .and_then(|s| s.window.failure_rate)
                .unwrap_or(0.0)
        };
        let worse = if failure(&mut self.gate, b) > failure(&mut self.gate, a) {
            b
        } else {
            a
        };
        self.send_third(state, worse, now_ms)
    }

    /// The hedge failed while the primary is still out (an origin shedding
    /// the copy with a fast 503, say): without another leg the request waits
    /// on the very primary that was slow enough to hedge. One more attempt
    /// goes out, from the same allowance as a third attempt after two fast
    /// failures, away from the hedge's origin; else the primary runs on.
    fn replace_failed_hedge(&mut self, state: &mut RaceState, now_ms: f64) -> Action {
        let plan = &state.plan;
        if !self.params.guards.third_attempt || plan.delay.is_none() || plan.retry || plan.peer_only
        {
            return Action::Wait;
        }
        // Only an origin's failure or shedding (502-504, no answer); a
        // hedge refused as a duplicate or rate-limited (409, 425, 429) is
        // not sent again.
        let hedge = state.leg(Leg::Hedge);
        if !(hedge.error.is_some() || hedge.status.is_some_and(|s| (502..=504).contains(&s))) {
            return Action::Wait;
        }
        let avoid = hedge.origin;
        self.send_third(state, avoid, now_ms)
            .unwrap_or(Action::Wait)
    }

    /// One more attempt on the hedge leg, to an origin other than `avoid`
    /// when one may take it, if the allowance has one.
    fn send_third(&mut self, state: &mut RaceState, avoid: usize, now_ms: f64) -> Option<Action> {
        if !self.third.take() {
            return None;
        }
        self.gate.scope(state.plan.route.policy);
        let origin = self
            .gate
            .permit_urgent(avoid, now_ms, Urgency::Failure, false)
            .ok()?;
        let first = std::mem::replace(
            &mut state.legs[Leg::Hedge.index()],
            LegRecord {
                origin,
                ..LegRecord::default()
            },
        );
        state.failed_hedge = Some(first);
        state.race.third_attempt();
        Some(Action::SendHedge {
            origin,
            abort_primary: false,
        })
    }
}

/// Why a leg in flight was cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CutShort {
    /// Its time ran out: a failure of its origin.
    TimedOut,
    /// The other leg won, or the client left: says nothing about its origin.
    Lost,
}

#[cfg(test)]
#[path = "hedger_tests.rs"]
mod tests;
