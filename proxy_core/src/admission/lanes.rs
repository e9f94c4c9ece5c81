//! The waiting lines of one pool: a FIFO lane per priority class, a per-tenant count per lane,
//! and smooth weighted round-robin between lanes (nginx's algorithm): when both lanes have
//! waiters, each class gets its weight's share of the freed slots, so interactive traffic goes
//! first and batch traffic is never starved.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tokio::sync::oneshot;

use super::gate::Permit;
use crate::config::Priority;

pub const LANES: usize = Priority::ALL.len();

pub struct Waiter {
    pub id: u64,
    pub tenant: Arc<str>,
    pub tx: oneshot::Sender<Permit>,
}

#[derive(Default)]
pub struct Lanes {
    lanes: [VecDeque<Waiter>; LANES],
    tenants: [HashMap<Arc<str>, u32>; LANES],
    credit: [i64; LANES],
}

impl Lanes {
    pub fn depth(&self, lane: usize) -> usize {
        self.lanes[lane].len()
    }

    pub fn is_empty(&self) -> bool {
        self.lanes.iter().all(VecDeque::is_empty)
    }

    pub fn tenant_depth(&self, lane: usize, tenant: &str) -> u32 {
        self.tenants[lane].get(tenant).copied().unwrap_or(0)
    }

    pub fn push(&mut self, lane: usize, waiter: Waiter) {
        *self.tenants[lane].entry(waiter.tenant.clone()).or_default() += 1;
        self.lanes[lane].push_back(waiter);
    }

    fn forget_tenant(&mut self, lane: usize, tenant: &Arc<str>) {
        if let Some(count) = self.tenants[lane].get_mut(tenant) {
            *count -= 1;
            if *count == 0 {
                self.tenants[lane].remove(tenant);
            }
        }
    }

    /// Take a waiter out by id (it gave up). `None` if it was already served.
    pub fn remove(&mut self, lane: usize, id: u64) -> Option<Waiter> {
        let at = self.lanes[lane].iter().position(|w| w.id == id)?;
        let waiter = self.lanes[lane].remove(at)?;
        self.forget_tenant(lane, &waiter.tenant);
        Some(waiter)
    }

    /// The next waiter to serve, by smooth weighted round-robin over the non-empty lanes.
    pub fn pop_next(&mut self, weights: [u32; LANES]) -> Option<(usize, Waiter)> {
        let mut best: Option<usize> = None;
        let mut total = 0i64;
        for (lane, weight) in weights.iter().enumerate() {
            if self.lanes[lane].is_empty() {
                continue;
            }
            let weight = i64::from((*weight).max(1));
            total += weight;
            self.credit[lane] += weight;
            if best.is_none_or(|b| self.credit[lane] > self.credit[b]) {
                best = Some(lane);
            }
        }
        let lane = best?;
        self.credit[lane] -= total;
        let waiter = self.lanes[lane].pop_front()?;
        self.forget_tenant(lane, &waiter.tenant);
        Some((lane, waiter))
    }
}
