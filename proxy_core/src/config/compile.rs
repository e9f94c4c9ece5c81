//! Validation and compilation of a `ConfigPayload` into a `Snapshot`. Every refusal names the
//! field at fault (`pools[1].members[0].base_url: ...`), and nothing is half-applied.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;

use super::member::compile_member;
use super::model::{
    AdmissionConfig, ConfigPayload, EjectionConfig, HealthCheckConfig, KeyConfig, KeyDelta, Limits, PoolConfig,
    QuotaConfig, RetryConfig, Timeouts,
};
use super::registry::Lease;
use super::snapshot::{KeyEntry, Pool, PoolTimeouts, Price, Route, RouteLeg, Snapshot, TenantEntry};
use crate::auth::{parse_hex_digest, KeyHasher};
use crate::routing::RetryPolicy;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

pub(super) fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError { path: path.into(), message: message.into() }
}

fn check_id(path: &str, id: &str) -> Result<(), ConfigError> {
    if id.is_empty() || id.len() > 200 || id.chars().any(char::is_control) {
        return Err(err(path, "must be 1-200 printable characters"));
    }
    Ok(())
}

pub fn compile(version: u64, payload: &ConfigPayload, lease: &mut Lease<'_>) -> Result<Snapshot, ConfigError> {
    if payload.auth.key_pepper.len() < 16 {
        return Err(err("auth.key_pepper", "must be at least 16 bytes"));
    }
    let hasher =
        KeyHasher::new(payload.auth.key_pepper.as_bytes()).ok_or_else(|| err("auth.key_pepper", "refused by HMAC"))?;

    let mut tenants: HashMap<Arc<str>, Arc<TenantEntry>> = HashMap::new();
    for (i, t) in payload.tenants.iter().enumerate() {
        let path = format!("tenants[{i}].id");
        check_id(&path, &t.id)?;
        let id: Arc<str> = Arc::from(t.id.as_str());
        check_limits(&format!("tenants[{i}].limits"), &t.limits)?;
        let entry = Arc::new(TenantEntry {
            id: id.clone(),
            status: t.status,
            limits: t.limits.clone(),
            limit_state: lease.limit_state(format!("tenant/{}", t.id)),
            quota: check_quota(&format!("tenants[{i}].quota"), t.quota.as_ref())?,
            quota_state: lease.quota_state(format!("tenant/{}", t.id)),
            series: lease.metrics().tenant(&t.id),
        });
        if tenants.insert(id, entry).is_some() {
            return Err(err(path, format!("duplicate tenant id {:?}", t.id)));
        }
    }

    let mut pools: HashMap<&str, Arc<Pool>> = HashMap::new();
    for (i, p) in payload.pools.iter().enumerate() {
        let pool = compile_pool(&format!("pools[{i}]"), p, lease)?;
        if pools.insert(p.id.as_str(), Arc::new(pool)).is_some() {
            return Err(err(format!("pools[{i}].id"), format!("duplicate pool id {:?}", p.id)));
        }
    }

    let mut prices: HashMap<&str, Price> = HashMap::new();
    for (i, p) in payload.prices.iter().enumerate() {
        check_id(&format!("prices[{i}].model"), &p.model)?;
        let flat = Price::flat(p.version, p.input_per_mtok, p.output_per_mtok);
        let price = Price {
            cached_input_per_mtok: p.cached_input_per_mtok.unwrap_or(flat.cached_input_per_mtok),
            cache_write_per_mtok: p.cache_write_per_mtok.unwrap_or(flat.cache_write_per_mtok),
            reasoning_per_mtok: p.reasoning_per_mtok.unwrap_or(flat.reasoning_per_mtok),
            ..flat
        };
        if prices.insert(p.model.as_str(), price).is_some() {
            return Err(err(format!("prices[{i}].model"), format!("two prices for {:?}", p.model)));
        }
    }

    let mut routes: HashMap<Arc<str>, Arc<Route>> = HashMap::new();
    for (i, r) in payload.routes.iter().enumerate() {
        let path = format!("routes[{i}]");
        check_id(&format!("{path}.alias"), &r.alias)?;
        if r.chain.is_empty() {
            return Err(err(format!("{path}.chain"), "needs at least one pool"));
        }
        let mut seen = HashSet::new();
        let mut chain = Vec::with_capacity(r.chain.len());
        for (j, target) in r.chain.iter().enumerate() {
            let tpath = format!("{path}.chain[{j}]");
            let pool = pools
                .get(target.pool.as_str())
                .ok_or_else(|| err(format!("{tpath}.pool"), format!("unknown pool {:?}", target.pool)))?;
            if !seen.insert(target.pool.as_str()) {
                return Err(err(format!("{tpath}.pool"), "pool listed twice in one chain"));
            }
            check_id(&format!("{tpath}.model"), &target.model)?;
            let model_json =
                serde_json::to_vec(&target.model).map_err(|e| err(format!("{tpath}.model"), e.to_string()))?;
            let mut uris = Vec::with_capacity(pool.members.len());
            for m in &pool.members {
                uris.push(match &m.azure {
                    None => m.uris.clone(),
                    Some(azure) => azure.uris(&target.model).ok_or_else(|| {
                        err(
                            format!("{tpath}.model"),
                            "names the Azure deployment: 1-64 of A-Z a-z 0-9 _ - . (not starting with .)",
                        )
                    })?,
                });
            }
            let series = pool.members.iter().map(|m| lease.metrics().leg(&r.alias, &pool.id, &m.id)).collect();
            let genai = pool
                .members
                .iter()
                .map(|m| {
                    let port = m.port.to_string();
                    let labels = [m.kind.as_str(), &r.alias, &target.model, &m.host, &port, &pool.id, &m.id];
                    lease.metrics().genai(&labels)
                })
                .collect();
            chain.push(RouteLeg {
                pool: pool.clone(),
                upstream_model: Arc::from(target.model.as_str()),
                model_json: Bytes::from(model_json),
                uris,
                series,
                genai,
            });
        }
        if r.max_output_tokens == Some(0) {
            return Err(err(format!("{path}.max_output_tokens"), "must be positive"));
        }
        let alias: Arc<str> = Arc::from(r.alias.as_str());
        let price = prices.get(r.alias.as_str()).copied();
        let windows = lease.route_windows(&r.alias);
        let route =
            Arc::new(Route { alias: alias.clone(), chain, max_output_tokens: r.max_output_tokens, price, windows });
        if routes.insert(alias, route).is_some() {
            return Err(err(format!("{path}.alias"), format!("duplicate route alias {:?}", r.alias)));
        }
    }

    let mut keys = HashMap::with_capacity(payload.keys.len());
    let mut key_ids = HashMap::with_capacity(payload.keys.len());
    for (i, k) in payload.keys.iter().enumerate() {
        let path = format!("keys[{i}]");
        let entry = compile_key(&path, k, &tenants, lease)?;
        if key_ids.insert(entry.id.clone(), entry.hash).is_some() {
            return Err(err(format!("{path}.id"), format!("duplicate key id {:?}", k.id)));
        }
        if keys.insert(entry.hash, entry).is_some() {
            return Err(err(format!("{path}.hash"), "two keys share one hash"));
        }
    }

    let mut route_aliases: Vec<Arc<str>> = routes.keys().cloned().collect();
    route_aliases.sort();
    Ok(Snapshot {
        version,
        hasher,
        keys,
        key_ids,
        tenants,
        routes,
        route_aliases,
        pools: pools.into_iter().map(|(id, pool)| (Arc::<str>::from(id), pool)).collect(),
        usage_acked: payload.usage_acked,
    })
}

