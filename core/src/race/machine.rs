//! The decisions of one hedged race, as a state machine without I/O.
//!
//! The Worker feeds it events (a leg finished, the hedge timer fired, a hedge
//! was declined by the budget) and does what each returned [`Step`] says. The
//! rules: the first *answer* wins; a retriable failure (connection error, 502,
//! 503, 504) never wins while the other leg may still answer; a retriable
//! failure of the primary before the hedge went out hedges at once.
//!
//! A *retry* race (the classic timeout-and-retry that hedging replaces, kept
//! as a mode for comparison) differs in one rule: when the timer fires, the
//! primary is abandoned (aborted) before the second leg starts.

use crate::admission::health::Outcome;

/// One of the two legs of a race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leg {
    /// The first request, to the primary origin.
    Primary,
    /// The copy sent after the hedge delay (or at once after a fast failure).
    Hedge,
}

impl Leg {
    /// The other leg.
    pub fn other(self) -> Leg {
        match self {
            Leg::Primary => Leg::Hedge,
            Leg::Hedge => Leg::Primary,
        }
    }

    /// A short lowercase name for headers and logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Leg::Primary => "primary",
            Leg::Hedge => "hedge",
        }
    }

    /// Its place in per-leg arrays: 0 for the primary, 1 for the hedge.
    pub fn index(self) -> usize {
        match self {
            Leg::Primary => 0,
            Leg::Hedge => 1,
        }
    }
}

/// How a leg ended, as far as the race is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegOutcome {
    /// A response the client should get (2xx-4xx, 500, and other 5xx).
    Answer,
    /// A failure worth trying elsewhere: the origin was unreachable or said 502/503/504.
    RetriableFailure,
}

/// Classifies an origin response status on `leg`.
///
/// A hedge answered 409 (a concurrent duplicate of a keyed request), 425
/// (too early) or 429 (too many requests) was refused because it *is* a
/// copy, or to shed load: like a shed 503 it says nothing about the request,
/// so it never beats a pending primary and never reaches the client while
/// the other leg may still answer. To a primary these are ordinary answers.
pub fn classify_status(leg: Leg, status: u16) -> LegOutcome {
    match (leg, status) {
        (_, 502..=504) => LegOutcome::RetriableFailure,
        (Leg::Hedge, s) if hedge_refused(s) => LegOutcome::RetriableFailure,
        _ => LegOutcome::Answer,
    }
}

/// Whether `status` on a hedge means the origin refused the copy (shed it):
/// the 503, 409, 425 and 429 of [`classify_status`].
pub fn hedge_refused(status: u16) -> bool {
    matches!(status, 503 | 409 | 425 | 429)
}

/// What an answer with `status` on `leg` says about its origin's health: a
/// hedge refused is shed work (counted toward the 5xx rate, never a
/// failure), any other 5xx a server error, the rest a success.
pub fn health_outcome(leg: Leg, status: u16) -> Outcome {
    match status {
        s if leg == Leg::Hedge && hedge_refused(s) => Outcome::Shed,
        500.. => Outcome::ServerError,
        _ => Outcome::Success,
    }
}

/// What the Worker should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing yet: wait for the next event.
    Wait,
    /// Ask the budget for a hedge; then call [`Race::hedge_started`] or [`Race::hedge_declined`].
    StartHedge,
    /// Retry race: abort the primary (it timed out), then start the second
    /// leg and call [`Race::hedge_started`] or [`Race::hedge_declined`].
    AbandonPrimaryAndRetry,
    /// Return this leg's response and abort the other leg if it is in flight.
    Deliver(Leg),
    /// Only the primary ran and it failed: return its failure as it is.
    DeliverPrimaryFailure,
    /// Both legs failed: answer 502 with what each got.
    FailBoth,
    /// The hedge failed while the primary is still out: the request is as
    /// unhedged as before it. A third attempt may take its place ([`Race::third_attempt`]
    /// and [`Race::hedge_started`]); otherwise wait for the primary.
    HedgeFailedFirst,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LegState {
    NotStarted,
    Pending,
    Failed,
    Won,
}

