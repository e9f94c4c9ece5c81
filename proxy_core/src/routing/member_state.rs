//! Per-member state that outlives config snapshots: in-flight count and health.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub struct MemberState {
    inflight: AtomicU64,
}

impl MemberState {
    pub fn inflight(&self) -> u64 {
        self.inflight.load(Ordering::Relaxed)
    }

    /// Count one request against the member until the guard drops.
    pub fn enter(self: &Arc<Self>) -> InflightGuard {
        self.inflight.fetch_add(1, Ordering::Relaxed);
        InflightGuard {
            state: Arc::clone(self),
        }
    }
}

pub struct InflightGuard {
    state: Arc<MemberState>,
}

impl Drop for InflightGuard {
    fn drop(&mut self) {
        self.state.inflight.fetch_sub(1, Ordering::Relaxed);
    }
}