fn compile_key(
    path: &str,
    k: &KeyConfig,
    tenants: &HashMap<Arc<str>, Arc<TenantEntry>>,
    lease: &mut Lease<'_>,
) -> Result<Arc<KeyEntry>, ConfigError> {
    check_id(&format!("{path}.id"), &k.id)?;
    let hash = parse_hex_digest(&k.hash).ok_or_else(|| err(format!("{path}.hash"), "must be 64 hex characters"))?;
    let tenant = tenants
        .get(k.tenant_id.as_str())
        .ok_or_else(|| err(format!("{path}.tenant_id"), format!("unknown tenant {:?}", k.tenant_id)))?
        .clone();
    if k.expires_at.is_some_and(|t| !t.is_finite()) {
        return Err(err(format!("{path}.expires_at"), "must be a finite unix time"));
    }
    check_limits(&format!("{path}.limits"), &k.limits)?;
    Ok(Arc::new(KeyEntry {
        limit_state: lease.limit_state(format!("key/{}", k.id)),
        quota: check_quota(&format!("{path}.quota"), k.quota.as_ref())?,
        quota_state: lease.quota_state(format!("key/{}", k.id)),
        id: Arc::from(k.id.as_str()),
        hash,
        prefix: Arc::from(k.prefix.as_str()),
        tenant,
        status: k.status,
        expires_at: k.expires_at,
        models: k.models.as_ref().map(|m| m.iter().map(|a| Arc::<str>::from(a.as_str())).collect()),
        priority: k.priority,
        limits: k.limits.clone(),
    }))
}