/// The state of one race.
#[derive(Debug, Clone)]
pub struct Race {
    primary: LegState,
    hedge: LegState,
    /// False once hedging is ruled out for this request (ineligible, declined).
    hedge_possible: bool,
    /// Whether the timer abandons the primary (retry) instead of racing it (hedge).
    retry: bool,
    /// The hedge leg is on its second attempt (a third request in all).
    third: bool,
}

// === impl Race ===

impl Race {
    /// A race whose primary is in flight. `hedge_possible` is false for
    /// requests that may not be hedged; they only ever see one leg.
    pub fn new(hedge_possible: bool) -> Self {
        Self {
            primary: LegState::Pending,
            hedge: LegState::NotStarted,
            hedge_possible,
            retry: false,
            third: false,
        }
    }

    /// A timeout-and-retry race: when the timer fires the primary is aborted
    /// and a single retry goes out.
    pub fn retry(retry_possible: bool) -> Self {
        Self {
            retry: true,
            ..Self::new(retry_possible)
        }
    }

    /// Whether the hedge leg was ever started.
    pub fn hedge_sent(&self) -> bool {
        self.hedge != LegState::NotStarted
    }

    /// Whether `leg` is in flight (so a loser needs aborting).
    pub fn is_pending(&self, leg: Leg) -> bool {
        self.state(leg) == LegState::Pending
    }

    /// The hedge delay (or retry timeout) ran out.
    pub fn timer_fired(&mut self) -> Step {
        if !(self.hedge_possible
            && self.hedge == LegState::NotStarted
            && self.primary == LegState::Pending)
        {
            return Step::Wait;
        }
        if self.retry {
            // The abandoned primary counts as failed: if the retry fails too, both did.
            self.primary = LegState::Failed;
            Step::AbandonPrimaryAndRetry
        } else {
            Step::StartHedge
        }
    }

    /// The budget paid for the hedge and it is in flight.
    pub fn hedge_started(&mut self) {
        self.hedge = LegState::Pending;
    }

    /// Both legs failed and one more attempt goes out on the hedge leg.
    /// Call [`Race::hedge_started`] once it is sent (or
    /// [`Race::hedge_declined`]).
    pub fn third_attempt(&mut self) {
        self.third = true;
    }

    /// Whether the hedge leg carries a third attempt.
    pub fn third_sent(&self) -> bool {
        self.third
    }

    /// The budget (or the lack of a target) refused the hedge.
    pub fn hedge_declined(&mut self) -> Step {
        self.hedge_possible = false;
        if self.third {
            // The third attempt could not be sent: the hedge leg stands
            // failed, and so does the race unless the primary is still out.
            self.hedge = LegState::Failed;
            return match self.primary {
                LegState::Pending => Step::Wait,
                _ => Step::FailBoth,
            };
        }
        if self.primary == LegState::Failed {
            Step::DeliverPrimaryFailure
        } else {
            Step::Wait
        }
    }

    /// `leg` finished with `outcome`.
    pub fn leg_finished(&mut self, leg: Leg, outcome: LegOutcome) -> Step {
        if self.state(leg) != LegState::Pending {
            return Step::Wait;
        }
        match outcome {
            LegOutcome::Answer => {
                *self.state_mut(leg) = LegState::Won;
                Step::Deliver(leg)
            }
            LegOutcome::RetriableFailure => {
                *self.state_mut(leg) = LegState::Failed;
                match (leg, self.state(leg.other())) {
                    (Leg::Hedge, LegState::Pending) if !self.third => Step::HedgeFailedFirst,
                    (_, LegState::Pending) => Step::Wait,
                    (_, LegState::Failed) => Step::FailBoth,
                    (Leg::Primary, LegState::NotStarted) if self.hedge_possible => Step::StartHedge,
                    (Leg::Primary, _) => Step::DeliverPrimaryFailure,
                    // A hedge cannot finish while the primary is neither pending nor
                    // failed: the race is over once a leg wins.
                    (Leg::Hedge, _) => Step::Wait,
                }
            }
        }
    }

