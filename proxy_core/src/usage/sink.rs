//! Hand-off of usage events from the request path to the control plane's drainer.
//!
//! Events wait in a bounded in-memory queue until `drain` hands them out. The request path never
//! blocks here: admission asks `has_room()` first and refuses billable work when the backlog is at
//! its bound, so no accepted request's event is ever dropped.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::event::UsageEvent;

pub struct UsageSink {
    queue: Mutex<VecDeque<UsageEvent>>,
    ready: Condvar,
    capacity: usize,
    next_seq: AtomicU64,
}

impl UsageSink {
    pub fn new(capacity: usize) -> Self {
        Self {
            queue: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            capacity: capacity.max(1),
            next_seq: AtomicU64::new(1),
        }
    }

    pub fn pending(&self) -> usize {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether a new billable request may start. Requests already admitted may push the queue
    /// past `capacity` (by at most the number in flight); none of their events is dropped.
    pub fn has_room(&self) -> bool {
        self.pending() < self.capacity
    }

    pub fn record(&self, mut event: UsageEvent) {
        event.seq = self.next_seq.fetch_add(1, Ordering::Relaxed);
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        queue.push_back(event);
        drop(queue);
        self.ready.notify_one();
    }

    /// Up to `max` events, waiting up to `timeout` for the first one.
    pub fn drain(&self, max: usize, timeout: Duration) -> Vec<UsageEvent> {
        let deadline = Instant::now() + timeout;
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        while queue.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Vec::new();
            }
            queue = self.ready.wait_timeout(queue, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        let n = max.min(queue.len());
        queue.drain(..n).collect()
    }
}
