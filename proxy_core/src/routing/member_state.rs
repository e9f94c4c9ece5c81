//! Per-member state that outlives config snapshots: load, latency, health. Every field is an
//! atomic: the request path reads and updates it without locks.
//!
//! Health has four independent causes of absence: outlier ejection (consecutive upstream-origin
//! failures), a 429 cooldown (the member's own `retry-after`), a failed active health check, and a
//! drill (the operator forced it out). An ejected member whose time is up takes exactly one probe
//! request; its success re-admits the member, its failure ejects it again for longer.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{EjectionConfig, Pool};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Availability {
    Ready,
    /// Ejection time is up and nobody is probing it: the next request may probe.
    ProbeReady,
    Ejected,
    CoolingDown,
    CheckFailed,
    Drilled,
}

impl Availability {
    /// Gauge value of `sluicegate_upstream_state`.
    pub fn code(self) -> u8 {
        match self {
            Availability::Ready => 0,
            Availability::ProbeReady | Availability::Ejected => 1,
            Availability::CoolingDown => 2,
            Availability::CheckFailed => 3,
            Availability::Drilled => 4,
        }
    }
}

/// How one attempt on a member ended, as far as the member's health is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Success,
    /// Connect failure, reset, timeout, 5xx: counts toward ejection.
    Failure,
    /// The request's own fault (4xx) or the client's (went away): says nothing about the member.
    Neutral,
}

pub struct MemberState {
    base: Instant,
    inflight: AtomicU64,
    ttfb_ewma_us: AtomicU64,
    consecutive_failures: AtomicU32,
    times_ejected: AtomicU32,
    /// Milliseconds after `base`; 0 = never.
    ejected_until: AtomicU64,
    probing: AtomicBool,
    cooldown_until: AtomicU64,
    drill_until: AtomicU64,
    check_failures: AtomicU32,
    check_down: AtomicBool,
    next_check_at: AtomicU64,
    pub ejections_total: AtomicU64,
}

