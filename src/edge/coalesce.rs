//! The Worker side of [`hedgehog_core::request::coalesce`] (kept by the
//! isolate): a leader's guard that releases its flight however the request
//! ends. A waiter's polls are the proxy's, as the isolate says
//! ([`hedgehog_core::edge::Step::Wait`]).

use super::isolate::{self, Shared};
use hedgehog_core::edge::FlightId;

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
