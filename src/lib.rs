//! hedgehog-edge: a Cloudflare Worker that hedges slow origin requests.
//!
//! A request goes to the primary origin; if it has not answered within a hedge
//! delay drawn from the measured latency distribution, a copy goes to a second
//! origin, the first answer wins and the loser is aborted. A token-bucket
//! budget bounds the extra origin load.
//!
//! Every decision is made by the `hedgehog-core` crate (plain Rust with time
//! passed in, no `worker` dependency); [`edge`] is the thin Worker layer that
//! performs its actions: fetches, timers, the cache, the Durable Object.

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod edge;
