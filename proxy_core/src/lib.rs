//! sluicegate's data plane. See ARCHITECTURE.md for the map; the request path starts in
//! `server::serve` and `proxy::handle`.

// `unsafe` is refused everywhere but in the usage hand-off's ring (`usage/ring.rs`), whose
// cells are model-checked by loom (`make loom`), the journal's memory-mapped segment file
// (`usage/mapped.rs`), the two scheduler calls of `sched.rs`, and the calls into the process's
// SQLite of `ledger/sqlite.rs`.
#![deny(unsafe_code)]

/// mimalloc for every allocation the core makes: the request path allocates a few dozen small
/// objects per request, and glibc's malloc spent about a tenth of the request path's
/// instructions on them (callgrind, 2026-12-01).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod access_log;
pub mod admission;
pub mod auth;
pub mod clock;
pub mod config;
pub mod core;
pub mod endpoint;
pub mod error;
pub mod fleet;
pub mod header_names;
pub mod json_str;
pub mod ledger;
pub mod limits;
pub mod log_file;
pub mod metrics;
pub mod private_fs;
pub mod process_log;
pub mod proxy;
pub mod routing;
pub mod runtime;
pub mod sched;
pub mod server;
pub mod sse;
pub mod stats;
pub mod sync_shim;
pub mod telemetry;
pub mod tls;
pub mod tokens;
pub mod translate;
pub mod upstream;
pub mod usage;

#[cfg(feature = "python")]
mod py;

#[cfg(test)]
mod layering_tests;

/// Cases per property test: `PROPTEST_CASES` when set (longer runs: `make proptest`), else the
/// test's own bound, small enough for `make test`.
#[cfg(test)]
pub(crate) fn test_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