    fn state(&self, leg: Leg) -> LegState {
        match leg {
            Leg::Primary => self.primary,
            Leg::Hedge => self.hedge,
        }
    }

    fn state_mut(&mut self, leg: Leg) -> &mut LegState {
        match leg {
            Leg::Primary => &mut self.primary,
            Leg::Hedge => &mut self.hedge,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LegOutcome::*;

    #[test]
    fn a_hedge_failing_first_may_be_replaced_once_while_the_primary_runs() {
        let mut race = Race::new(true);
        assert_eq!(race.timer_fired(), Step::StartHedge);
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, RetriableFailure),
            Step::HedgeFailedFirst
        );
        race.third_attempt();
        race.hedge_started();
        assert!(race.is_pending(Leg::Primary) && race.is_pending(Leg::Hedge));
        // The replacement fails too: no more attempts, the primary runs on.
        assert_eq!(race.leg_finished(Leg::Hedge, RetriableFailure), Step::Wait);
        assert_eq!(
            race.leg_finished(Leg::Primary, Answer),
            Step::Deliver(Leg::Primary)
        );
    }

    #[test]
    fn a_replacement_that_cannot_go_leaves_the_primary_running() {
        let mut race = Race::new(true);
        race.timer_fired();
        race.hedge_started();
        race.leg_finished(Leg::Hedge, RetriableFailure);
        race.third_attempt();
        assert_eq!(race.hedge_declined(), Step::Wait);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::FailBoth
        );
    }

    #[test]
    fn completes_before_hedge() {
        let mut race = Race::new(true);
        assert_eq!(
            race.leg_finished(Leg::Primary, Answer),
            Step::Deliver(Leg::Primary)
        );
        assert_eq!(race.timer_fired(), Step::Wait);
        assert!(!race.hedge_sent());
    }

    #[test]
    fn hedge_completes_first() {
        let mut race = Race::new(true);
        assert_eq!(race.timer_fired(), Step::StartHedge);
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, Answer),
            Step::Deliver(Leg::Hedge)
        );
        assert!(race.is_pending(Leg::Primary));
    }

    #[test]
    fn primary_completes_first_after_hedge_sent() {
        let mut race = Race::new(true);
        assert_eq!(race.timer_fired(), Step::StartHedge);
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Primary, Answer),
            Step::Deliver(Leg::Primary)
        );
        assert!(race.is_pending(Leg::Hedge));
    }

    #[test]
    fn fast_primary_failure_hedges_at_once() {
        let mut race = Race::new(true);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::StartHedge
        );
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, Answer),
            Step::Deliver(Leg::Hedge)
        );
    }

    #[test]
    fn fast_primary_failure_without_budget_returns_the_failure() {
        let mut race = Race::new(true);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::StartHedge
        );
        assert_eq!(race.hedge_declined(), Step::DeliverPrimaryFailure);
    }

    #[test]
    fn a_failing_hedge_does_not_win_while_primary_is_pending() {
        let mut race = Race::new(true);
        race.timer_fired();
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, RetriableFailure),
            Step::HedgeFailedFirst
        );
        // Nothing replaced it: the primary's answer wins.
        assert_eq!(
            race.leg_finished(Leg::Primary, Answer),
            Step::Deliver(Leg::Primary)
        );
    }

    #[test]
    fn a_failing_primary_does_not_win_while_hedge_is_pending() {
        let mut race = Race::new(true);
        race.timer_fired();
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::Wait
        );
        assert_eq!(
            race.leg_finished(Leg::Hedge, Answer),
            Step::Deliver(Leg::Hedge)
        );
    }

    #[test]
    fn both_failing_fails_the_race() {
        let mut race = Race::new(true);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::StartHedge
        );
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, RetriableFailure),
            Step::FailBoth
        );
    }

    #[test]
    fn ineligible_requests_never_hedge() {
        let mut race = Race::new(false);
        assert_eq!(race.timer_fired(), Step::Wait);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::DeliverPrimaryFailure
        );
        assert!(!race.hedge_sent());
    }

    #[test]
    fn a_declined_hedge_is_not_retried_by_a_later_failure() {
        let mut race = Race::new(true);
        assert_eq!(race.timer_fired(), Step::StartHedge);
        assert_eq!(race.hedge_declined(), Step::Wait);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::DeliverPrimaryFailure
        );
    }

    #[test]
    fn retry_abandons_the_primary_when_the_timer_fires() {
        let mut race = Race::retry(true);
        assert_eq!(race.timer_fired(), Step::AbandonPrimaryAndRetry);
        assert!(!race.is_pending(Leg::Primary));
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, Answer),
            Step::Deliver(Leg::Hedge)
        );
    }

    #[test]
    fn retry_that_fails_after_a_timeout_fails_both() {
        let mut race = Race::retry(true);
        assert_eq!(race.timer_fired(), Step::AbandonPrimaryAndRetry);
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, RetriableFailure),
            Step::FailBoth
        );
    }

    #[test]
    fn retry_after_a_fast_failure_goes_at_once() {
        let mut race = Race::retry(true);
        assert_eq!(
            race.leg_finished(Leg::Primary, RetriableFailure),
            Step::StartHedge
        );
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, Answer),
            Step::Deliver(Leg::Hedge)
        );
    }

    #[test]
    fn a_third_attempt_runs_on_the_hedge_leg() {
        let mut race = Race::new(true);
        race.leg_finished(Leg::Primary, RetriableFailure);
        race.hedge_started();
        assert_eq!(
            race.leg_finished(Leg::Hedge, RetriableFailure),
            Step::FailBoth
        );
        race.third_attempt();
        race.hedge_started();
        assert!(race.is_pending(Leg::Hedge) && race.third_sent());
        assert_eq!(
            race.leg_finished(Leg::Hedge, Answer),
            Step::Deliver(Leg::Hedge)
        );
        let mut unsent = Race::new(true);
        unsent.leg_finished(Leg::Primary, RetriableFailure);
        unsent.hedge_started();
        unsent.leg_finished(Leg::Hedge, RetriableFailure);
        unsent.third_attempt();
        assert_eq!(unsent.hedge_declined(), Step::FailBoth);
    }

    #[test]
    fn statuses_are_classified() {
        for leg in [Leg::Primary, Leg::Hedge] {
            assert_eq!(classify_status(leg, 200), Answer);
            assert_eq!(classify_status(leg, 404), Answer);
            assert_eq!(classify_status(leg, 500), Answer);
            for s in [502, 503, 504] {
                assert_eq!(classify_status(leg, s), RetriableFailure);
            }
        }
    }

    #[test]
    fn a_refused_hedge_is_shed_work_and_a_primary_5xx_a_server_error() {
        for status in [409, 425, 429, 503] {
            assert_eq!(health_outcome(Leg::Hedge, status), Outcome::Shed);
        }
        assert_eq!(health_outcome(Leg::Primary, 503), Outcome::ServerError);
        assert_eq!(health_outcome(Leg::Primary, 429), Outcome::Success);
        assert_eq!(health_outcome(Leg::Hedge, 500), Outcome::ServerError);
        assert_eq!(health_outcome(Leg::Hedge, 404), Outcome::Success);
    }

    #[test]
    fn a_hedge_refused_as_a_duplicate_never_beats_the_pending_primary() {
        for status in [409, 425, 429] {
            assert_eq!(classify_status(Leg::Primary, status), Answer);
            let mut race = Race::new(true);
            assert_eq!(race.timer_fired(), Step::StartHedge);
            race.hedge_started();
            let refused = classify_status(Leg::Hedge, status);
            // The Hedger sends nothing in its place for these (hedger_tests).
            assert_eq!(
                race.leg_finished(Leg::Hedge, refused),
                Step::HedgeFailedFirst
            );
            assert_eq!(
                race.leg_finished(Leg::Primary, Answer),
                Step::Deliver(Leg::Primary)
            );
        }
    }
}
