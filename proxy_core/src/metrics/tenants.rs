//! Per-tenant requests, tokens and cost, and how much of each quota is used. The tenant label is
//! bounded (`Metrics::tenant`): the first `tenant_series` tenants the core compiles get series of
//! their own for the process's life, every later one counts under `tenant="(other)"` (a value
//! no tenant id can take). Keys never get a label: their quotas are summed up as the highest
//! ratio and the number of keys past 85%.

use std::sync::atomic::Ordering;

use super::series::STATUS_CLASSES;
use super::snapshot::FamilySnapshot;
use super::Metrics;
use crate::config::{QuotaConfig, Snapshot};
use crate::limits::{LimitState, QuotaState};

/// The tenant label of every tenant past the bound.
pub const OTHER_TENANT: &str = "(other)";
/// The share of a quota past which a key counts as near its limit.
pub const NEAR_QUOTA: f64 = 0.85;

pub fn render_tenants(metrics: &Metrics) -> Vec<FamilySnapshot> {
    let mut requests = FamilySnapshot::with_labels(
        "sluicegate_tenant_requests_total",
        "counter",
        "Requests that reached routing, by tenant (at most tenant_series of them; the rest as (other)).",
        vec!["tenant", "status_class"],
    );
    let mut tokens = FamilySnapshot::with_labels(
        "sluicegate_tenant_tokens_total",
        "counter",
        "Tokens billed, by tenant and type (input or output).",
        vec!["tenant", "type"],
    );
    let mut cost = FamilySnapshot::with_labels(
        "sluicegate_tenant_cost_total",
        "counter",
        "Cost billed, by tenant, in the prices' currency unit.",
        vec!["tenant"],
    );
    for (values, series) in metrics.tenants.collect() {
        let tenant = values.first().map(|v| v.to_string()).unwrap_or_default();
        for (i, class) in STATUS_CLASSES.iter().enumerate() {
            let count = series.requests[i].load(Ordering::Relaxed);
            if count > 0 {
                requests.push_value(vec![tenant.clone(), (*class).to_string()], count as f64);
            }
        }
        for (kind, counter) in [("input", &series.input_tokens), ("output", &series.output_tokens)] {
            tokens.push_value(vec![tenant.clone(), kind.to_string()], counter.load(Ordering::Relaxed) as f64);
        }
        cost.push_value(vec![tenant], series.cost_micros.load(Ordering::Relaxed) as f64 / 1e6);
    }
    vec![requests, tokens, cost]
}

/// The used share of a quota in the period `now` is in (the larger of tokens and cost): the
/// core's live count, or in a fleet the larger of it and what the shared store last said.
fn used_ratio(config: &QuotaConfig, state: &QuotaState, limits: &LimitState, now: i64) -> f64 {
    let (mut tokens, mut cost) = state.used_in(config, now);
    let chunk = &limits.leased.quota;
    if chunk.period() == crate::limits::quota_period_start(config, now) {
        let (t, c) = chunk.reported_use();
        tokens = tokens.max(u64::try_from(t).unwrap_or(0));
        cost = cost.max(u64::try_from(c).unwrap_or(0));
    }
    let share = |used: u64, limit: Option<u64>| match limit {
        Some(0) => 1.0,
        Some(limit) => used as f64 / limit as f64,
        None => 0.0,
    };
    share(tokens, config.tokens).max(share(cost, config.cost_micros))
}

/// Quota gauges read from the snapshot in force at scrape time.
pub fn quota_gauges(metrics: &Metrics, snapshot: &Snapshot, now: i64) -> Vec<FamilySnapshot> {
    let mut tenants = FamilySnapshot::with_labels(
        "sluicegate_tenant_quota_used_ratio",
        "gauge",
        "Share of the tenant's quota used this period (the larger of tokens and cost); (other): the highest past the bound.",
        vec!["tenant"],
    );
    let mut by_label: std::collections::BTreeMap<String, f64> = std::collections::BTreeMap::new();
    let named = metrics.tenants.collect();
    for tenant in snapshot.tenants.values() {
        let Some(config) = &tenant.quota else {
            continue;
        };
        let ratio = used_ratio(config, &tenant.quota_state, &tenant.limit_state, now);
        let own = named.iter().any(|(values, _)| values.first().is_some_and(|v| **v == *tenant.id));
        let label = if own { tenant.id.to_string() } else { OTHER_TENANT.to_string() };
        let slot = by_label.entry(label).or_insert(0.0);
        *slot = slot.max(ratio);
    }
    for (label, ratio) in by_label {
        tenants.push_value(vec![label], ratio);
    }
    let (mut highest, mut near) = (0.0f64, 0u64);
    for key in snapshot.keys.values() {
        if let Some(config) = &key.quota {
            let ratio = used_ratio(config, &key.quota_state, &key.limit_state, now);
            highest = highest.max(ratio);
            near += u64::from(ratio >= NEAR_QUOTA);
        }
    }
    vec![
        tenants,
        FamilySnapshot::gauge(
            "sluicegate_key_quota_used_ratio_max",
            "The highest share of its quota any key has used this period (keys carry no label).",
            highest,
        ),
        FamilySnapshot::gauge(
            "sluicegate_keys_near_quota",
            "Keys that have used at least 85% of their quota this period.",
            near as f64,
        ),
    ]
}
