//! What a hedge must answer for beyond the budget: that it pays (its cause
//! keeps winning), and a third attempt's own bound.
//!
//! The budget caps how many hedges go out; it cannot tell a hedge that
//! helps from one that only adds work. [`HedgePayoff`] keeps, per cause
//! (delay, stall, failure) and primary origin, the recent share of hedges
//! that won. A cause whose hedges almost never win is predicting a benefit
//! that is not there (the tail it hedges is the isolate's own queueing, or
//! the hedge target is as slow as the primary), so the share of its hedges
//! let out is halved, down to a floor that keeps measuring, and doubled
//! back once they win again. The two levels apart are the hysteresis.

use super::hedge_gate::HedgeCause;

/// A hedge cause's recent win share below this cuts its hedges.
pub const CUT_BELOW: f64 = 0.05;
/// ... and at or above this lets more out again.
pub const RESTORE_FROM: f64 = 0.10;
/// The smallest share of a cause's hedges let out: enough to see it pay again.
pub const FLOOR_SHARE: f64 = 1.0 / 16.0;
/// Hedges of a cause and origin before its share may change, and between changes.
const MIN_HEDGES: u64 = 32;
const BETWEEN_CHANGES: u32 = 16;
/// Each hedge's outcome moves the win share by this much of the difference.
const WIN_WEIGHT: f64 = 1.0 / 32.0;

/// Third attempts an isolate may bank per request it plans, and at most.
const THIRD_PER_REQUEST: f64 = 0.01;
const THIRD_MAX_TOKENS: f64 = 10.0;

/// The guards' configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GuardParams {
    /// Mean event-loop lag from which the isolate sends no hedge for a slow
    /// primary, ms (`HEDGE_TUNING.isolate_busy_lag_ms`; 0: off).
    pub busy_lag_ms: f64,
    /// Cut hedges of a cause that stopped winning (`HEDGE_TUNING.cut_unpaid`).
    pub cut_unpaid: bool,
    /// One more attempt when the primary and the hedge both failed fast
    /// (`HEDGE_TUNING.third_attempt`).
    pub third_attempt: bool,
}

/// One cause's record for one origin.
#[derive(Debug, Clone, Copy)]
pub struct PayoffCell {
    /// Hedges that finished (a share on fewer than `MIN_HEDGES` does not
    /// decide). How many won is counted once, with the race, in the metrics
    /// and the stats' `hedges_by_cause`.
    pub hedges: u64,
    /// Recent share of hedges that won.
    pub win_share: f64,
    /// Share of this cause's hedges let out now (1: all).
    pub let_out: f64,
    /// Hedges left out since the start.
    pub left_out: u64,
    credit: f64,
    since_change: u32,
}

impl Default for PayoffCell {
    fn default() -> Self {
        Self {
            hedges: 0,
            // Until measured, assume it pays.
            win_share: 1.0,
            let_out: 1.0,
            left_out: 0,
            credit: 0.0,
            since_change: 0,
        }
    }
}

/// Per cause and primary origin, whether hedges pay.
#[derive(Debug, Clone)]
pub struct HedgePayoff {
    enabled: bool,
    cells: Vec<[PayoffCell; 3]>,
}

fn slot(cause: HedgeCause) -> usize {
    match cause {
        HedgeCause::Delay => 0,
        HedgeCause::Stall => 1,
        HedgeCause::Failure => 2,
    }
}

/// The causes in the order [`HedgePayoff::cells`] lists them.
pub const CAUSES: [HedgeCause; 3] = [HedgeCause::Delay, HedgeCause::Stall, HedgeCause::Failure];

impl HedgePayoff {
    /// A record for `origins` origins; `enabled` false lets every hedge out.
    pub fn new(origins: usize, enabled: bool) -> Self {
        Self {
            enabled,
            cells: vec![[PayoffCell::default(); 3]; origins],
        }
    }

    /// Whether a hedge of `cause` for a primary on `origin` may go out. A
    /// cut cause lets out its share of them, evenly (no randomness: the same
    /// events give the same decisions).
    pub fn allow(&mut self, cause: HedgeCause, origin: usize) -> bool {
        if !self.enabled {
            return true;
        }
        let Some(cell) = self.cells.get_mut(origin).map(|c| &mut c[slot(cause)]) else {
            return true;
        };
        if cell.let_out >= 1.0 {
            return true;
        }
        cell.credit += cell.let_out;
        if cell.credit >= 1.0 {
            cell.credit -= 1.0;
            true
        } else {
            cell.left_out += 1;
            false
        }
    }

    /// A hedge of `cause` for a primary on `origin` finished: it `won` (its
    /// answer went to the client) or not.
    pub fn record(&mut self, cause: HedgeCause, origin: usize, won: bool) {
        let Some(cell) = self.cells.get_mut(origin).map(|c| &mut c[slot(cause)]) else {
            return;
        };
        cell.hedges += 1;
        let first = cell.hedges == 1;
        let outcome = if won { 1.0 } else { 0.0 };
        cell.win_share = if first {
            outcome
        } else {
            cell.win_share + WIN_WEIGHT * (outcome - cell.win_share)
        };
        cell.since_change = cell.since_change.saturating_add(1);
        if !self.enabled || cell.hedges < MIN_HEDGES || cell.since_change < BETWEEN_CHANGES {
            return;
        }
        if cell.win_share < CUT_BELOW && cell.let_out > FLOOR_SHARE {
            cell.let_out = (cell.let_out / 2.0).max(FLOOR_SHARE);
            cell.since_change = 0;
        } else if cell.win_share >= RESTORE_FROM && cell.let_out < 1.0 {
            cell.let_out = (cell.let_out * 2.0).min(1.0);
            cell.since_change = 0;
        }
    }

