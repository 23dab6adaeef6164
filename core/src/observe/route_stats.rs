//! Per (primary origin, route key) counters for the stats endpoint: requests,
//! hedges sent and won, errors, and origin work spent on losers.
//!
//! Bounded like the estimator: at most `max_keys` keys; requests on further
//! keys are counted under one overflow entry, so a flood of distinct routes
//! cannot grow the table. Counters are totals since the isolate started, so
//! keys are never idle-evicted; a route label given up (see `route_labels`)
//! folds into the overflow entry.

use crate::admission::hedge_gate::HedgeCause;
use crate::admission::payoff::CAUSES;
use crate::capped_map::CappedMap;

/// What one finished request contributes.
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

/// Counters of one key.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RouteCounters {
    /// Requests.
    pub requests: u64,
    /// Hedges sent.
    pub hedges_sent: u64,
    /// Hedges whose answer was served.
    pub hedges_won: u64,
    /// Requests that ended in a 5xx or without an origin answer.
    pub errors: u64,
    /// Origin work on legs cut short, ms.
    pub wasted_ms: f64,
    /// Origin work on all legs, ms.
    pub origin_ms: f64,
    /// Hedges sent and won, by cause in [`CAUSES`] order.
    pub by_cause: [CauseCounters; 3],
}

/// Hedges of one cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CauseCounters {
    /// Sent.
    pub sent: u64,
    /// Whose answer was served.
    pub won: u64,
}

impl RouteCounters {
    fn merge(&mut self, other: &RouteCounters) {
        self.requests += other.requests;
        self.hedges_sent += other.hedges_sent;
        self.hedges_won += other.hedges_won;
        self.errors += other.errors;
        self.wasted_ms += other.wasted_ms;
        self.origin_ms += other.origin_ms;
        for (mine, theirs) in self.by_cause.iter_mut().zip(&other.by_cause) {
            mine.sent += theirs.sent;
            mine.won += theirs.won;
        }
    }

    fn add(&mut self, s: &RaceSummary) {
        if let (true, Some(cause)) = (s.hedge_sent, s.hedge_cause) {
            if let Some(slot) = CAUSES.iter().position(|c| *c == cause) {
                self.by_cause[slot].sent += 1;
                self.by_cause[slot].won += u64::from(s.hedge_won);
            }
        }
        self.requests += 1;
        self.hedges_sent += u64::from(s.hedge_sent);
        self.hedges_won += u64::from(s.hedge_won);
        self.errors += u64::from(s.error);
        self.wasted_ms += s.wasted_ms.max(0.0);
        self.origin_ms += s.origin_ms.max(0.0);
    }
}

/// Counters for every tracked key, plus the overflow.
#[derive(Debug)]
pub struct RouteStats {
    keys: CappedMap<(usize, String), RouteCounters>,
    overflow: RouteCounters,
}

// === impl RouteStats ===

impl RouteStats {
    /// Empty, holding at most `max_keys` keys.
    pub fn new(max_keys: usize) -> Self {
        Self {
            keys: CappedMap::new(max_keys, f64::INFINITY),
            overflow: RouteCounters::default(),
        }
    }

    /// Counts one request whose primary was `origin`.
    pub fn record(&mut self, origin: usize, route: &str, summary: &RaceSummary) {
        let key = (origin, route.to_string());
        match self
            .keys
            .get_or_insert_with(key, 0.0, RouteCounters::default)
        {
            Some(counters) => counters.add(summary),
            None => self.overflow.add(summary),
        }
    }

    /// `label` gave its place up (see `route_labels`): its counters, for
    /// every origin, move into the overflow entry.
    pub fn fold_route(&mut self, label: &str) {
        let keys: Vec<(usize, String)> = (self.keys.iter())
            .filter(|((_, route), _)| route == label)
            .map(|(key, _)| key.clone())
            .collect();
        for key in keys {
            if let Some(c) = self.keys.remove(&key) {
                self.overflow.merge(&c);
            }
        }
    }

    /// The tracked keys, in no particular order (a sort here would add
    /// ~3 KB to the compressed Worker for a page read by programs).
    pub fn keys(&self) -> impl Iterator<Item = (&(usize, String), &RouteCounters)> {
        self.keys.iter()
    }

    /// Requests on keys beyond the bound.
    pub fn overflow(&self) -> &RouteCounters {
        &self.overflow
    }

    /// Number of keys tracked.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether nothing was recorded on a tracked key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hedged(won: bool, wasted_ms: f64) -> RaceSummary {
        RaceSummary {
            hedge_sent: true,
            hedge_cause: Some(HedgeCause::Delay),
            hedge_won: won,
            error: false,
            wasted_ms,
            origin_ms: 100.0,
        }
    }

    #[test]
    fn counts_hedges_wins_errors_and_wasted_work_per_key() {
        let mut stats = RouteStats::new(8);
        stats.record(0, "/api", &hedged(true, 40.0));
        stats.record(0, "/api", &hedged(false, 10.0));
        stats.record(
            0,
            "/api",
            &RaceSummary {
                error: true,
                ..RaceSummary::default()
            },
        );
        let (_, c) = stats.keys().next().unwrap();
        assert_eq!(
            (c.requests, c.hedges_sent, c.hedges_won, c.errors),
            (3, 2, 1, 1)
        );
        assert_eq!((c.wasted_ms, c.origin_ms), (50.0, 200.0));
    }

    #[test]
    fn keys_beyond_the_bound_go_to_the_overflow() {
        let mut stats = RouteStats::new(2);
        for i in 0..100_000 {
            stats.record(0, &format!("/p{i}"), &RaceSummary::default());
        }
        assert_eq!(stats.len(), 2);
        assert_eq!(stats.overflow().requests, 99_998);
    }
}
