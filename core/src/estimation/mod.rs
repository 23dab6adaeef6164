//! Latency estimation: how long an origin and route take, and the hedge delay
//! drawn from it.

pub mod delay_plan;
pub mod delay_policy;
pub mod estimator;
pub mod hedge_benefit;
pub mod sketch;
pub mod window;
