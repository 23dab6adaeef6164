//! Request coalescing: identical concurrent cacheable misses in one isolate
//! wait for a single origin fetch (the *flight*) instead of each making one.
//!
//! A Worker may not hand one request's streams or responses to another (the
//! runtime refuses I/O across request contexts), so the waiters do not read
//! the leader's body. The leader stores its response in the edge cache as it
//! streams to its own client; when that store completes, the flight is
//! [`FlightState::Stored`] and each waiter reads the full body from the cache
//! in its own request. A response that is not storable, or a leader that
//! fails or goes away, *releases* the flight and the waiters fetch for
//! themselves, as they would have without coalescing.
//!
//! Bounded in size ([`CoalesceParams::max_flights`] keys,
//! [`CoalesceParams::max_waiters`] per flight) and in time (a waiter gives up
//! after [`CoalesceParams::max_wait_ms`], and a flight older than that no
//! longer takes waiters).

use std::collections::HashMap;

/// Coalescing limits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoalesceParams {
    /// Whether identical misses are coalesced at all.
    pub enabled: bool,
    /// Longest a waiter waits for the leader before fetching for itself.
    pub max_wait_ms: f64,
    /// Most flights (distinct keys) tracked at once.
    pub max_flights: usize,
    /// Most waiters on one flight; later arrivals fetch for themselves.
    pub max_waiters: u32,
}

/// Most waiters on one flight: past it, a hot key's latecomers fetch for
/// themselves rather than pile onto one leader.
pub const MAX_WAITERS_PER_FLIGHT: u32 = 1_000;

/// Identifies one flight; a key's next flight has a new id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlightId(u64);

/// What a request arriving for a key does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Fetch from the origin and report the result with [`Coalescer::stored`]
    /// or [`Coalescer::release`].
    Leader(FlightId),
    /// Wait for this flight (poll [`Coalescer::state`]).
    Waiter(FlightId),
    /// Not coalesced (disabled, or a limit was reached): fetch as usual.
    Alone,
}

/// Where a flight is, as a waiter sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlightState {
    /// The leader is still fetching or storing.
    Pending,
    /// The response is in the cache: read it from there.
    Stored,
    /// No shared response: fetch for yourself.
    Released,
    /// The flight is no longer tracked (its entry was reused for a newer
    /// flight): its outcome is unknown, so try the cache, then fetch.
    Unknown,
}

#[derive(Debug)]
struct Flight {
    id: FlightId,
    started_ms: f64,
    state: FlightState,
    waiters: u32,
}

/// The flights of one isolate, by cache key.
#[derive(Debug)]
pub struct Coalescer {
    params: CoalesceParams,
    flights: HashMap<String, Flight>,
    next_id: u64,
}

// === impl Coalescer ===

impl Coalescer {
    /// No flights yet.
    pub fn new(params: CoalesceParams) -> Self {
        Self {
            params,
            flights: HashMap::new(),
            next_id: 0,
        }
    }

    /// Number of flights tracked (pending or finished but not yet reused).
    pub fn len(&self) -> usize {
        self.flights.len()
    }

    /// Whether no flight is tracked.
    pub fn is_empty(&self) -> bool {
        self.flights.is_empty()
    }

    /// A request for `key` arrives at `now_ms`: lead a new flight, wait for a
    /// pending one, or go alone.
    pub fn join(&mut self, key: &str, now_ms: f64) -> Role {
        if !self.params.enabled {
            return Role::Alone;
        }
        let max_wait_ms = self.params.max_wait_ms;
        if let Some(flight) = self.flights.get_mut(key) {
            let live =
                flight.state == FlightState::Pending && now_ms - flight.started_ms < max_wait_ms;
            if live {
                if flight.waiters >= self.params.max_waiters {
                    return Role::Alone;
                }
                flight.waiters += 1;
                return Role::Waiter(flight.id);
            }
            // Finished or overdue: this request leads the key's next flight.
            self.next_id += 1;
            let id = FlightId(self.next_id);
            *flight = Flight::new(id, now_ms);
            return Role::Leader(id);
        }
        if self.flights.len() >= self.params.max_flights {
            self.forget_finished(now_ms);
            if self.flights.len() >= self.params.max_flights {
                return Role::Alone;
            }
        }
        self.next_id += 1;
        let id = FlightId(self.next_id);
        self.flights
            .insert(key.to_string(), Flight::new(id, now_ms));
        Role::Leader(id)
    }

    /// The state of flight `id` for `key` at `now_ms`. A pending flight past
    /// the wait limit reads as [`FlightState::Released`].
    pub fn state(&self, key: &str, id: FlightId, now_ms: f64) -> FlightState {
        match self.flights.get(key) {
            Some(flight) if flight.id == id => {
                let overdue = now_ms - flight.started_ms >= self.params.max_wait_ms;
                match flight.state {
                    FlightState::Pending if overdue => FlightState::Released,
                    state => state,
                }
            }
            _ => FlightState::Unknown,
        }
    }

    /// The leader's response is in the cache.
    pub fn stored(&mut self, key: &str, id: FlightId) {
        self.finish(key, id, FlightState::Stored);
    }

    /// The leader has no shared response (not storable, an error, a store
    /// failure, or it went away). Does nothing once the flight was stored.
    pub fn release(&mut self, key: &str, id: FlightId) {
        self.finish(key, id, FlightState::Released);
    }

    fn finish(&mut self, key: &str, id: FlightId, state: FlightState) {
        if let Some(flight) = self.flights.get_mut(key) {
            if flight.id == id && flight.state == FlightState::Pending {
                flight.state = state;
            }
        }
    }

