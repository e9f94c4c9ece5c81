//! Admission under a paused clock: ordering, weights, shares, deadlines, reconfiguration.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::gate::{Entry, Permit, PoolGate, Ticket};
use crate::config::{AdmissionConfig, LaneConfig, Priority};
use crate::error::ErrorKind;

fn config(max_inflight: u32, depth: usize) -> AdmissionConfig {
    AdmissionConfig {
        max_inflight: Some(max_inflight),
        interactive: LaneConfig { max_depth: depth, max_wait_ms: 10_000, weight: 3 },
        batch: LaneConfig { max_depth: depth, max_wait_ms: 10_000, weight: 1 },
        tenant_share: 1.0,
        keepalive_ms: 1000,
    }
}

fn tenant(name: &str) -> Arc<str> {
    Arc::from(name)
}

fn admitted(entry: Entry) -> Permit {
    match entry {
        Entry::Admitted(p) => p,
        Entry::Queued(_) => panic!("expected a slot"),
    }
}

fn queued(entry: Entry) -> Ticket {
    match entry {
        Entry::Queued(t) => t,
        Entry::Admitted(_) => panic!("expected a queue place"),
    }
}

/// Spawn a waiter that reports its label when served, then holds its slot until told.
fn spawn_waiter(
    ticket: Ticket,
    label: &'static str,
    served: tokio::sync::mpsc::UnboundedSender<(&'static str, Permit)>,
) {
    tokio::spawn(async move {
        if let Ok(permit) = ticket.wait().await {
            let _ = served.send((label, permit));
        }
    });
}

#[tokio::test(start_paused = true)]
async fn free_slots_admit_at_once_then_requests_queue_in_order() {
    let gate = Arc::new(PoolGate::new(config(2, 10)));
    let t = tenant("t");
    let a = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let _b = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for label in ["first", "second", "third"] {
        spawn_waiter(queued(gate.enter(Priority::Interactive, &t, None).unwrap()), label, tx.clone());
        tokio::task::yield_now().await;
    }
    assert_eq!(gate.depth(Priority::Interactive), 3);
    drop(a);
    let (label, first) = rx.recv().await.unwrap();
    assert_eq!(label, "first");
    drop(first);
    let (label, _second) = rx.recv().await.unwrap();
    assert_eq!(label, "second");
    assert_eq!(gate.depth(Priority::Interactive), 1);
    // The peak remembers the deepest the lane got, after it drained.
    assert_eq!(gate.depth_peak(Priority::Interactive), 3);
    assert_eq!(gate.depth_peak(Priority::Batch), 0);
}

#[tokio::test(start_paused = true)]
async fn interactive_goes_first_and_batch_gets_its_weight() {
    let gate = Arc::new(PoolGate::new(config(1, 100)));
    let t = tenant("t");
    let holder = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    for _ in 0..8 {
        spawn_waiter(queued(gate.enter(Priority::Batch, &t, None).unwrap()), "batch", tx.clone());
    }
    for _ in 0..8 {
        spawn_waiter(queued(gate.enter(Priority::Interactive, &t, None).unwrap()), "interactive", tx.clone());
    }
    tokio::task::yield_now().await;
    drop(holder);
    let mut order = Vec::new();
    for _ in 0..8 {
        let (label, permit) = rx.recv().await.unwrap();
        order.push(label);
        drop(permit);
    }
    // Weights 3:1 while both lanes wait: three interactive for every batch, interactive first.
    assert_eq!(
        order,
        ["interactive", "interactive", "batch", "interactive", "interactive", "interactive", "batch", "interactive"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_lane_and_a_tenant_over_its_share_are_refused_at_once() {
    let mut cfg = config(1, 4);
    cfg.tenant_share = 0.5;
    let gate = Arc::new(PoolGate::new(cfg));
    let (greedy, polite) = (tenant("greedy"), tenant("polite"));
    let _holder = admitted(gate.enter(Priority::Interactive, &greedy, None).unwrap());
    let _g1 = queued(gate.enter(Priority::Interactive, &greedy, None).unwrap());
    let _g2 = queued(gate.enter(Priority::Interactive, &greedy, None).unwrap());
    let over = gate.enter(Priority::Interactive, &greedy, None).err().unwrap();
    assert_eq!(over.kind, ErrorKind::TenantShareExceeded);
    assert!(over.retry_after.is_some());
    let _p1 = queued(gate.enter(Priority::Interactive, &polite, None).unwrap());
    let _p2 = queued(gate.enter(Priority::Interactive, &polite, None).unwrap());
    let full = gate.enter(Priority::Interactive, &tenant("third"), None).err().unwrap();
    assert_eq!(full.kind, ErrorKind::QueueFull);
    // Another lane has its own room.
    let _batch = queued(gate.enter(Priority::Batch, &greedy, None).unwrap());
}

#[tokio::test(start_paused = true)]
async fn waits_end_at_the_lane_limit_or_the_deadline_and_never_reach_upstream() {
    let mut cfg = config(1, 10);
    cfg.interactive.max_wait_ms = 500;
    let gate = Arc::new(PoolGate::new(cfg));
    let t = tenant("t");
    let _holder = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let start = Instant::now();
    let lane_timeout = queued(gate.enter(Priority::Interactive, &t, None).unwrap()).wait().await.err().unwrap();
    assert_eq!(lane_timeout.kind, ErrorKind::QueueTimeout);
    assert_eq!(start.elapsed(), Duration::from_millis(500));
    let deadline = Instant::now() + Duration::from_millis(200);
    let dropped = queued(gate.enter(Priority::Interactive, &t, Some(deadline)).unwrap()).wait().await.err().unwrap();
    assert_eq!(dropped.kind, ErrorKind::DeadlineExceeded);
    assert_eq!(gate.depth(Priority::Interactive), 0);
    assert_eq!(gate.inflight(), 1);
}

#[tokio::test(start_paused = true)]
async fn a_wait_longer_than_the_deadline_is_refused_up_front() {
    let gate = Arc::new(PoolGate::new(config(1, 10)));
    let t = tenant("t");
    // Teach the gate that a request holds its slot for about a second.
    drop(admitted(gate.enter(Priority::Interactive, &t, None).unwrap()));
    let held = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    tokio::time::advance(Duration::from_secs(1)).await;
    drop(held);
    let _holder = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let soon = Instant::now() + Duration::from_millis(100);
    let refused = gate.enter(Priority::Interactive, &t, Some(soon)).err().unwrap();
    assert_eq!(refused.kind, ErrorKind::DeadlineExceeded);
}

#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_frees_its_place() {
    let gate = Arc::new(PoolGate::new(config(1, 10)));
    let t = tenant("t");
    let holder = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let leaver = queued(gate.enter(Priority::Interactive, &t, None).unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_waiter(queued(gate.enter(Priority::Interactive, &t, None).unwrap()), "stayer", tx);
    tokio::task::yield_now().await;
    drop(leaver);
    assert_eq!(gate.depth(Priority::Interactive), 1);
    drop(holder);
    assert_eq!(rx.recv().await.unwrap().0, "stayer");
}

#[tokio::test(start_paused = true)]
async fn reconfiguration_keeps_waiters_and_slots() {
    let gate = Arc::new(PoolGate::new(config(1, 10)));
    let t = tenant("t");
    let _holder = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    spawn_waiter(queued(gate.enter(Priority::Interactive, &t, None).unwrap()), "a", tx.clone());
    spawn_waiter(queued(gate.enter(Priority::Interactive, &t, None).unwrap()), "b", tx.clone());
    tokio::task::yield_now().await;
    // More slots: the waiters are served at once, the holder keeps its slot.
    gate.reconfigure(config(3, 10));
    let a = rx.recv().await.unwrap();
    let b = rx.recv().await.unwrap();
    assert_eq!((a.0, b.0), ("a", "b"));
    assert_eq!(gate.inflight(), 3);
    // A smaller lane refuses newcomers but keeps no one out who already holds a slot.
    gate.reconfigure(config(1, 0));
    let refused = gate.enter(Priority::Interactive, &t, None).err().unwrap();
    assert_eq!(refused.kind, ErrorKind::QueueFull);
    assert_eq!(gate.inflight(), 3);
}

/// Runs `work` on another thread while this one holds the pool's lanes: it finishes only if it
/// never waits for that lock.
fn without_the_lanes_lock(gate: &Arc<PoolGate>, work: impl FnOnce() + Send + 'static) -> bool {
    let lanes = gate.hold_lanes();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        work();
        let _ = tx.send(());
    });
    let finished = rx.recv_timeout(std::time::Duration::from_secs(30)).is_ok();
    drop(lanes);
    finished
}

#[test]
fn admitting_and_releasing_with_free_slots_takes_no_lock() {
    let gate = Arc::new(PoolGate::new(config(2, 10)));
    let g = gate.clone();
    let fast = without_the_lanes_lock(&gate, move || {
        let t = tenant("t");
        for _ in 0..1000 {
            let a = admitted(g.enter(Priority::Interactive, &t, None).unwrap());
            let b = admitted(g.enter(Priority::Batch, &t, None).unwrap());
            drop((a, b));
        }
    });
    assert!(fast, "the fast path waited for the lanes' lock");
    assert_eq!(gate.inflight(), 0);
}

#[test]
fn a_served_waiter_leaves_without_the_lock() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let gate = Arc::new(PoolGate::new(config(1, 10)));
    let t = tenant("t");
    let holder = admitted(gate.enter(Priority::Interactive, &t, None).unwrap());
    let ticket = queued(gate.enter(Priority::Interactive, &t, None).unwrap());
    drop(holder); // the slot goes to the waiter, under the lock (the pool is saturated)
    let served = without_the_lanes_lock(&gate, move || {
        let permit = runtime.block_on(ticket.wait()).unwrap();
        drop(permit);
    });
    assert!(served, "a served ticket took the lanes' lock");
    assert_eq!((gate.inflight(), gate.depth(Priority::Interactive)), (0, 0));
}
