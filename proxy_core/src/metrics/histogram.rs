//! A fixed-bucket histogram of atomics: recording is a bucket search and two relaxed adds.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// OpenTelemetry GenAI `gen_ai.server.time_to_first_token` buckets (seconds).
pub const TTFT_BUCKETS: &[f64] =
    &[0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];
/// OpenTelemetry GenAI `gen_ai.server.time_per_output_token` buckets (seconds).
pub const TPOT_BUCKETS: &[f64] = &[0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5];
/// OpenTelemetry GenAI `gen_ai.server.request.duration` buckets (seconds, doubling).
pub const DURATION_BUCKETS: &[f64] =
    &[0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/// Short stages inside the gateway: queue wait, connect, overhead (seconds).
pub const STAGE_BUCKETS: &[f64] =
    &[0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0];
/// OpenTelemetry GenAI `gen_ai.client.token.usage` buckets (tokens per request).
pub const TOKEN_BUCKETS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];

pub struct Histogram {
    bounds: &'static [f64],
    /// One slot per bound plus the +Inf slot; not cumulative.
    counts: Box<[AtomicU64]>,
    /// Sum in micro-units of the observed value, so it can live in an atomic integer.
    sum_micros: AtomicU64,
}

#[derive(Debug, Clone, Serialize)]
pub struct HistogramSnapshot {
    /// `(upper bound, cumulative count)`; the last bound is +Inf (serialized as null).
    pub buckets: Vec<(Option<f64>, u64)>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(), sum_micros: AtomicU64::new(0) }
    }

    pub fn observe(&self, value: f64) {
        if !value.is_finite() || value < 0.0 {
            return;
        }
        let slot = self.bounds.partition_point(|bound| *bound < value);
        if let Some(counter) = self.counts.get(slot) {
            counter.fetch_add(1, Ordering::Relaxed);
        }
        self.sum_micros.fetch_add((value * 1e6).round() as u64, Ordering::Relaxed);
    }

    pub fn observe_duration(&self, value: Duration) {
        self.observe(value.as_secs_f64());
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.counts.len());
        for (i, counter) in self.counts.iter().enumerate() {
            cumulative += counter.load(Ordering::Relaxed);
            buckets.push((self.bounds.get(i).copied(), cumulative));
        }
        HistogramSnapshot { buckets, sum: self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6, count: cumulative }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_upper_inclusive() {
        let h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.1);
        h.observe(0.5);
        h.observe(5.0);
        h.observe(f64::NAN);
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(Some(0.1), 1), (Some(1.0), 2), (None, 3)]);
        assert_eq!(s.count, 3);
        assert!((s.sum - 5.6).abs() < 1e-9);
    }
}
