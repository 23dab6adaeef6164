//! The Worker side of [`hedgehog_core::request::coalesce`] (kept by the isolate): a leader's guard that releases its
//! flight however the request ends, and a waiter's polling loop.
//!
//! Waiters poll on their own timers instead of being woken by the leader: a
//! wake-up from the leader would run the waiter's code inside the leader's
//! request, which the runtime does not allow to do I/O for another request.

use std::time::Duration;

use worker::Delay;

use super::clock::now_ms;
use super::isolate::{self, Shared};
use hedgehog_core::edge::{poll_interval_ms, FlightId, FlightState};

/// Held by the request leading a flight. Dropping it releases the waiters
/// to fetch for themselves, unless the isolate has the flight stored (a
/// store's copy was kept: [`LeaderGuard::disarm`]).
#[derive(Debug)]
pub(crate) struct LeaderGuard {
    isolate: Shared,
    key: String,
    id: FlightId,
    armed: bool,
}

impl LeaderGuard {
    pub(crate) fn new(isolate: &Shared, key: &str, id: FlightId) -> Self {
        Self {
            isolate: Shared::clone(isolate),
            key: key.to_string(),
            id,
            armed: true,
        }
    }

    /// The response is in the cache (waiters read it from there), and the
    /// isolate knows it (a store's copy kept, or an entry served): nothing
    /// to release.
    pub(crate) fn disarm(mut self) {
        self.armed = false;
    }
}

impl Drop for LeaderGuard {
    fn drop(&mut self) {
        if self.armed {
            isolate::try_with(&self.isolate, |i| i.flight_released(&self.key, self.id));
        }
    }
}

/// Waits until flight `id` for `key` is no longer pending (bounded by the
/// configured wait limit) and says how it ended; `None` when `client_gone`
/// says the client went away first (nobody is left waiting for it).
pub(crate) async fn wait_for(
    isolate: &Shared,
    key: &str,
    id: FlightId,
    client_gone: impl Fn() -> bool,
) -> Option<FlightState> {
    for n in 0u32.. {
        let sleep_ms = poll_interval_ms(n);
        Delay::from(Duration::from_millis(sleep_ms as u64)).await;
        if client_gone() {
            return None;
        }
        let state = isolate::try_with(isolate, |i| i.flight_state(key, id, now_ms()))
            .unwrap_or(FlightState::Released);
        if state != FlightState::Pending {
            return Some(state);
        }
    }
    Some(FlightState::Released)
}
