//! The request path: from an accepted HTTP request to a relayed upstream response.

mod auth;
mod body;
mod context;
mod deferred;
mod forward;
mod handler;
pub mod peek;
mod relay;
pub mod respond;
pub mod shared;
mod trace;

pub use body::BodyBudget;
pub use handler::handle;
pub use shared::{ServerSettings, Shared};
