//! Configuration: the payload the control plane sends (`model`), its validation and compilation
//! (`compile`) into the immutable `Snapshot` the request path reads, and the `Registry` of state
//! that survives swaps.

mod compile;
mod model;
mod registry;
mod snapshot;

pub use compile::{apply_key_delta, compile, ConfigError};
pub use model::*;
pub use registry::{Lease, Registry};
pub use snapshot::{KeyEntry, Member, Pool, PoolTimeouts, Price, Route, RouteLeg, Snapshot, TenantEntry};

/// Apply a key change (JSON `KeyDelta`) on top of `old`.
pub fn load_key_delta(
    old: &Snapshot,
    version: u64,
    payload: &[u8],
    registry: &Registry,
) -> Result<Snapshot, ConfigError> {
    let mut de = serde_json::Deserializer::from_slice(payload);
    let delta: KeyDelta = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ConfigError { path: e.path().to_string(), message: e.inner().to_string() })?;
    de.end().map_err(|e| ConfigError { path: ".".into(), message: e.to_string() })?;
    let mut lease = registry.lease();
    let snapshot = apply_key_delta(old, version, &delta, &mut lease)?;
    lease.commit_partial();
    Ok(snapshot)
}

/// Parse and compile a payload; on success the registry keeps what the snapshot uses.
pub fn load(version: u64, payload: &[u8], registry: &Registry) -> Result<Snapshot, ConfigError> {
    let mut de = serde_json::Deserializer::from_slice(payload);
    let parsed: ConfigPayload = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| ConfigError { path: e.path().to_string(), message: e.inner().to_string() })?;
    de.end().map_err(|e| ConfigError { path: ".".into(), message: e.to_string() })?;
    let mut lease = registry.lease();
    let snapshot = compile(version, &parsed, &mut lease)?;
    lease.commit();
    Ok(snapshot)
}
