//! Connections to upstreams: the pooled client (HTTP/1.1 or h2, TLS, connect timing) and the
//! guard that decides which addresses a member may reach. The request path uses it; config
//! compilation builds its clients; nothing here knows about requests.

mod client;
mod guard;
pub mod headers;

pub use client::{ClientSettings, ConnectTiming, UpstreamBody, UpstreamClient};
pub use guard::{embedded_v4, forbidden_address, is_metadata, AddressGuard};
