//! The hedge budget: a token bucket that bounds extra origin load.
//!
//! Every hedge-eligible request deposits `percent / 100` of a token and every
//! hedge spends one, so over time hedges stay under `percent`% of eligible
//! traffic. At low traffic that would allow almost nothing, so the bucket
//! also refills at `floor_per_sec` tokens per second. The balance is capped
//! at `max_tokens`: a quiet spell cannot bank a burst of hedges, which is
//! exactly when a struggling origin can least afford one.
//!
//! Over any span of `t` seconds with `n` eligible requests, hedges are at most
//! `max_tokens + n * percent / 100 + t * floor_per_sec`.

/// Settings for a [`HedgeBudget`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetParams {
    /// Hedges allowed per 100 eligible requests (0 to 100).
    pub percent: f64,
    /// Tokens added per second regardless of traffic.
    pub floor_per_sec: f64,
    /// Most tokens the bucket holds (at least 1, or no hedge could ever be paid).
    pub max_tokens: f64,
}

/// A per-isolate token bucket for hedges.
#[derive(Debug, Clone)]
pub struct HedgeBudget {
    params: BudgetParams,
    tokens: f64,
    last_refill_ms: f64,
}

// === impl HedgeBudget ===

impl HedgeBudget {
    /// A full bucket at `now_ms`.
    pub fn new(params: BudgetParams, now_ms: f64) -> Self {
        Self {
            params,
            tokens: params.max_tokens,
            last_refill_ms: now_ms,
        }
    }

    /// An eligible request arrived: deposit its share.
    pub fn deposit(&mut self, now_ms: f64) {
        self.refill(now_ms);
        self.add(self.params.percent / 100.0);
    }

    /// Spends one token for a hedge if there is one; returns whether the hedge may go.
    pub fn try_withdraw(&mut self, now_ms: f64) -> bool {
        self.refill(now_ms);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Tokens available now (for stats).
    pub fn tokens(&mut self, now_ms: f64) -> f64 {
        self.refill(now_ms);
        self.tokens
    }

    fn refill(&mut self, now_ms: f64) {
        let elapsed_ms = now_ms - self.last_refill_ms;
        // A clock that stands still or goes back adds nothing.
        if elapsed_ms.is_finite() && elapsed_ms > 0.0 {
            self.add(self.params.floor_per_sec * elapsed_ms / 1000.0);
            self.last_refill_ms = now_ms;
        }
    }

    fn add(&mut self, tokens: f64) {
        self.tokens = (self.tokens + tokens).min(self.params.max_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 50% and whole-millisecond steps keep the float arithmetic exact.
    const PARAMS: BudgetParams = BudgetParams {
        percent: 50.0,
        floor_per_sec: 1.0,
        max_tokens: 5.0,
    };

    /// Sends `n` requests `gap_ms` apart, each wanting a hedge; returns hedges paid.
    fn hedges_for(budget: &mut HedgeBudget, n: usize, gap_ms: f64, start_ms: f64) -> usize {
        let mut paid = 0;
        for i in 0..n {
            let now = start_ms + i as f64 * gap_ms;
            budget.deposit(now);
            if budget.try_withdraw(now) {
                paid += 1;
            }
        }
        paid
    }

    #[test]
    fn a_burst_is_paid_by_the_bank_plus_deposits_only() {
        let mut budget = HedgeBudget::new(PARAMS, 0.0);
        // All at one instant, so no floor refill: 5 banked + 10 * 0.5
        // deposited, less the first deposit that the full bucket could not hold.
        assert_eq!(hedges_for(&mut budget, 10, 0.0, 0.0), 9);
    }

    #[test]
    fn busy_traffic_is_held_to_the_percentage() {
        let mut budget = HedgeBudget::new(PARAMS, 0.0);
        // 10,000 requests at 1,000 rps for 10 s: bound is 5 + 5,000 + 10.
        let paid = hedges_for(&mut budget, 10_000, 1.0, 0.0);
        assert!(paid <= 5 + 5_000 + 10, "{paid}");
        assert!(paid >= 5_000, "the budget should be usable: {paid}");
    }

    #[test]
    fn quiet_traffic_gets_the_floor() {
        let params = BudgetParams {
            percent: 0.0,
            ..PARAMS
        };
        let mut budget = HedgeBudget::new(params, 0.0);
        // After the bank is spent, one request every 2 s is paid by the floor.
        assert_eq!(hedges_for(&mut budget, 5, 0.0, 0.0), 5);
        assert_eq!(hedges_for(&mut budget, 50, 2_000.0, 2_000.0), 50);
    }

    #[test]
    fn a_quiet_spell_cannot_bank_a_burst() {
        let mut budget = HedgeBudget::new(PARAMS, 0.0);
        let first = hedges_for(&mut budget, 100, 0.0, 0.0);
        assert!(first <= 5 + 50, "{first}");
        // An hour of silence refills only to the cap: the same burst again, no more.
        let after_an_hour = hedges_for(&mut budget, 100, 0.0, 3_600_000.0);
        assert_eq!(after_an_hour, first);
    }

    #[test]
    fn zero_percent_and_zero_floor_never_hedge_after_the_bank() {
        let params = BudgetParams {
            percent: 0.0,
            floor_per_sec: 0.0,
            max_tokens: 1.0,
        };
        let mut budget = HedgeBudget::new(params, 0.0);
        assert_eq!(hedges_for(&mut budget, 1_000, 10.0, 0.0), 1);
    }

    #[test]
    fn a_clock_going_backwards_adds_nothing() {
        let params = BudgetParams {
            percent: 0.0,
            floor_per_sec: 1.0,
            max_tokens: 1.0,
        };
        let mut budget = HedgeBudget::new(params, 10_000.0);
        assert!(budget.try_withdraw(10_000.0));
        assert!(!budget.try_withdraw(0.0));
        assert!(!budget.try_withdraw(10_500.0));
        assert!(budget.try_withdraw(11_000.0));
    }
}
