//! Admission to one pool: at most `max_inflight` requests at the upstreams, the rest waiting in
//! bounded lanes. The fast path takes no lock: a free slot when nobody waits is one CAS, and
//! giving a slot back when nobody waits is one atomic subtraction. Only a pool whose slots are
//! all taken touches its lanes, behind that pool's own mutex, in critical sections that are
//! O(1) (a cancellation O(lane depth)) and never span an await (ARCHITECTURE.md says why it
//! stays).
//!
//! A request that queues and a slot that frees at the same moment cannot miss each other: the
//! releaser subtracts from `inflight` and then reads `queued`; the queuer adds to `queued` and
//! then tries for a slot again (sequentially consistent, so one of the two sees the other).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::lanes::{Lanes, Waiter, LANES};
use crate::config::{AdmissionConfig, Priority};
use crate::error::{ErrorKind, GatewayError};

/// A slot at the upstreams; dropping it frees the slot for the next waiter.
pub struct Permit {
    gate: Option<Arc<PoolGate>>,
    since: Instant,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.release(self.since.elapsed());
        }
    }
}

impl Permit {
    /// Give the slot back without dispatching (the caller holds the lanes).
    fn disarm(mut self) {
        if let Some(gate) = self.gate.take() {
            gate.inflight.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// A place in a lane.
pub struct Ticket {
    gate: Arc<PoolGate>,
    lane: usize,
    id: u64,
    rx: oneshot::Receiver<Permit>,
    give_up_at: Instant,
    deadline_bound: bool,
    /// Out of the lane already (served, or left): dropping it takes no lock.
    left: bool,
}

pub struct PoolGate {
    config: ArcSwap<AdmissionConfig>,
    inflight: AtomicU32,
    queued: AtomicU32,
    depth: [AtomicU32; LANES],
    /// The most requests that ever waited at once in each lane: the evidence that the bound held.
    depth_peak: [AtomicU32; LANES],
    next_id: AtomicU64,
    /// Mean time a permit is held (exponentially weighted), for wait estimates.
    hold_ewma_us: AtomicU64,
    lanes: Mutex<Lanes>,
}

pub enum Entry {
    Admitted(Permit),
    Queued(Ticket),
}

impl PoolGate {
    pub fn new(config: AdmissionConfig) -> Self {
        Self {
            config: ArcSwap::from_pointee(config),
            inflight: AtomicU32::new(0),
            queued: AtomicU32::new(0),
            depth: std::array::from_fn(|_| AtomicU32::new(0)),
            depth_peak: std::array::from_fn(|_| AtomicU32::new(0)),
            next_id: AtomicU64::new(1),
            hold_ewma_us: AtomicU64::new(0),
            lanes: Mutex::new(Lanes::default()),
        }
    }

    pub fn inflight(&self) -> u32 {
        self.inflight.load(Ordering::Relaxed)
    }

    pub fn depth(&self, priority: Priority) -> u32 {
        self.depth[priority.index()].load(Ordering::Relaxed)
    }

    pub fn depth_peak(&self, priority: Priority) -> u32 {
        self.depth_peak[priority.index()].load(Ordering::Relaxed)
    }

    pub fn config(&self) -> Arc<AdmissionConfig> {
        self.config.load_full()
    }

    fn lock(&self) -> MutexGuard<'_, Lanes> {
        self.lanes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The lanes' lock, held by a test to show what does not wait for it.
    #[cfg(test)]
    pub(super) fn hold_lanes(&self) -> MutexGuard<'_, Lanes> {
        self.lock()
    }

    /// New limits take effect at once; waiters and slots in use are kept.
    pub fn reconfigure(self: &Arc<Self>, config: AdmissionConfig) {
        self.config.store(Arc::new(config));
        let mut lanes = self.lock();
        self.dispatch(&mut lanes);
    }

    fn try_slot(&self) -> bool {
        let max = self.config.load().max_inflight;
        match max {
            None => {
                self.inflight.fetch_add(1, Ordering::SeqCst);
                true
            }
            Some(max) => {
                self.inflight.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| (n < max).then_some(n + 1)).is_ok()
            }
        }
    }

    fn permit(self: &Arc<Self>) -> Permit {
        Permit { gate: Some(self.clone()), since: Instant::now() }
    }

    /// Estimated wait for the `position`-th waiter (0-based) at the recent service rate.
    fn estimated_wait(&self, position: usize) -> Duration {
        let hold = self.hold_ewma_us.load(Ordering::Relaxed);
        let slots = u64::from(self.config.load().max_inflight.unwrap_or(1).max(1));
        Duration::from_micros(hold.saturating_mul(position as u64 + 1) / slots)
    }

    fn retry_after(&self, position: usize) -> Duration {
        self.estimated_wait(position).max(Duration::from_secs(1))
    }

    /// Serve waiters while slots are free. Called with the lanes held.
    fn dispatch(self: &Arc<Self>, lanes: &mut Lanes) {
        let weights = self.config.load().weights();
        while !lanes.is_empty() && self.try_slot() {
            let Some((lane, waiter)) = lanes.pop_next(weights) else {
                self.inflight.fetch_sub(1, Ordering::AcqRel);
                break;
            };
            self.queued.fetch_sub(1, Ordering::AcqRel);
            self.depth[lane].fetch_sub(1, Ordering::AcqRel);
            if let Err(permit) = waiter.tx.send(self.permit()) {
                permit.disarm(); // the waiter gave up meanwhile; offer the slot to the next one
            }
        }
    }

    fn release(self: &Arc<Self>, held: Duration) {
        let sample = u64::try_from(held.as_micros()).unwrap_or(u64::MAX);
        let _ = self.hold_ewma_us.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            Some(if old == 0 { sample } else { old - old / 8 + sample / 8 })
        });
        self.inflight.fetch_sub(1, Ordering::SeqCst);
        if self.queued.load(Ordering::SeqCst) > 0 {
            let mut lanes = self.lock();
            self.dispatch(&mut lanes);
        }
    }

    /// Take a slot now, or a place in the request's lane, or be refused at once: lane full, the
    /// tenant over its share of the lane, or a wait that would pass the request's deadline.
    pub fn enter(
        self: &Arc<Self>,
        priority: Priority,
        tenant: &Arc<str>,
        deadline: Option<Instant>,
    ) -> Result<Entry, GatewayError> {
        if self.queued.load(Ordering::SeqCst) == 0 && self.try_slot() {
            return Ok(Entry::Admitted(self.permit()));
        }
        let config = self.config.load_full();
        let lane = priority.index();
        let lane_config = config.lane(priority);
        let mut lanes = self.lock();
        self.dispatch(&mut lanes);
        if lanes.is_empty() && self.try_slot() {
            return Ok(Entry::Admitted(self.permit()));
        }
        let position = lanes.depth(lane);
        if position >= lane_config.max_depth {
            return Err(GatewayError::new(
                ErrorKind::QueueFull,
                format!("the {} queue of this model is full; try again shortly", priority.as_str()),
            )
            .with_retry_after(self.retry_after(position)));
        }
        let share = ((lane_config.max_depth as f64 * config.tenant_share).ceil() as u32).max(1);
        if lanes.tenant_depth(lane, tenant) >= share {
            return Err(GatewayError::new(
                ErrorKind::TenantShareExceeded,
                format!("this tenant already holds its share ({share}) of the {} queue", priority.as_str()),
            )
            .with_retry_after(self.retry_after(position)));
        }
        let now = Instant::now();
        let lane_limit = now + Duration::from_millis(lane_config.max_wait_ms);
        let (give_up_at, deadline_bound) = match deadline {
            Some(d) if d <= lane_limit => (d, true),
            _ => (lane_limit, false),
        };
        if deadline_bound && now + self.estimated_wait(position) > give_up_at {
            return Err(GatewayError::new(
                ErrorKind::DeadlineExceeded,
                "the expected queue wait is longer than the request's deadline",
            )
            .with_retry_after(self.retry_after(position)));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        lanes.push(lane, Waiter { id, tenant: tenant.clone(), tx });
        self.queued.fetch_add(1, Ordering::SeqCst);
        let depth = self.depth[lane].fetch_add(1, Ordering::AcqRel) + 1;
        self.depth_peak[lane].fetch_max(depth, Ordering::Relaxed);
        // A slot freed after the check above, by a releaser that saw no one queued: take it
        // for the head of the lanes (this request, or one before it).
        self.dispatch(&mut lanes);
        Ok(Entry::Queued(Ticket { gate: self.clone(), lane, id, rx, give_up_at, deadline_bound, left: false }))
    }
}

