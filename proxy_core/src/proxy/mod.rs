//! The request path: from an accepted HTTP request to a relayed upstream response.

mod attribution;
mod auth;
mod body;
mod context;
mod deferred;
mod forward;
mod forwarded;
mod handler;
mod metrics_port;
pub mod peek;
mod relay;
pub mod respond;
pub mod shared;
mod spans;
mod trace;

pub use body::BodyBudget;
pub use handler::handle;
pub use metrics_port::MetricsPort;
pub use shared::{ServerSettings, Shared};