impl Default for MemberState {
    fn default() -> Self {
        Self {
            base: Instant::now(),
            inflight: AtomicU64::new(0),
            ttfb_ewma_us: AtomicU64::new(0),
            consecutive_failures: AtomicU32::new(0),
            times_ejected: AtomicU32::new(0),
            ejected_until: AtomicU64::new(0),
            probing: AtomicBool::new(false),
            cooldown_until: AtomicU64::new(0),
            drill_until: AtomicU64::new(0),
            check_failures: AtomicU32::new(0),
            check_down: AtomicBool::new(false),
            next_check_at: AtomicU64::new(0),
            ejections_total: AtomicU64::new(0),
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl MemberState {
    fn now_ms(&self) -> u64 {
        // +1 so that 0 keeps meaning "never".
        ms(Instant::now().saturating_duration_since(self.base)) + 1
    }

    pub fn inflight(&self) -> u64 {
        self.inflight.load(Ordering::Relaxed)
    }

    /// Mean time to response headers, for load balancing.
    pub fn ttfb_ewma(&self) -> Duration {
        Duration::from_micros(self.ttfb_ewma_us.load(Ordering::Relaxed))
    }

    pub fn availability(&self) -> Availability {
        let now = self.now_ms();
        if self.drill_until.load(Ordering::Acquire) > now {
            return Availability::Drilled;
        }
        if self.check_down.load(Ordering::Acquire) {
            return Availability::CheckFailed;
        }
        let ejected = self.ejected_until.load(Ordering::Acquire);
        if ejected != 0 {
            if ejected > now || self.probing.load(Ordering::Acquire) {
                return Availability::Ejected;
            }
            return Availability::ProbeReady;
        }
        if self.cooldown_until.load(Ordering::Acquire) > now {
            return Availability::CoolingDown;
        }
        Availability::Ready
    }

    /// Whether the member counts as ejected for the pool's ejection cap.
    pub fn is_ejected(&self) -> bool {
        self.ejected_until.load(Ordering::Acquire) != 0
    }

    /// Claim the single probe of an ejected member whose time is up.
    pub fn try_claim_probe(&self) -> bool {
        self.is_ejected()
            && self.ejected_until.load(Ordering::Acquire) <= self.now_ms()
            && self.probing.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Time until the member may be used again (cooldown, ejection, drill), if it is out.
    pub fn out_for(&self) -> Option<Duration> {
        let now = self.now_ms();
        let until = [&self.drill_until, &self.ejected_until, &self.cooldown_until]
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .max()
            .unwrap_or(0);
        (until > now).then(|| Duration::from_millis(until - now))
    }

    pub fn record_ttfb(&self, ttfb: Duration) {
        let sample = u64::try_from(ttfb.as_micros()).unwrap_or(u64::MAX);
        let _ = self.ttfb_ewma_us.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
            Some(if old == 0 { sample } else { old - old / 8 + sample / 8 })
        });
    }

    /// Apply a verdict. `ejected_in_pool` and `pool_size` enforce the ejection cap.
    pub fn judge(&self, verdict: Verdict, policy: &EjectionConfig, ejected_in_pool: usize, pool_size: usize) {
        let was_probe = self.probing.swap(false, Ordering::AcqRel);
        match verdict {
            Verdict::Success => {
                self.consecutive_failures.store(0, Ordering::Release);
                if was_probe || self.is_ejected() && self.ejected_until.load(Ordering::Acquire) <= self.now_ms() {
                    self.ejected_until.store(0, Ordering::Release);
                    let _ = self
                        .times_ejected
                        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |t| Some(t.saturating_sub(1)));
                }
            }
            Verdict::Neutral => {}
            Verdict::Failure => {
                let failures = self.consecutive_failures.fetch_add(1, Ordering::AcqRel) + 1;
                let threshold = policy.consecutive_failures;
                let trip = was_probe || (threshold > 0 && failures >= threshold && !self.is_ejected());
                if !trip {
                    return;
                }
                let cap = pool_size * policy.max_ejected_percent.min(100) as usize / 100;
                // A failed probe re-ejects a member already counted; a new ejection needs room.
                if !was_probe && ejected_in_pool + 1 > cap {
                    return;
                }
                let times = self.times_ejected.fetch_add(1, Ordering::AcqRel);
                let base = policy.base_ms.max(1) as f64;
                let length = (base * 2f64.powi(times.min(16) as i32)).min(policy.max_ms.max(1) as f64);
                let jittered = length * (0.9 + 0.2 * fastrand::f64());
                self.ejected_until.store(self.now_ms() + jittered as u64, Ordering::Release);
                self.consecutive_failures.store(0, Ordering::Release);
                self.ejections_total.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(ejected_ms = jittered as u64, "upstream member ejected after consecutive failures");
            }
        }
    }

    /// A 429: stay away for `after`, never shortening a cooldown already longer.
    pub fn cool_down(&self, after: Duration) {
        let until = self.now_ms() + ms(after);
        self.cooldown_until.fetch_max(until, Ordering::AcqRel);
    }

    /// Force the member out for `length` (zero ends a drill).
    pub fn drill(&self, length: Duration) {
        let until = if length.is_zero() { 0 } else { self.now_ms() + ms(length) };
        self.drill_until.store(until, Ordering::Release);
    }

    /// Whether an active check is due now; claims the slot until `interval` from now.
    pub fn check_due(&self, interval: Duration) -> bool {
        let now = self.now_ms();
        let next = self.next_check_at.load(Ordering::Acquire);
        next <= now
            && self
                .next_check_at
                .compare_exchange(next, now + ms(interval), Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
    }

    pub fn record_check(&self, healthy: bool, unhealthy_after: u32) {
        if healthy {
            self.check_failures.store(0, Ordering::Release);
            self.check_down.store(false, Ordering::Release);
        } else {
            let failures = self.check_failures.fetch_add(1, Ordering::AcqRel) + 1;
            if failures >= unhealthy_after.max(1) {
                self.check_down.store(true, Ordering::Release);
            }
        }
    }
}

/// A request's hold on a member: counts it in flight, and passes the attempt's verdict to the
/// member's health when dropped (with the pool's ejection policy and cap).
pub struct MemberLease {
    pool: Arc<Pool>,
    index: usize,
    verdict: Verdict,
}

impl MemberLease {
    pub fn new(pool: Arc<Pool>, index: usize) -> Self {
        pool.members[index].state.inflight.fetch_add(1, Ordering::Relaxed);
        Self { pool, index, verdict: Verdict::Neutral }
    }

    pub fn set_verdict(&mut self, verdict: Verdict) {
        self.verdict = verdict;
    }

    pub fn state(&self) -> &Arc<MemberState> {
        &self.pool.members[self.index].state
    }
}

impl Drop for MemberLease {
    fn drop(&mut self) {
        let members = &self.pool.members;
        let state = &members[self.index].state;
        state.inflight.fetch_sub(1, Ordering::Relaxed);
        let ejected = members.iter().filter(|m| m.state.is_ejected()).count();
        state.judge(self.verdict, &self.pool.ejection, ejected, members.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> EjectionConfig {
        EjectionConfig { consecutive_failures: 3, base_ms: 1000, max_ms: 3000, max_ejected_percent: 50 }
    }

    #[tokio::test(start_paused = true)]
    async fn consecutive_failures_eject_and_a_probe_readmits() {
        let m = MemberState::default();
        let p = policy();
        m.judge(Verdict::Failure, &p, 0, 4);
        m.judge(Verdict::Failure, &p, 0, 4);
        m.judge(Verdict::Neutral, &p, 0, 4); // a tenant's 400 says nothing
        assert_eq!(m.availability(), Availability::Ready);
        m.judge(Verdict::Failure, &p, 0, 4);
        assert_eq!(m.availability(), Availability::Ejected);
        let out = m.out_for().unwrap();
        assert!(out >= Duration::from_millis(899) && out <= Duration::from_millis(1101), "{out:?}");
        tokio::time::advance(Duration::from_millis(1101)).await;
        assert_eq!(m.availability(), Availability::ProbeReady);
        assert!(m.try_claim_probe());
        assert!(!m.try_claim_probe(), "one probe at a time");
        assert_eq!(m.availability(), Availability::Ejected);
        m.judge(Verdict::Success, &p, 1, 4);
        assert_eq!(m.availability(), Availability::Ready);
        assert_eq!(m.ejections_total.load(Ordering::Relaxed), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_probe_ejects_again_for_longer_up_to_the_maximum() {
        let m = MemberState::default();
        let p = policy();
        for _ in 0..3 {
            m.judge(Verdict::Failure, &p, 0, 4);
        }
        let mut lengths = Vec::new();
        for _ in 0..3 {
            let out = m.out_for().unwrap();
            lengths.push(out.as_millis());
            tokio::time::advance(out + Duration::from_millis(1)).await;
            assert!(m.try_claim_probe());
            m.judge(Verdict::Failure, &p, 1, 4);
        }
        assert!((900..=1100).contains(&lengths[0]), "{lengths:?}");
        assert!((1800..=2200).contains(&lengths[1]), "{lengths:?}");
        assert!((2700..=3300).contains(&lengths[2]), "{lengths:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn never_more_than_the_cap_of_a_pool_is_ejected() {
        let m = MemberState::default();
        let p = policy();
        for _ in 0..10 {
            m.judge(Verdict::Failure, &p, 1, 2); // the other member of two is already out
        }
        assert_eq!(m.availability(), Availability::Ready);
        for _ in 0..10 {
            m.judge(Verdict::Failure, &p, 0, 1); // a pool of one is never emptied
        }
        assert_eq!(m.availability(), Availability::Ready);
    }

    #[tokio::test(start_paused = true)]
    async fn cooldowns_never_shorten_and_drills_end() {
        let m = MemberState::default();
        m.cool_down(Duration::from_secs(10));
        m.cool_down(Duration::from_secs(2));
        assert_eq!(m.availability(), Availability::CoolingDown);
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(m.availability(), Availability::CoolingDown);
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(m.availability(), Availability::Ready);
        m.drill(Duration::from_secs(60));
        assert_eq!(m.availability(), Availability::Drilled);
        m.drill(Duration::ZERO);
        assert_eq!(m.availability(), Availability::Ready);
    }

    #[tokio::test(start_paused = true)]
    async fn health_checks_take_out_and_bring_back() {
        let m = MemberState::default();
        assert!(m.check_due(Duration::from_secs(1)));
        assert!(!m.check_due(Duration::from_secs(1)));
        m.record_check(false, 2);
        assert_eq!(m.availability(), Availability::Ready);
        m.record_check(false, 2);
        assert_eq!(m.availability(), Availability::CheckFailed);
        m.record_check(true, 2);
        assert_eq!(m.availability(), Availability::Ready);
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(m.check_due(Duration::from_secs(1)));
    }
}
