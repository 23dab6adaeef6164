//! The PoP aggregate's I/O: the Durable Object that merges pushes
//! ([`aggregate`]) and an isolate's pushes to it ([`client`]).

pub(crate) mod aggregate;
pub(crate) mod link;
pub(crate) mod probes;

pub(crate) use link::colo;