    /// Whether hedges of `cause` for `origin`'s primaries have been seen to
    /// win often (at or above [`RESTORE_FROM`] recently, over enough of
    /// them): then the delays they fix are the origin's, whatever else is
    /// slow. Too few to tell is not winning.
    pub fn winning(&self, cause: HedgeCause, origin: usize) -> bool {
        self.cells
            .get(origin)
            .map(|c| c[slot(cause)])
            .is_some_and(|c| c.hedges >= MIN_HEDGES && c.win_share >= RESTORE_FROM)
    }

    /// The record of `origin` by cause, in [`CAUSES`] order.
    pub fn cells(&self, origin: usize) -> Option<&[PayoffCell; 3]> {
        self.cells.get(origin)
    }
}

/// The isolate's allowance of third attempts: a share of the requests it
/// planned, banked up to a small burst.
#[derive(Debug, Clone)]
pub struct ThirdAttempts {
    tokens: f64,
    /// Double fast failures that found no allowance left (those sent are
    /// counted with the race, in the metrics).
    pub refused: u64,
}

impl Default for ThirdAttempts {
    fn default() -> Self {
        Self {
            tokens: 1.0,
            refused: 0,
        }
    }
}

impl ThirdAttempts {
    /// A hedge-eligible request was planned.
    pub fn deposit(&mut self) {
        self.tokens = (self.tokens + THIRD_PER_REQUEST).min(THIRD_MAX_TOKENS);
    }

    /// Takes one attempt, if the allowance has it.
    pub fn take(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            self.refused += 1;
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_that_keeps_losing_is_cut_to_the_floor_and_comes_back() {
        let mut payoff = HedgePayoff::new(2, true);
        let mut let_out = Vec::new();
        for _ in 0..400 {
            if payoff.allow(HedgeCause::Delay, 0) {
                payoff.record(HedgeCause::Delay, 0, false);
            }
            let_out.push(payoff.cells(0).map_or(1.0, |c| c[0].let_out));
        }
        let cell = payoff.cells(0).map(|c| c[0]).expect("origin 0");
        assert_eq!(cell.let_out, FLOOR_SHARE, "{let_out:?}");
        assert!(cell.left_out > 0);
        // Another cause and another origin are left alone.
        assert!(payoff.allow(HedgeCause::Stall, 0));
        assert!(payoff.allow(HedgeCause::Delay, 1));
        // Hedges win again: the share climbs back to all.
        for _ in 0..4_000 {
            if payoff.allow(HedgeCause::Delay, 0) {
                payoff.record(HedgeCause::Delay, 0, true);
            }
        }
        assert_eq!(payoff.cells(0).map(|c| c[0].let_out), Some(1.0));
    }

    #[test]
    fn a_cause_that_wins_a_tenth_of_the_time_is_not_cut() {
        // Rare stalls: most hedges lose, but the ones that win save a second.
        let mut payoff = HedgePayoff::new(1, true);
        for i in 0..1_000 {
            assert!(payoff.allow(HedgeCause::Delay, 0), "hedge {i} left out");
            payoff.record(HedgeCause::Delay, 0, i % 8 == 0);
        }
    }

    #[test]
    fn between_the_levels_the_share_holds() {
        let mut payoff = HedgePayoff::new(1, true);
        for _ in 0..200 {
            if payoff.allow(HedgeCause::Delay, 0) {
                payoff.record(HedgeCause::Delay, 0, false);
            }
        }
        let cut = payoff.cells(0).map_or(1.0, |c| c[0].let_out);
        assert!(cut < 1.0);
        // Winning 7% of the time: above the cut level, below the restore one.
        let mut sent = 0;
        for _ in 0..20_000 {
            if payoff.allow(HedgeCause::Delay, 0) {
                payoff.record(HedgeCause::Delay, 0, sent % 14 == 0);
                sent += 1;
            }
        }
        let share = payoff.cells(0).map(|c| c[0].win_share).unwrap_or(0.0);
        assert!((0.03..0.12).contains(&share), "{share}");
        assert!(payoff.cells(0).map_or(1.0, |c| c[0].let_out) < 1.0);
    }

    #[test]
    fn disabled_it_lets_everything_out() {
        let mut payoff = HedgePayoff::new(1, false);
        for _ in 0..500 {
            assert!(payoff.allow(HedgeCause::Delay, 0));
            payoff.record(HedgeCause::Delay, 0, false);
        }
    }

    #[test]
    fn third_attempts_are_a_share_of_requests() {
        let mut third = ThirdAttempts::default();
        assert!(third.take(), "one banked at the start");
        assert!(!third.take());
        for _ in 0..100 {
            third.deposit();
        }
        assert!(third.take());
        assert!(!third.take());
        for _ in 0..100_000 {
            third.deposit();
        }
        let burst = (0..100).filter(|_| third.take()).count();
        assert_eq!(burst, 10);
    }
}
