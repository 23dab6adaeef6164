//! hedgehog-edge's decision core: plain Rust with time passed in, no I/O.
//!
//! The Worker (the root crate) feeds a per-isolate [`hedger::Hedger`] events
//! (a request arrives, a timer fires, a leg answers) and performs the actions it
//! returns; [`sim`] drives the very same Hedger on a virtual clock.
//!
//! - [`estimation`]: latency sketches, sliding windows, the estimator, the hedge delay.
//! - [`admission`]: the hedge budget, origin health, origin choice, the gate that
//!   combines them.
//! - [`cache`]: the shared cache's rules: storability, freshness, keys, invalidation,
//!   conditional requests.
//! - [`request`]: per-request rules: eligibility, route keys, the outbound URL and
//!   headers, coalescing, held bodies, the body idle timeout.
//! - [`pop`]: PoP-wide aggregation: the push format, the aggregator, the client.
//! - [`observe`]: stats counters and the request log line.
//! - [`capped_map`]: the bound on every per-key table.
//! - [`config`], [`hedger`], [`race`], [`no_hedge`]: the configuration, the
//!   Hedger, one race's state machine, and why a request was not hedged.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod admission;
pub mod cache;
pub mod capped_map;
pub mod config;
pub mod estimation;
pub mod hedger;
pub mod no_hedge;
pub mod observe;
pub mod pop;
pub mod race;
pub mod request;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;
