//! Connections to upstreams: the pooled client (the gateway's own HTTP/1.1 client for plain-HTTP
//! members, hyper's for TLS and h2, connect timing) and the guard that decides which addresses a
//! member may reach. The request path uses it; config compilation builds its clients; nothing
//! here knows about requests.

mod client;
mod error;
mod guard;
pub mod headers;
mod http1;
mod incoming;
mod reach;

pub use client::{ClientSettings, ConnectTiming, UpstreamBody, UpstreamClient};
pub use error::{BodyError, UpstreamError};
pub use guard::{embedded_v4, forbidden_address, is_metadata, AddressGuard};
pub use incoming::UpstreamIncoming;
