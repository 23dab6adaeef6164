//! PoP-wide aggregation: isolates push what they saw to one aggregator (a
//! Durable Object) and blend its reply into their own estimates.

pub mod aggregate;
pub mod link;
pub mod probes;
pub mod push;
pub mod upkeep;
