//! hedgehog-edge's decision core: plain Rust with time passed in, no I/O.
//!
//! The Worker (the root crate) hands each request to its isolate's
//! [`isolate::Isolate`] in a few calls (accept, plan, the race's events,
//! complete) and performs what they return; the races' decisions are made by
//! the [`race::Hedger`], which [`sim`] drives on a virtual clock too.
//!
//! - [`estimation`]: latency sketches, sliding windows, the estimator, the hedge delay.
//! - [`admission`]: the hedge budget, origin health, origin choice, the gate that
//!   combines them.
//! - [`cache`]: the shared cache's rules: storability, freshness, keys, invalidation,
//!   conditional requests.
//! - [`request`]: per-request rules: eligibility, route keys, the outbound URL and
//!   headers, coalescing, held bodies, the body idle timeout.
//! - [`pop`]: PoP-wide aggregation: the push format, the aggregator, the client.
//! - [`observe`]: the metrics (every count, once) and the request log line.
//! - [`capped_map`]: the bound on every per-key table; [`vec_map`]: the ordered map
//!   every small table is kept in.
//! - [`header_list`]: a request's or response's header fields, handed in as one value.
//! - [`race`]: the Hedger and one race's plan, state machine and event handlers.
//! - [`isolate`]: the facade a request's pipeline calls: intake, cache use,
//!   the race, completion; the stats page's view.
//! - [`config`], [`no_hedge`]: the configuration, and why a request was not hedged.
//! - [`edge`]: everything the Worker's glue may name (it imports nothing else).

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod admission;
pub mod cache;
pub mod capped_map;
pub mod config;
pub mod edge;
pub mod estimation;
pub mod header_list;
pub mod isolate;
pub mod no_hedge;
pub mod observe;
pub mod pop;
pub mod race;
pub mod request;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;
pub mod vec_map;
