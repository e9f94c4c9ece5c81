//! Configuration: the payload the control plane sends (`model`), its validation and compilation
//! (`compile`) into the immutable `Snapshot` the request path reads, and the `Registry` of state
//! that survives swaps.

mod compile;
mod member;
mod model;
mod registry;
mod snapshot;

pub use compile::{apply_key_delta, compile, ConfigError};
pub use model::*;
pub use registry::{Lease, Registry};
/// The snapshot in force, shared by the request path and the tasks that walk it (health checks,
/// the load sampler): they receive this, not the request path's state.
pub type SnapshotCell = std::sync::Arc<arc_swap::ArcSwapOption<Snapshot>>;

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

#[cfg(test)]
mod properties {
    use std::sync::Arc;

    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::metrics::Metrics;
    use crate::upstream::AddressGuard;

    fn valid() -> Value {
        json!({
            "auth": {"key_pepper": "0123456789abcdef0123"},
            "tenants": [{"id": "t1", "limits": {"rpm": 60, "tpm": 1000}, "quota": {"period": "daily", "tokens": 500, "period_start": 0}}],
            "keys": [{"id": "k1", "tenant_id": "t1", "hash": "00".repeat(32), "prefix": "sk-sg-abcd",
                      "models": ["chat"], "limits": {"max_concurrency": 2}}],
            "pools": [{"id": "p1", "members": [{"id": "m1", "kind": "openai", "base_url": "http://127.0.0.1:9/v1",
                        "credential": "secret", "headers": {"openai-organization": "org-1"}, "forward_headers": ["anthropic-beta"]}],
                       "retry": {"max_attempts": 2}, "health_check": {"interval_ms": 1000}}],
            "routes": [{"alias": "chat", "chain": [{"pool": "p1", "model": "m"}], "max_output_tokens": 100}],
            "prices": [{"model": "chat", "version": 1, "input_per_mtok": 1, "output_per_mtok": 2, "reasoning_per_mtok": 5}]
        })
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<u64>().prop_map(|n| json!(n)),
            (-1e20f64..1e20).prop_map(|f| json!(f)),
            ".{0,12}".prop_map(Value::String),
            Just(json!([])),
            Just(json!({})),
        ]
    }

    /// Replace the value at one path (chosen by `picks`) of `value` with `with`.
    fn mutate(value: &mut Value, picks: &[prop::sample::Index], with: Value) {
        let Some((pick, rest)) = picks.split_first() else {
            *value = with;
            return;
        };
        match value {
            Value::Object(map) if !map.is_empty() => {
                let i = pick.index(map.len());
                if let Some((_, child)) = map.iter_mut().nth(i) {
                    mutate(child, rest, with);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                let i = pick.index(items.len());
                mutate(&mut items[i], rest, with);
            }
            _ => *value = with,
        }
    }

    #[test]
    fn the_valid_payload_compiles() {
        let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
        load(1, valid().to_string().as_bytes(), &registry).unwrap();
    }

    fn with_member(member: Value, model: &str) -> Result<Snapshot, ConfigError> {
        let mut payload = valid();
        payload["pools"][0]["members"] = json!([member]);
        payload["routes"][0]["chain"][0]["model"] = json!(model);
        let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
        load(1, payload.to_string().as_bytes(), &registry)
    }

    fn refused(member: Value, model: &str) -> ConfigError {
        match with_member(member, model) {
            Ok(_) => panic!("{model}: compiled"),
            Err(e) => e,
        }
    }

    #[test]
    fn azure_members_put_the_deployment_in_the_path_and_the_version_in_the_query() {
        let azure = json!({"id": "az", "kind": "azure_openai", "base_url": "https://res.example.com/openai/",
                           "credential": "k", "api_version": "2024-10-21"});
        let snapshot = with_member(azure.clone(), "gpt-4o-mini").unwrap();
        let leg = &snapshot.routes["chat"].chain[0];
        let uri = &leg.uris[0][crate::endpoint::Endpoint::ChatCompletions.index()];
        assert_eq!(
            uri,
            "https://res.example.com/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21"
        );
        let member = &leg.pool.members[0];
        assert_eq!(member.credential.as_ref().map(|(name, _)| name.as_str()), Some("api-key"));
        // A deployment name that would change the path or the query is refused.
        for model in ["a/b", "a?x=1", "../x", ""] {
            let e = refused(azure.clone(), model);
            assert!(e.path.ends_with(".model"), "{model}: {}", e.path);
        }
        let mut unversioned = azure.clone();
        unversioned.as_object_mut().unwrap().remove("api_version");
        assert_eq!(refused(unversioned, "m").path, "pools[0].members[0].api_version");
        let mut bad = azure;
        bad["api_version"] = json!("2024&x=1");
        assert!(with_member(bad, "m").is_err());
    }

    #[test]
    fn an_openai_member_may_name_its_credential_header() {
        let member = json!({"id": "m", "kind": "openai", "base_url": "http://127.0.0.1:9/v1", "credential": "k",
                            "auth_header": "X-Goog-Api-Key"});
        let snapshot = with_member(member.clone(), "m").unwrap();
        let (name, value) = snapshot.routes["chat"].chain[0].pool.members[0].credential.clone().unwrap();
        assert_eq!((name.as_str(), value.as_bytes()), ("x-goog-api-key", &b"k"[..]));
        for reserved in ["content-length", "host", "x-sluicegate-x", "traceparent"] {
            let mut m = member.clone();
            m["auth_header"] = json!(reserved);
            assert_eq!(refused(m, "m").path, "pools[0].members[0].auth_header", "{reserved}");
        }
        let anthropic =
            json!({"id": "m", "kind": "anthropic", "base_url": "http://127.0.0.1:9/v1", "auth_header": "a"});
        assert!(with_member(anthropic, "m").is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases(512)))]

        /// Any payload, however wrong, compiles or is refused with a message; never a panic.
        #[test]
        fn compile_never_panics(
            edits in prop::collection::vec((prop::collection::vec(any::<prop::sample::Index>(), 0..6), leaf()), 1..4),
        ) {
            let mut payload = valid();
            for (picks, with) in edits {
                mutate(&mut payload, &picks, with);
            }
            let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
            if let Err(e) = load(1, payload.to_string().as_bytes(), &registry) {
                prop_assert!(!e.message.is_empty());
            }
        }

        /// Bytes that are not even JSON are refused, never a panic.
        #[test]
        fn arbitrary_bytes_are_refused(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
            let _ = load(1, &bytes, &registry);
        }
    }
}
