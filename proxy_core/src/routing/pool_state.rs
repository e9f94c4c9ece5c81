//! Per-pool state that outlives config snapshots: the retry budget and an operator's drill.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use super::budget::RetryBudget;
use crate::stats::Windows;

pub struct PoolState {
    base: Instant,
    pub budget: RetryBudget,
    pub budget_exhausted: AtomicU64,
    drill_until: AtomicU64,
    /// Windowed figures of the pool for the status page and the doctor.
    pub windows: Windows,
}

impl Default for PoolState {
    fn default() -> Self {
        Self {
            base: Instant::now(),
            budget: RetryBudget::default(),
            budget_exhausted: AtomicU64::new(0),
            drill_until: AtomicU64::new(0),
            windows: Windows::default(),
        }
    }
}

impl PoolState {
    fn now_ms(&self) -> u64 {
        u64::try_from(Instant::now().saturating_duration_since(self.base).as_millis()).unwrap_or(u64::MAX) + 1
    }

    /// Force the whole pool out for `length` (zero ends the drill): its route's next pool serves.
    pub fn drill(&self, length: Duration) {
        let until =
            if length.is_zero() { 0 } else { self.now_ms() + u64::try_from(length.as_millis()).unwrap_or(u64::MAX) };
        self.drill_until.store(until, Ordering::Release);
    }

    pub fn drilled(&self) -> bool {
        self.drill_until.load(Ordering::Acquire) > self.now_ms()
    }
}
