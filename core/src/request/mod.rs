//! Per-request rules: whether a request may be hedged, its route key, what is
//! sent to an origin, what is cached, coalescing, held bodies, the body idle
//! timeout, random ids.

pub mod body_watch;
pub mod coalesce;
pub mod eligibility;
pub mod held_bodies;
pub mod ids;
pub mod outbound;
pub mod route_key;