impl Ticket {
    /// Wait for a slot until the lane's maximum wait or the request's deadline.
    pub async fn wait(mut self) -> Result<Permit, GatewayError> {
        match tokio::time::timeout_at(self.give_up_at, &mut self.rx).await {
            Ok(Ok(permit)) => {
                self.left = true; // the dispatcher took it out of the lane
                Ok(permit)
            }
            Ok(Err(_)) => Err(GatewayError::new(ErrorKind::Internal, "the admission queue dropped a waiter")),
            Err(_) => {
                if let Some(permit) = self.leave() {
                    return Ok(permit); // served at the last moment
                }
                let gate = &self.gate;
                let position = gate.depth[self.lane].load(Ordering::Relaxed) as usize;
                let (kind, message) = if self.deadline_bound {
                    (ErrorKind::DeadlineExceeded, "the request's deadline passed while it waited in the queue")
                } else {
                    (ErrorKind::QueueTimeout, "the request waited in the queue for the longest time allowed")
                };
                Err(GatewayError::new(kind, message).with_retry_after(gate.retry_after(position)))
            }
        }
    }

    /// Leave the lane; returns a permit if one was handed over in the meantime.
    fn leave(&mut self) -> Option<Permit> {
        self.left = true;
        let gate = self.gate.clone();
        let mut lanes = gate.lock();
        if lanes.remove(self.lane, self.id).is_some() {
            gate.queued.fetch_sub(1, Ordering::AcqRel);
            gate.depth[self.lane].fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        drop(lanes);
        self.rx.try_recv().ok()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // A client that goes away while queued frees its place; a permit already handed over is
        // dropped here too, which passes the slot on.
        if self.left {
            return;
        }
        let gate = self.gate.clone();
        let mut lanes = gate.lock();
        if lanes.remove(self.lane, self.id).is_some() {
            gate.queued.fetch_sub(1, Ordering::AcqRel);
            gate.depth[self.lane].fetch_sub(1, Ordering::AcqRel);
        }
    }
}
