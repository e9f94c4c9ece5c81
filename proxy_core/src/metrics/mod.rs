//! Counters and histograms of the data plane. Recorded with relaxed atomics on the request path;
//! read at scrape time by the control plane's prometheus-client collector through
//! `Core.metrics_snapshot()`. No per-key labels: per-key figures live in SQL.

mod family;
mod genai;
mod histogram;
mod series;
mod snapshot;
mod tenants;

pub use family::Family;
pub use genai::render_genai;
pub use histogram::{
    Histogram, HistogramSnapshot, DURATION_BUCKETS, STAGE_BUCKETS, TOKEN_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS,
};
pub use series::{
    operation_index, GenAiSeries, GlobalSeries, LegSeries, OpSeries, PoolSeries, TenantSeries, ERROR_TYPES, OPERATIONS,
};
pub use snapshot::{pool_gauges, render, FamilySnapshot, Sample};
pub use tenants::{quota_gauges, render_tenants, OTHER_TENANT};

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Tenants with series of their own, by default (`Core(tenant_series=...)`).
pub const DEFAULT_TENANT_SERIES: usize = 100;

/// Every metric of one core.
pub struct Metrics {
    pub global: GlobalSeries,
    pub legs: Family<LegSeries>,
    pub pools: Family<PoolSeries>,
    pub genai: Family<GenAiSeries>,
    pub tenants: Family<TenantSeries>,
    tenant_series: AtomicUsize,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            global: GlobalSeries::default(),
            legs: Family::new(&["model", "pool", "upstream"]),
            pools: Family::new(&["pool"]),
            genai: Family::new(&genai::SERIES_LABELS),
            tenants: Family::new(&["tenant"]),
            tenant_series: AtomicUsize::new(DEFAULT_TENANT_SERIES),
        }
    }
}

impl Metrics {
    pub fn leg(&self, model: &str, pool: &str, upstream: &str) -> Arc<LegSeries> {
        self.legs.get_or_create(&[model, pool, upstream], LegSeries::default)
    }

    pub fn pool(&self, pool: &str) -> Arc<PoolSeries> {
        self.pools.get_or_create(&[pool], PoolSeries::default)
    }

    /// The GenAI series of a model alias on one member (labels in `genai`'s order).
    pub fn genai(&self, labels: &[&str; genai::SERIES_LABELS.len()]) -> Arc<GenAiSeries> {
        self.genai.get_or_create(labels, GenAiSeries::default)
    }

    /// How many tenants get series of their own; the rest share `tenant="other"`.
    pub fn set_tenant_series(&self, bound: usize) {
        self.tenant_series.store(bound, Ordering::Relaxed);
    }

    pub fn tenant_series_bound(&self) -> usize {
        self.tenant_series.load(Ordering::Relaxed)
    }

    /// A tenant's series: its own for the first `tenant_series` tenants the core compiled
    /// (kept for the process's life, so a counter never moves between series), `other` after.
    pub fn tenant(&self, tenant: &str) -> Arc<TenantSeries> {
        self.tenants.get_or_create_bounded(
            &[tenant],
            self.tenant_series_bound(),
            &[OTHER_TENANT],
            TenantSeries::default,
        )
    }
}
