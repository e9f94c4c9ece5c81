//! Counters and histograms of the data plane. Recorded with relaxed atomics on the request path;
//! read at scrape time by the control plane's prometheus-client collector through
//! `Core.metrics_snapshot()`. No per-key labels: per-key figures live in SQL.

mod family;
mod histogram;
mod series;
mod snapshot;

pub use family::Family;
pub use histogram::{
    Histogram, HistogramSnapshot, DURATION_BUCKETS, STAGE_BUCKETS, TOKEN_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS,
};
pub use series::{GlobalSeries, LegSeries, PoolSeries};
pub use snapshot::{pool_gauges, render, FamilySnapshot, Sample};

use std::sync::Arc;

/// Every metric of one core.
pub struct Metrics {
    pub global: GlobalSeries,
    pub legs: Family<LegSeries>,
    pub pools: Family<PoolSeries>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            global: GlobalSeries::default(),
            legs: Family::new(&["model", "pool", "upstream"]),
            pools: Family::new(&["pool"]),
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
}