/// A new snapshot from `old` with keys added, replaced or removed: what a key change costs at
/// 100k keys is this map edit, not a whole recompilation.
pub fn apply_key_delta(
    old: &Snapshot,
    version: u64,
    delta: &KeyDelta,
    lease: &mut Lease<'_>,
) -> Result<Snapshot, ConfigError> {
    let mut keys = old.keys.clone();
    let mut key_ids = old.key_ids.clone();
    for id in &delta.remove {
        if let Some(hash) = key_ids.remove(id.as_str()) {
            keys.remove(&hash);
            lease.forget(&format!("key/{id}"));
        }
    }
    for (i, k) in delta.upsert.iter().enumerate() {
        let path = format!("upsert[{i}]");
        let entry = compile_key(&path, k, &old.tenants, lease)?;
        if let Some(previous) = key_ids.insert(entry.id.clone(), entry.hash) {
            keys.remove(&previous);
        }
        if let Some(other) = keys.insert(entry.hash, entry.clone()) {
            if other.id != entry.id {
                return Err(err(format!("{path}.hash"), "two keys share one hash"));
            }
        }
    }
    Ok(Snapshot {
        version,
        hasher: old.hasher.clone(),
        keys,
        key_ids,
        tenants: old.tenants.clone(),
        routes: old.routes.clone(),
        route_aliases: old.route_aliases.clone(),
        pools: old.pools.clone(),
        usage_acked: delta.usage_acked,
    })
}

fn check_limits(path: &str, l: &Limits) -> Result<(), ConfigError> {
    for (name, value) in [("rpm", l.rpm), ("tpm", l.tpm), ("rpm_burst", l.rpm_burst), ("tpm_burst", l.tpm_burst)] {
        if value == Some(0) {
            return Err(err(format!("{path}.{name}"), "must be positive when set"));
        }
    }
    if l.max_concurrency == Some(0) {
        return Err(err(format!("{path}.max_concurrency"), "must be positive when set"));
    }
    Ok(())
}

fn check_quota(path: &str, q: Option<&QuotaConfig>) -> Result<Option<QuotaConfig>, ConfigError> {
    let Some(q) = q else {
        return Ok(None);
    };
    if q.tokens.is_none() && q.cost_micros.is_none() {
        return Err(err(path, "needs tokens or cost_micros (or no quota at all)"));
    }
    if q.period_start < 0 {
        return Err(err(format!("{path}.period_start"), "must be a unix time"));
    }
    Ok(Some(q.clone()))
}

fn check_admission(path: &str, a: &AdmissionConfig) -> Result<(), ConfigError> {
    if a.max_inflight == Some(0) {
        return Err(err(format!("{path}.max_inflight"), "must be positive when set"));
    }
    if !(a.tenant_share > 0.0 && a.tenant_share <= 1.0) {
        return Err(err(format!("{path}.tenant_share"), "must be in (0, 1]"));
    }
    if a.keepalive_ms == 0 {
        return Err(err(format!("{path}.keepalive_ms"), "must be positive"));
    }
    for (name, lane) in [("interactive", &a.interactive), ("batch", &a.batch)] {
        if lane.weight == 0 {
            return Err(err(format!("{path}.{name}.weight"), "must be positive"));
        }
        if lane.max_wait_ms > 3_600_000 {
            return Err(err(format!("{path}.{name}.max_wait_ms"), "must be at most one hour"));
        }
    }
    Ok(())
}

fn check_retry(path: &str, r: &RetryConfig) -> Result<(), ConfigError> {
    if r.max_attempts == 0 || r.max_attempts > 10 {
        return Err(err(format!("{path}.max_attempts"), "must be 1 to 10"));
    }
    if !(0.0..=10.0).contains(&r.budget_ratio) || !r.budget_ratio.is_finite() {
        return Err(err(format!("{path}.budget_ratio"), "must be 0 to 10"));
    }
    if !(0.0..=10_000.0).contains(&r.budget_min_per_second) || !r.budget_min_per_second.is_finite() {
        return Err(err(format!("{path}.budget_min_per_second"), "must be 0 to 10000"));
    }
    if r.backoff_cap_ms > 60_000 {
        return Err(err(format!("{path}.backoff_cap_ms"), "must be at most 60 s"));
    }
    Ok(())
}