    /// A write invalidated `key`: its flight (begun before the write) takes
    /// no new waiters, and its leader's later report changes nothing.
    /// Waiters already on it see [`FlightState::Unknown`] and look again.
    pub fn forget(&mut self, key: &str) {
        self.flights.remove(key);
    }

    /// Drops finished flights, and pending ones past twice the wait limit
    /// (their leader is gone without a word; no waiter still polls them).
    fn forget_finished(&mut self, now_ms: f64) {
        let max_wait_ms = self.params.max_wait_ms;
        self.flights.retain(|_, flight| {
            flight.state == FlightState::Pending && now_ms - flight.started_ms < 2.0 * max_wait_ms
        });
    }
}

impl Flight {
    fn new(id: FlightId, started_ms: f64) -> Self {
        Self {
            id,
            started_ms,
            state: FlightState::Pending,
            waiters: 0,
        }
    }
}

/// How long a waiter sleeps before its `n`th look at the flight (from 0):
/// 1, 2, 4, 8, then every 16 ms. Short at first because most flights of a
/// fast origin end within a few milliseconds; capped so a waiter notices
/// the end of a slow flight within 16 ms.
pub fn poll_interval_ms(n: u32) -> f64 {
    f64::from(1u32 << n.min(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coalescer() -> Coalescer {
        Coalescer::new(CoalesceParams {
            enabled: true,
            max_wait_ms: 1_000.0,
            max_flights: 2,
            max_waiters: 3,
        })
    }

    #[test]
    fn first_request_leads_and_concurrent_ones_wait() {
        let mut c = coalescer();
        let Role::Leader(id) = c.join("/a", 0.0) else {
            panic!("first request must lead")
        };
        assert_eq!(c.join("/a", 1.0), Role::Waiter(id));
        assert_eq!(c.state("/a", id, 2.0), FlightState::Pending);
        assert!(matches!(c.join("/b", 1.0), Role::Leader(_)));
    }

    #[test]
    fn waiters_see_the_stored_response() {
        let mut c = coalescer();
        let Role::Leader(id) = c.join("/a", 0.0) else {
            panic!()
        };
        c.stored("/a", id);
        assert_eq!(c.state("/a", id, 5.0), FlightState::Stored);
        // A late release (the leader's guard dropping) does not undo it.
        c.release("/a", id);
        assert_eq!(c.state("/a", id, 5.0), FlightState::Stored);
    }

    #[test]
    fn released_flight_sends_waiters_to_the_origin() {
        let mut c = coalescer();
        let Role::Leader(id) = c.join("/a", 0.0) else {
            panic!()
        };
        c.release("/a", id);
        assert_eq!(c.state("/a", id, 5.0), FlightState::Released);
        // The next request leads a new flight rather than waiting on a finished one.
        let Role::Leader(next) = c.join("/a", 6.0) else {
            panic!("a finished flight takes no waiters")
        };
        assert_ne!(next, id);
        assert_eq!(c.state("/a", id, 7.0), FlightState::Unknown);
    }

    #[test]
    fn waiters_give_up_after_the_wait_limit() {
        let mut c = coalescer();
        let Role::Leader(id) = c.join("/a", 0.0) else {
            panic!()
        };
        assert_eq!(c.state("/a", id, 999.0), FlightState::Pending);
        assert_eq!(c.state("/a", id, 1_000.0), FlightState::Released);
        // An overdue flight takes no new waiters; the newcomer leads.
        assert!(matches!(c.join("/a", 1_000.0), Role::Leader(n) if n != id));
    }

    #[test]
    fn waiters_per_flight_are_capped() {
        let mut c = coalescer();
        let Role::Leader(id) = c.join("/a", 0.0) else {
            panic!()
        };
        for _ in 0..3 {
            assert_eq!(c.join("/a", 1.0), Role::Waiter(id));
        }
        assert_eq!(c.join("/a", 1.0), Role::Alone);
    }

    #[test]
    fn flights_are_capped_and_finished_ones_make_room() {
        let mut c = coalescer();
        let Role::Leader(a) = c.join("/a", 0.0) else {
            panic!()
        };
        assert!(matches!(c.join("/b", 0.0), Role::Leader(_)));
        assert_eq!(c.join("/c", 0.0), Role::Alone, "both slots pending");
        c.stored("/a", a);
        assert!(matches!(c.join("/c", 1.0), Role::Leader(_)));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn a_leader_that_vanished_frees_its_slot_after_twice_the_wait() {
        let mut c = coalescer();
        assert!(matches!(c.join("/a", 0.0), Role::Leader(_)));
        assert!(matches!(c.join("/b", 0.0), Role::Leader(_)));
        assert_eq!(c.join("/c", 1_999.0), Role::Alone);
        assert!(matches!(c.join("/c", 2_000.0), Role::Leader(_)));
    }

    #[test]
    fn disabled_coalescer_sends_everyone_alone() {
        let mut c = Coalescer::new(CoalesceParams {
            enabled: false,
            ..crate::config::defaults().coalesce
        });
        assert_eq!(c.join("/a", 0.0), Role::Alone);
        assert_eq!(c.join("/a", 0.0), Role::Alone);
        assert!(c.is_empty());
    }

    #[test]
    fn poll_interval_doubles_then_stays_at_16_ms() {
        let steps: Vec<f64> = (0..7).map(poll_interval_ms).collect();
        assert_eq!(steps, vec![1.0, 2.0, 4.0, 8.0, 16.0, 16.0, 16.0]);
    }
}
