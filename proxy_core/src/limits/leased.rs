//! What one replica holds of a key's or tenant's fleet-wide limits, leased from the shared store
//! (`fleet/`): bucket tokens for RPM and TPM, concurrency slots, a chunk of the quota period.
//! Only atomics: admission takes from what is held without a round trip, and the fleet's
//! housekeeping gives back what sits unused. Nothing here talks to the store.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use super::LimitState;
use crate::clock::monotonic_ms;

/// Tokens of one GCRA bucket held by this replica. May go below zero when a request used more
/// than it reserved (a debt the next lease pays first).
#[derive(Default)]
pub struct Allowance {
    tokens: AtomicI64,
    refilling: AtomicBool,
    last_take_ms: AtomicU64,
    /// The bucket's emission interval (microseconds per token) at the last lease, to give the
    /// tokens back at the same rate.
    pub interval_us: AtomicU64,
}

impl Allowance {
    /// Take `n` if that many are held.
    pub fn try_take(&self, n: i64) -> bool {
        let taken = self
            .tokens
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| (held >= n).then_some(held - n))
            .is_ok();
        if taken {
            self.last_take_ms.store(monotonic_ms(), Ordering::Relaxed);
        }
        taken
    }

    pub fn add(&self, n: i64) {
        self.tokens.fetch_add(n, Ordering::AcqRel);
    }

    pub fn level(&self) -> i64 {
        self.tokens.load(Ordering::Acquire)
    }

    /// Everything held (to give back); a debt stays.
    pub fn take_all(&self) -> i64 {
        self.tokens.fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| (held > 0).then_some(0)).unwrap_or(0)
    }

    /// Milliseconds since the last take.
    pub fn idle_ms(&self) -> u64 {
        monotonic_ms().saturating_sub(self.last_take_ms.load(Ordering::Relaxed))
    }

    /// One refill at a time: whoever gets `true` refills and then calls `refilled`.
    pub fn begin_refill(&self) -> bool {
        self.refilling.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    pub fn refilled(&self) {
        self.refilling.store(false, Ordering::Release);
    }
}

const IN_USE_MASK: u64 = 0xffff_ffff;

/// Concurrency slots: how many this replica holds from the store, and how many are in use, in
/// one word so that giving back a surplus never races an acquisition.
#[derive(Default)]
pub struct Slots {
    packed: AtomicU64,
    last_release_ms: AtomicU64,
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> 32, word & IN_USE_MASK)
}

impl Slots {
    /// Use a held slot, or one under `cap` slots in use when `cap` is given (the local share
    /// while the store is away).
    pub fn try_acquire(&self, cap: Option<u64>) -> bool {
        self.packed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
                let (held, in_use) = unpack(word);
                (in_use < cap.unwrap_or(held)).then_some(word + 1)
            })
            .is_ok()
    }

    pub fn release(&self) {
        self.packed.fetch_sub(1, Ordering::AcqRel);
        self.last_release_ms.store(monotonic_ms(), Ordering::Relaxed);
    }

    pub fn add_held(&self, n: u64) {
        self.packed.fetch_add(n << 32, Ordering::AcqRel);
    }

    /// Stop holding the slots not in use beyond `keep`; returns how many to give back.
    pub fn take_surplus(&self, keep: u64) -> u64 {
        let mut surplus = 0;
        let _ = self.packed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |word| {
            let (held, in_use) = unpack(word);
            surplus = held.saturating_sub(in_use + keep);
            (surplus > 0).then(|| word - (surplus << 32))
        });
        surplus
    }

    pub fn counts(&self) -> (u64, u64) {
        unpack(self.packed.load(Ordering::Acquire))
    }

    pub fn idle_ms(&self) -> u64 {
        monotonic_ms().saturating_sub(self.last_release_ms.load(Ordering::Relaxed))
    }
}

/// A chunk of one quota period held by this replica, and what it last learnt of the period's use
/// (for its share while the store is away).
pub struct QuotaChunk {
    period: AtomicI64,
    pub tokens: Allowance,
    pub cost: Allowance,
    /// The period's room (limit - use) at the last answer of the store; -1 unknown.
    room_tokens: AtomicI64,
    room_cost: AtomicI64,
    /// The period's use at the last answer of the store (a floor if the store loses its data),
    /// when that was (monotonic ms), and how fast the fleet was spending (per second, from the
    /// last two answers): what the fleet may have spent since this replica last heard.
    used_tokens: AtomicI64,
    used_cost: AtomicI64,
    known_at_ms: AtomicU64,
    rate_tokens: AtomicI64,
    rate_cost: AtomicI64,
    /// The period's limits at the last lease (-1: none), to judge the room the store reports.
    limit_tokens: AtomicI64,
    limit_cost: AtomicI64,
    /// This replica's share of the room while the store is away, fixed when it is first needed
    /// (-1: not yet), and what it spent of it.
    pub away_budget_tokens: AtomicI64,
    pub away_budget_cost: AtomicI64,
    pub away_tokens: AtomicI64,
    pub away_cost: AtomicI64,
}

