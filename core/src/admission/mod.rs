//! Admission: whether a hedge may go out and where (the budget, origin health,
//! origin choice, and the gate that combines them).

pub mod answer_shape;
pub mod budget;
pub mod health;
pub mod hedge_gate;
pub mod isolate_lag;
pub mod origin_load;
pub mod origin_pool;
pub mod payoff;