fn check_ejection(path: &str, e: &EjectionConfig) -> Result<(), ConfigError> {
    if e.max_ejected_percent > 100 {
        return Err(err(format!("{path}.max_ejected_percent"), "must be 0 to 100"));
    }
    if e.base_ms == 0 || e.max_ms < e.base_ms {
        return Err(err(format!("{path}.base_ms"), "must be positive and at most max_ms"));
    }
    Ok(())
}

fn check_health(path: &str, h: &HealthCheckConfig) -> Result<(), ConfigError> {
    if !h.path.starts_with('/') {
        return Err(err(format!("{path}.path"), "must start with /"));
    }
    if h.interval_ms < 100 || h.timeout_ms == 0 {
        return Err(err(format!("{path}.interval_ms"), "must be at least 100 ms, with a positive timeout"));
    }
    Ok(())
}

fn timeouts(path: &str, t: &Timeouts) -> Result<PoolTimeouts, ConfigError> {
    for (name, value) in [
        ("connect_ms", t.connect_ms),
        ("first_byte_ms", t.first_byte_ms),
        ("idle_ms", t.idle_ms),
        ("total_ms", t.total_ms),
    ] {
        if value == 0 || value > 24 * 3600 * 1000 {
            return Err(err(format!("{path}.timeouts.{name}"), "must be 1 ms to 24 h"));
        }
    }
    Ok(PoolTimeouts {
        connect: Duration::from_millis(t.connect_ms),
        first_byte: Duration::from_millis(t.first_byte_ms),
        idle: Duration::from_millis(t.idle_ms),
        total: Duration::from_millis(t.total_ms),
    })
}

fn compile_pool(path: &str, p: &PoolConfig, lease: &mut Lease<'_>) -> Result<Pool, ConfigError> {
    check_id(&format!("{path}.id"), &p.id)?;
    if p.members.is_empty() {
        return Err(err(format!("{path}.members"), "needs at least one member"));
    }
    let pool_timeouts = timeouts(path, &p.timeouts)?;
    let mut ids = HashSet::new();
    let mut members = Vec::with_capacity(p.members.len());
    for (j, m) in p.members.iter().enumerate() {
        let mpath = format!("{path}.members[{j}]");
        check_id(&format!("{mpath}.id"), &m.id)?;
        if !ids.insert(m.id.as_str()) {
            return Err(err(format!("{mpath}.id"), format!("duplicate member id {:?}", m.id)));
        }
        let check_path = p.health_check.as_ref().map(|h| h.path.as_str());
        let member = compile_member(&mpath, &p.id, m, &pool_timeouts, check_path, lease)?;
        members.push(Arc::new(member));
    }
    // Members speak one API: OpenAI's (openai and azure_openai members may share a pool) or
    // Anthropic's.
    let kind = p.members[0].kind;
    if let Some(j) = p.members.iter().position(|m| m.kind.speaks_openai() != kind.speaks_openai()) {
        return Err(err(format!("{path}.members[{j}].kind"), "every member of a pool must speak the same API"));
    }
    if members.iter().all(|m| m.weight == 0) {
        return Err(err(format!("{path}.members"), "at least one member needs a weight above 0"));
    }
    let retry = RetryPolicy::compile(&p.retry).map_err(|m| err(format!("{path}.retry.retry_on"), m))?;
    check_retry(&format!("{path}.retry"), &p.retry)?;
    check_ejection(&format!("{path}.ejection"), &p.ejection)?;
    if let Some(hc) = &p.health_check {
        check_health(&format!("{path}.health_check"), hc)?;
    }
    let mut admission = p.admission.clone();
    check_admission(&format!("{path}.admission"), &admission)?;
    if admission.max_inflight.is_none() {
        admission.max_inflight = p.members.iter().map(|m| m.max_concurrency).sum::<Option<u32>>();
    }
    Ok(Pool {
        id: Arc::from(p.id.as_str()),
        kind,
        served: Pool::served_by(members.iter().map(|m| m.kind)),
        members,
        timeouts: pool_timeouts,
        gate: lease.gate(&p.id, &admission),
        retry,
        ejection: p.ejection.clone(),
        health_check: p.health_check.clone(),
        state: lease.pool_state(&p.id),
        series: lease.metrics().pool(&p.id),
    })
}