impl Default for QuotaChunk {
    fn default() -> Self {
        Self {
            period: AtomicI64::new(i64::MIN),
            tokens: Allowance::default(),
            cost: Allowance::default(),
            room_tokens: AtomicI64::new(-1),
            room_cost: AtomicI64::new(-1),
            used_tokens: AtomicI64::new(0),
            used_cost: AtomicI64::new(0),
            known_at_ms: AtomicU64::new(0),
            rate_tokens: AtomicI64::new(0),
            rate_cost: AtomicI64::new(0),
            limit_tokens: AtomicI64::new(-1),
            limit_cost: AtomicI64::new(-1),
            away_budget_tokens: AtomicI64::new(-1),
            away_budget_cost: AtomicI64::new(-1),
            away_tokens: AtomicI64::new(0),
            away_cost: AtomicI64::new(0),
        }
    }
}

impl QuotaChunk {
    pub fn period(&self) -> i64 {
        self.period.load(Ordering::Acquire)
    }

    /// Move the chunk to `period`; returns what was held of the old one (tokens, cost, period)
    /// to give back, when it moved.
    pub fn turn(&self, period: i64) -> Option<(i64, i64, i64)> {
        let old = self.period.load(Ordering::Acquire);
        if old >= period || self.period.compare_exchange(old, period, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return None;
        }
        self.room_tokens.store(-1, Ordering::Release);
        self.room_cost.store(-1, Ordering::Release);
        self.used_tokens.store(0, Ordering::Release);
        self.used_cost.store(0, Ordering::Release);
        self.rate_tokens.store(0, Ordering::Release);
        self.rate_cost.store(0, Ordering::Release);
        self.known_at_ms.store(0, Ordering::Release);
        Some((self.tokens.take_all(), self.cost.take_all(), old))
    }

    /// What the store answered: the period's use, under these limits (-1: none).
    pub fn learn(&self, used: (i64, i64), limits: (i64, i64)) {
        let room = |limit: i64, used: i64| if limit < 0 { -1 } else { (limit - used).max(0) };
        let now = monotonic_ms();
        let then = self.known_at_ms.swap(now, Ordering::AcqRel);
        let elapsed = now.saturating_sub(then) as i64;
        if then > 0 && elapsed >= 100 {
            let rate = |was: &AtomicI64, is: i64| ((is - was.load(Ordering::Acquire)).max(0) * 1000) / elapsed;
            self.rate_tokens.store(rate(&self.used_tokens, used.0), Ordering::Release);
            self.rate_cost.store(rate(&self.used_cost, used.1), Ordering::Release);
        }
        self.limit_tokens.store(limits.0, Ordering::Release);
        self.limit_cost.store(limits.1, Ordering::Release);
        self.used_tokens.store(used.0, Ordering::Release);
        self.used_cost.store(used.1, Ordering::Release);
        self.room_tokens.store(room(limits.0, used.0), Ordering::Release);
        self.room_cost.store(room(limits.1, used.1), Ordering::Release);
    }

    /// The period's use the store last reported (tokens, cost).
    pub fn reported_use(&self) -> (i64, i64) {
        (self.used_tokens.load(Ordering::Acquire), self.used_cost.load(Ordering::Acquire))
    }

    /// The limits last leased under (-1: none).
    pub fn limits(&self) -> (i64, i64) {
        (self.limit_tokens.load(Ordering::Acquire), self.limit_cost.load(Ordering::Acquire))
    }

    /// This replica's budget while the store is away: fixed the first time it is asked for in an
    /// outage (from `share`), the same afterwards.
    pub fn away_budget(&self, share: (i64, i64)) -> (i64, i64) {
        let fix = |budget: &AtomicI64, value: i64| {
            let _ = budget.compare_exchange(-1, value, Ordering::AcqRel, Ordering::Acquire);
            budget.load(Ordering::Acquire)
        };
        (fix(&self.away_budget_tokens, share.0), fix(&self.away_budget_cost, share.1))
    }

    /// The outage is over: its budget and what was spent of it, for the store to be told.
    pub fn end_away(&self) -> Option<((i64, i64), (i64, i64))> {
        let budget_t = self.away_budget_tokens.swap(-1, Ordering::AcqRel);
        let budget_c = self.away_budget_cost.swap(-1, Ordering::AcqRel);
        let spent = (self.away_tokens.swap(0, Ordering::AcqRel), self.away_cost.swap(0, Ordering::AcqRel));
        (budget_t >= 0 || budget_c >= 0).then_some(((budget_t, budget_c), spent))
    }

