//! hedgehog-edge: a Cloudflare Worker that hedges slow origin requests.
//!
//! A request goes to the primary origin; if it has not answered within a hedge
//! delay drawn from the measured latency distribution, a copy goes to a second
//! origin, the first answer wins and the loser is aborted. A token-bucket
//! budget bounds the extra origin load.
//!
//! The decision logic is plain Rust with time passed in, unit-tested natively:
//! [`config`], [`sketch`], [`window`], [`estimator`], [`route_key`],
//! [`delay_policy`], [`budget`], [`health`], [`origin_pool`], [`hedge_gate`],
//! [`cache_policy`], [`coalesce`], [`eligibility`], [`race`], [`outbound`].
//! [`edge`] is the thin Worker layer that wires them to `fetch`.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod body_watch;
pub mod budget;
pub mod cache_policy;
pub mod coalesce;
pub mod config;
pub mod delay_policy;
pub mod edge;
pub mod eligibility;
pub mod estimator;
pub mod health;
pub mod hedge_gate;
pub mod hedger;
pub mod held_bodies;
pub mod no_hedge;
pub mod origin_pool;
pub mod outbound;
pub mod pop_aggregate;
pub mod pop_client;
pub mod pop_push;
pub mod race;
pub mod request_log;
pub mod route_key;
pub mod route_stats;
#[cfg(not(target_arch = "wasm32"))]
pub mod sim;
pub mod sketch;
pub mod window;
