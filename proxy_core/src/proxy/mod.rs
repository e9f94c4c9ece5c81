//! The request path: from an accepted HTTP request to a relayed upstream response.

mod auth;
mod context;
mod deferred;
mod forward;
mod handler;
pub mod headers;
pub mod peek;
mod relay;
pub mod respond;
pub mod shared;
mod trace;
pub mod upstream;

pub use handler::handle;
pub use shared::{ServerSettings, Shared};