    /// The period's use the store last reported, plus what the fleet may have spent since at
    /// the rate it was spending (and a second more): a floor for a store that lost its data,
    /// erring high (under-use), never low (overshoot).
    pub fn known_use(&self) -> (i64, i64) {
        let age = monotonic_ms().saturating_sub(self.known_at_ms.load(Ordering::Acquire)) as i64 + 1000;
        let now = |used: &AtomicI64, rate: &AtomicI64| {
            used.load(Ordering::Acquire) + rate.load(Ordering::Acquire).saturating_mul(age) / 1000
        };
        (now(&self.used_tokens, &self.rate_tokens), now(&self.used_cost, &self.rate_cost))
    }

    /// The room the store last reported (-1 unknown), less what the fleet may have spent since
    /// at the rate it was spending (plus a second): a conservative view of what remains now.
    pub fn room(&self) -> (i64, i64) {
        let age = monotonic_ms().saturating_sub(self.known_at_ms.load(Ordering::Acquire)) as i64 + 1000;
        let now = |room: &AtomicI64, rate: &AtomicI64| {
            let room = room.load(Ordering::Acquire);
            if room < 0 {
                room
            } else {
                (room - rate.load(Ordering::Acquire).saturating_mul(age) / 1000).max(0)
            }
        };
        (now(&self.room_tokens, &self.rate_tokens), now(&self.room_cost, &self.rate_cost))
    }
}

/// Everything a scope holds from the store.
#[derive(Default)]
pub struct Leased {
    pub rpm: Allowance,
    pub tpm: Allowance,
    pub slots: Slots,
    pub quota: QuotaChunk,
    tracked: AtomicBool,
}

impl Leased {
    /// True the first time: the caller registers the scope with the fleet's housekeeping.
    pub fn first_lease(&self) -> bool {
        !self.tracked.swap(true, Ordering::AcqRel)
    }
}

/// What one admitted request took from leased limits; given back or settled when it ends.
pub enum LeaseHold {
    /// A concurrency slot (released on drop).
    Slot(Arc<LimitState>),
    /// One request of RPM (given back if a later limit refuses the request).
    Rpm(Arc<LimitState>),
    /// TPM tokens reserved; the difference to actual use goes back to (or is owed by) the
    /// allowance.
    Tpm { state: Arc<LimitState>, reserved: i64 },
    /// Quota reserved, from the chunk or (`away`) from the share while the store was away.
    Quota { state: Arc<LimitState>, tokens: i64, cost: i64, away: bool },
}

impl LeaseHold {
    /// Settle to actual use (`None`: the request was refused, give everything back).
    pub fn settle(&mut self, actual: Option<(i64, i64)>) {
        match self {
            LeaseHold::Slot(_) => {}
            LeaseHold::Rpm(state) => {
                if actual.is_none() {
                    state.leased.rpm.add(1);
                }
            }
            LeaseHold::Tpm { state, reserved } => {
                let used = actual.map_or(0, |(tokens, _)| tokens);
                state.leased.tpm.add(*reserved - used);
                *reserved = used;
            }
            LeaseHold::Quota { state, tokens, cost, away } => {
                let (used_t, used_c) = actual.unwrap_or((0, 0));
                let quota = &state.leased.quota;
                if *away {
                    quota.away_tokens.fetch_add(used_t - *tokens, Ordering::AcqRel);
                    quota.away_cost.fetch_add(used_c - *cost, Ordering::AcqRel);
                } else {
                    quota.tokens.add(*tokens - used_t);
                    quota.cost.add(*cost - used_c);
                }
                (*tokens, *cost) = (used_t, used_c);
            }
        }
    }
}

impl Drop for LeaseHold {
    fn drop(&mut self) {
        if let LeaseHold::Slot(state) = self {
            state.leased.slots.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_never_give_back_one_in_use() {
        let slots = Slots::default();
        slots.add_held(3);
        assert!(slots.try_acquire(None));
        assert!(slots.try_acquire(None));
        assert_eq!(slots.take_surplus(0), 1);
        assert!(!slots.try_acquire(None));
        slots.release();
        assert_eq!(slots.counts(), (2, 1));
        assert_eq!(slots.take_surplus(1), 0);
        assert_eq!(slots.take_surplus(0), 1);
        // The local share while the store is away counts every request in use.
        assert!(slots.try_acquire(Some(2)));
        assert!(!slots.try_acquire(Some(2)));
    }

    #[test]
    fn allowances_take_only_what_is_held_and_keep_debts() {
        let a = Allowance::default();
        a.add(5);
        assert!(a.try_take(3) && !a.try_take(3));
        a.add(-4);
        assert_eq!(a.level(), -2);
        assert_eq!(a.take_all(), 0);
        a.add(10);
        assert_eq!(a.take_all(), 8);
    }

    #[test]
    fn a_quota_chunk_turns_once_per_period() {
        let q = QuotaChunk::default();
        assert_eq!(q.turn(100), Some((0, 0, i64::MIN)));
        q.tokens.add(40);
        q.learn((10, 0), (510, -1));
        assert_eq!(q.room(), (500, -1));
        assert_eq!(q.turn(100), None);
        assert_eq!(q.turn(200), Some((40, 0, 100)));
        assert_eq!(q.room(), (-1, -1));
    }
}
