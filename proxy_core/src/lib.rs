//! sluicegate's data plane. See ARCHITECTURE.md for the map; the request path starts in
//! `server::serve` and `proxy::handle`.

// `unsafe` is refused everywhere but in the usage hand-off's ring (`usage/ring.rs`), whose
// cells are model-checked by loom (`make loom`).
#![deny(unsafe_code)]

pub mod access_log;
pub mod admission;
pub mod auth;
pub mod clock;
pub mod config;
pub mod core;
pub mod endpoint;
pub mod error;
pub mod fleet;
pub mod limits;
pub mod metrics;
pub mod private_fs;
pub mod proxy;
pub mod routing;
pub mod runtime;
pub mod server;
pub mod sse;
pub mod stats;
pub mod sync_shim;
pub mod tokens;
pub mod upstream;
pub mod usage;

#[cfg(feature = "python")]
mod py;

/// Cases per property test: `PROPTEST_CASES` when set (longer runs: `make proptest`), else the
/// test's own bound, small enough for `make test`.
#[cfg(test)]
pub(crate) fn test_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
