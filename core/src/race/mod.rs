//! One request's race and the Hedger that decides it.
//!
//! The Worker asks the [`Hedger`] for a [`RacePlan`] when a request arrives
//! (`hedger.rs`: the primary, the hedge delay from the estimates), starts
//! the race, then hands it each [`RaceEvent`] (`events.rs`: the timer fired,
//! a leg answered or failed, the deadline passed, the client left) and
//! carries out the [`Action`] each returns (no I/O here: the driver sends
//! and aborts, and says whether a hedge went out). The state
//! machine of which leg may still win is `machine.rs`; what each leg did and
//! how the race ended is `state.rs`. Time is passed in, so tests drive a race
//! event by event on a clock they set, and the simulator drives the very
//! same Hedger.

mod events;
mod hedger;
mod machine;
mod plan;
mod state;

pub use hedger::Hedger;
pub use machine::{classify_status, health_outcome, hedge_refused, Leg, LegOutcome, Race, Step};
pub use plan::{HedgeCause, RacePlan, Route};
pub use state::{Action, LegRecord, RaceEnd, RaceEvent, RaceState, RaceSummary, INVALID_STATUS};
