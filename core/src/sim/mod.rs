//! A deterministic discrete-event simulator of a PoP: open-loop arrivals
//! spread over N isolates, each running the very same [`Hedger`] the Worker
//! runs, against modelled origins, on a virtual clock.
//!
//! What workerd cannot do on a 2-core machine (hundreds of isolates,
//! thousands of requests a second, many algorithms side by side, the same
//! numbers for the same seed), this does in seconds. It models what the
//! Hedger sees: when each leg's answer arrives, what it says, and what an
//! abort does to an origin, and, with an aggregator, the PoP pushes and
//! replies; with an [`IsolateCpu`], each isolate's own event loop and the
//! CPU each request and leg costs it. It does not model bodies, the cache or coalescing.
//!
//! Native only: it is left out of the wasm build.
//!
//! [`Hedger`]: crate::race::Hedger

mod cacheable;
mod empirical;
mod engine;
mod hindsight;
mod isolate_cpu;
mod origin;
mod percentile;
mod report;
mod rng;
mod scenario;
mod timeline;

pub use cacheable::CacheSpec;
pub use empirical::Empirical;
pub use engine::{run, CacheCounts, Configuration, RunResult, SimParams, Tape, TapeEntry};
pub use hindsight::{BoundPoint, HindsightBound, Replay};
pub use isolate_cpu::IsolateCpu;
pub use origin::{Episode, LatencyModel, OriginSpec, StallSpec};
pub use percentile::percentile;
pub use report::{markdown_table, oracle_bound, summary_table, OracleBound, Row, SummaryLine};
pub use rng::Rng;
pub use scenario::{scenario, Scenario, SCENARIO_NAMES};
pub use timeline::{Block, Timeline};
