//! Per-pool admission: a cap on requests at the upstreams and bounded, prioritised lanes for the
//! rest. A full lane, a tenant over its share of a lane, or a wait that would pass the request's
//! deadline is refused at once with 503 and a `retry-after` from the queue's recent service rate.

mod gate;
pub mod lanes;

pub use gate::{Entry, Permit, PoolGate, Ticket};

#[cfg(test)]
mod tests;
