//! A token bucket as GCRA (the generic cell rate algorithm): the whole state is one atomic
//! "theoretical arrival time", so checking and charging a bucket is a load and a CAS, with no lock.
//!
//! A bucket refills `per_minute` units per minute up to `burst` units. Charging `cost` units moves
//! the arrival time forward by `cost` emission intervals; the charge is allowed while the arrival
//! time stays within `burst` intervals of now. Settling after the fact (actual tokens known) moves
//! it forward or back by the difference.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Rate parameters (from the config snapshot; the state below survives their change).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_minute: u64,
    pub burst: u64,
}

impl Rate {
    /// Nanoseconds per unit.
    fn interval(self) -> u128 {
        (60_000_000_000u128 / u128::from(self.per_minute.max(1))).max(1)
    }

    fn capacity_ns(self) -> u128 {
        self.interval() * u128::from(self.burst.max(1))
    }
}

/// Outcome of a charge that was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// How long until the charge would fit; `None` when it never can (cost above the burst).
    pub retry_after: Option<Duration>,
    pub remaining: u64,
    /// Time until the bucket is full again.
    pub reset: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Level {
    pub remaining: u64,
    pub reset: Duration,
}

pub struct Gcra {
    base: Instant,
    /// Theoretical arrival time, nanoseconds after `base`.
    tat: AtomicU64,
    /// The per-minute rate `tat` is expressed in (0 before first use).
    per_minute: AtomicU64,
}

fn sat(v: u128) -> u64 {
    u64::try_from(v).unwrap_or(u64::MAX)
}

impl Gcra {
    pub fn new(base: Instant) -> Self {
        Self { base, tat: AtomicU64::new(0), per_minute: AtomicU64::new(0) }
    }

    /// Re-express the time still owed in the new rate's intervals if the rate changed.
    fn rescale(&self, rate: Rate, now: u128) {
        let old = self.per_minute.load(Ordering::Acquire);
        if old == rate.per_minute {
            return;
        }
        let swapped =
            self.per_minute.compare_exchange(old, rate.per_minute, Ordering::AcqRel, Ordering::Acquire).is_ok();
        if !swapped || old == 0 {
            return;
        }
        let now = sat(now);
        let _ = self.tat.fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
            let owed = u128::from(tat.saturating_sub(now));
            let rescaled = owed * u128::from(old) / u128::from(rate.per_minute.max(1));
            Some(now.saturating_add(sat(rescaled)))
        });
    }

    fn now(&self) -> u128 {
        Instant::now().saturating_duration_since(self.base).as_nanos()
    }

    fn level_at(&self, rate: Rate, tat: u128, now: u128) -> Level {
        let ahead = tat.saturating_sub(now);
        let free = rate.capacity_ns().saturating_sub(ahead);
        Level { remaining: sat(free / rate.interval()), reset: Duration::from_nanos(sat(ahead)) }
    }

    pub fn level(&self, rate: Rate) -> Level {
        let now = self.now();
        self.rescale(rate, now);
        self.level_at(rate, u128::from(self.tat.load(Ordering::Acquire)), now)
    }

    /// Charge `cost` units if they fit now.
    pub fn try_charge(&self, rate: Rate, cost: u64) -> Result<Level, Refusal> {
        let interval = rate.interval();
        let capacity = rate.capacity_ns();
        let now = self.now();
        self.rescale(rate, now);
        let mut current = self.tat.load(Ordering::Acquire);
        loop {
            let start = u128::from(current).max(now);
            let next = start + interval * u128::from(cost);
            if next > now + capacity {
                let level = self.level_at(rate, u128::from(current), now);
                let retry_after = (cost <= rate.burst.max(1)).then(|| Duration::from_nanos(sat(next - now - capacity)));
                return Err(Refusal { retry_after, remaining: level.remaining, reset: level.reset });
            }
            match self.tat.compare_exchange_weak(current, sat(next), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Ok(self.level_at(rate, next, now)),
                Err(actual) => current = actual,
            }
        }
    }

    /// Adjust a charge made earlier by `delta` units (positive: more was used than reserved).
    pub fn settle(&self, rate: Rate, delta: i64) {
        if delta == 0 {
            return;
        }
        let shift = sat(rate.interval() * u128::from(delta.unsigned_abs()));
        let now = self.now();
        self.rescale(rate, now);
        let now = sat(now);
        let _ = self.tat.fetch_update(Ordering::AcqRel, Ordering::Acquire, |tat| {
            Some(if delta > 0 {
                // Extra use counts from now at the earliest: an idle bucket is full, not overfull.
                tat.max(now).saturating_add(shift)
            } else {
                tat.saturating_sub(shift)
            })
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_rate_change_keeps_what_was_used_in_units() {
        let bucket = Gcra::new(Instant::now());
        let two = Rate { per_minute: 2, burst: 2 };
        bucket.try_charge(two, 1).unwrap();
        bucket.try_charge(two, 1).unwrap();
        assert!(bucket.try_charge(two, 1).is_err());
        let three = Rate { per_minute: 3, burst: 3 };
        assert_eq!(bucket.level(three).remaining, 1);
        assert!(bucket.try_charge(three, 1).is_ok());
        assert!(bucket.try_charge(three, 1).is_err());
    }

    const RPM_60: Rate = Rate { per_minute: 60, burst: 3 };

    #[tokio::test(start_paused = true)]
    async fn burst_then_refill_at_the_rate() {
        let bucket = Gcra::new(Instant::now());
        for expected_remaining in [2, 1, 0] {
            assert_eq!(bucket.try_charge(RPM_60, 1).unwrap().remaining, expected_remaining);
        }
        let refused = bucket.try_charge(RPM_60, 1).unwrap_err();
        assert_eq!(refused.retry_after, Some(Duration::from_secs(1)));
        assert_eq!(refused.reset, Duration::from_secs(3));
        tokio::time::advance(Duration::from_millis(999)).await;
        assert!(bucket.try_charge(RPM_60, 1).is_err());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(bucket.try_charge(RPM_60, 1).is_ok());
        // A long idle refills to the burst, never beyond it.
        tokio::time::advance(Duration::from_secs(3600)).await;
        assert_eq!(bucket.level(RPM_60).remaining, 3);
    }

    #[tokio::test(start_paused = true)]
    async fn costs_above_the_burst_never_fit() {
        let bucket = Gcra::new(Instant::now());
        let tpm = Rate { per_minute: 600, burst: 100 };
        let refused = bucket.try_charge(tpm, 101).unwrap_err();
        assert_eq!(refused.retry_after, None);
        assert!(bucket.try_charge(tpm, 100).is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn settle_moves_the_level_both_ways() {
        let bucket = Gcra::new(Instant::now());
        let tpm = Rate { per_minute: 6000, burst: 1000 };
        bucket.try_charge(tpm, 500).unwrap();
        assert_eq!(bucket.level(tpm).remaining, 500);
        bucket.settle(tpm, -300); // used 200 of the 500 reserved
        assert_eq!(bucket.level(tpm).remaining, 800);
        bucket.settle(tpm, 400); // and then 400 more than that
        assert_eq!(bucket.level(tpm).remaining, 400);
        // 600 tokens at 100 per second refill in 6 s.
        tokio::time::advance(Duration::from_secs(6)).await;
        assert_eq!(bucket.level(tpm).remaining, 1000);
    }
}
