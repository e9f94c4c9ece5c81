//! Member selection: power of two choices among the members that can take a request now,
//! scored by in-flight requests and latency per unit of weight. An ejected member whose time is
//! up goes first, as its single probe.

use crate::config::Member;
use crate::routing::Availability;
use std::sync::Arc;

use smallvec::SmallVec;

fn score(m: &Member) -> f64 {
    let latency_ms = m.state.ttfb_ewma().as_secs_f64() * 1000.0;
    (m.state.inflight() as f64 + 1.0) * (latency_ms + 1.0) / f64::from(m.weight.max(1))
}

fn has_room(m: &Member) -> bool {
    m.weight > 0 && m.max_concurrency.is_none_or(|cap| m.state.inflight() < u64::from(cap))
}

/// Pick a member not in `exclude` (already tried for this request). `None` when no member can
/// take the request now (drained, full, ejected, cooling down, failing checks, drilled).
pub fn pick_member(members: &[Arc<Member>], exclude: &[usize]) -> Option<usize> {
    // On the stack for the pools most have; a larger one spills to the heap.
    let mut ready: SmallVec<[usize; 16]> = SmallVec::new();
    for (i, m) in members.iter().enumerate() {
        if exclude.contains(&i) || !has_room(m) {
            continue;
        }
        match m.state.availability() {
            Availability::ProbeReady if m.state.try_claim_probe() => return Some(i),
            Availability::Ready => ready.push(i),
            _ => {}
        }
    }
    match ready.len() {
        0 => None,
        1 => Some(ready[0]),
        n => {
            let total: u64 = ready.iter().map(|&i| u64::from(members[i].weight)).sum();
            let draw = || {
                let mut ticket = fastrand::u64(0..total.max(1));
                for &i in &ready {
                    let w = u64::from(members[i].weight);
                    if ticket < w {
                        return i;
                    }
                    ticket -= w;
                }
                ready[n - 1]
            };
            let (a, b) = (draw(), draw());
            Some(if score(&members[a]) <= score(&members[b]) { a } else { b })
        }
    }
}
