//! The hedge budget: a token bucket that bounds extra origin load.
//!
//! Every hedge-eligible request deposits `percent / 100` of a token and every
//! hedge spends one, so over time hedges stay under `percent`% of eligible
//! traffic. At low traffic that would allow almost nothing, so the bucket
//! also refills at `floor_per_sec` tokens per second. The balance is capped
//! at `max_tokens`: a quiet spell cannot bank a burst of hedges, which is
//! exactly when a struggling origin can least afford one.
//!
//! The bucket starts *empty*: a PoP runs many isolates, and one that started
//! full would let every new isolate hedge its first `max_tokens` requests
//! whatever the PoP as a whole had spent. Every token is earned by a request
//! this isolate saw (or by the floor), so the isolates' hedges add up to the
//! budget share of the PoP's traffic. The floor is per isolate, so it adds up
//! too: it is off (0) by default.
//!
//! Over any span of `t` seconds with `n` eligible requests, hedges are at most
//! `b + n * percent / 100 + t * floor_per_sec`, where `b <= max_tokens` is
//! what the isolate had banked (earned earlier) when the span began.

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
    /// An empty bucket at `now_ms`: hedges are earned, never granted up front.
    pub fn new(params: BudgetParams, now_ms: f64) -> Self {
        Self {
            params,
            tokens: 0.0,
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

    /// Spends one token, running into debt of up to `overdraft` tokens;
    /// returns whether it was spent. Debt is paid back by later deposits
    /// before the balance reaches 1 again, so over time the bound above
    /// holds, shifted by at most `overdraft`.
    pub fn withdraw(&mut self, now_ms: f64, overdraft: f64) -> bool {
        self.refill(now_ms);
        if self.tokens >= 1.0 - overdraft.max(0.0) {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// The most tokens the bucket holds.
    pub fn capacity(&self) -> f64 {
        self.params.max_tokens
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
    fn a_new_bucket_is_empty_and_a_burst_is_paid_by_deposits_only() {
        let mut budget = HedgeBudget::new(PARAMS, 0.0);
        assert!(!budget.try_withdraw(0.0), "nothing banked at start");
        // All at one instant, so no floor refill: 10 * 0.5 deposited.
        assert_eq!(hedges_for(&mut budget, 10, 0.0, 0.0), 5);
    }

    #[test]
    fn many_fresh_isolates_stay_within_the_percentage_together() {
        // 1,000 isolates of one PoP, each taking 2 requests a second for a
        // minute, every request wanting a hedge: the PoP-wide rate is the
        // budget's, not 100% (a full bucket per isolate gave 100%).
        let params = BudgetParams {
            percent: 12.0,
            floor_per_sec: 0.0,
            max_tokens: 10.0,
        };
        let (mut hedges, mut requests) = (0usize, 0usize);
        for isolate in 0..1_000 {
            let mut budget = HedgeBudget::new(params, 0.0);
            let offset = f64::from(isolate) % 500.0;
            hedges += hedges_for(&mut budget, 120, 500.0, offset);
            requests += 120;
        }
        let rate = hedges as f64 / requests as f64;
        assert!(rate <= 0.12 + 1e-9, "PoP hedge rate {rate}");
        assert!(rate >= 0.11, "the budget should be usable: {rate}");
    }

    #[test]
    fn busy_traffic_is_held_to_the_percentage() {
        let mut budget = HedgeBudget::new(PARAMS, 0.0);
        // 10,000 requests at 1,000 rps for 10 s: bound is 5,000 + 10.
        let paid = hedges_for(&mut budget, 10_000, 1.0, 0.0);
        assert!(paid <= 5_000 + 10, "{paid}");
        assert!(paid >= 5_000, "the budget should be usable: {paid}");
    }

    #[test]
    fn quiet_traffic_gets_the_floor() {
        let params = BudgetParams {
            percent: 0.0,
            ..PARAMS
        };
        let mut budget = HedgeBudget::new(params, 0.0);
        // Nothing banked; one request every 2 s is paid by the floor.
        assert_eq!(hedges_for(&mut budget, 5, 0.0, 0.0), 0);
        assert_eq!(hedges_for(&mut budget, 50, 2_000.0, 2_000.0), 50);
    }

    #[test]
    fn a_quiet_spell_cannot_bank_a_burst() {
        let mut budget = HedgeBudget::new(PARAMS, 0.0);
        let first = hedges_for(&mut budget, 100, 0.0, 0.0);
        assert!(first <= 50, "{first}");
        // An hour of silence refills only to the cap: 5 banked + 50 deposited
        // (less the deposit the full bucket could not hold), no more.
        let after_an_hour = hedges_for(&mut budget, 100, 0.0, 3_600_000.0);
        assert!(after_an_hour <= 5 + 50, "{after_an_hour}");
    }

    #[test]
    fn zero_percent_and_zero_floor_never_hedge_after_the_bank() {
        let params = BudgetParams {
            percent: 0.0,
            floor_per_sec: 0.0,
            max_tokens: 1.0,
        };
        let mut budget = HedgeBudget::new(params, 0.0);
        assert_eq!(hedges_for(&mut budget, 1_000, 10.0, 0.0), 0);
    }

    #[test]
    fn a_clock_going_backwards_adds_nothing() {
        let params = BudgetParams {
            percent: 0.0,
            floor_per_sec: 1.0,
            max_tokens: 1.0,
        };
        let mut budget = HedgeBudget::new(params, 9_000.0);
        assert!(budget.try_withdraw(10_000.0));
        assert!(!budget.try_withdraw(0.0));
        assert!(!budget.try_withdraw(10_500.0));
        assert!(budget.try_withdraw(11_000.0));
    }
}
