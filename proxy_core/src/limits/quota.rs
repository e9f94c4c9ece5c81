//! Quotas: an allowance of tokens and/or money per period for a key or a tenant. Admission
//! reserves the request's estimate atomically (a CAS against the limit, never check-then-charge),
//! and the request settles to what it actually used when it ends. The reservation is owned by the
//! request (RAII): every end, including a dropped connection, releases or settles it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

use crate::config::{QuotaConfig, QuotaPeriod};

const DAY: i64 = 86_400;

/// Days since 1970-01-01 to (year, month) in the proleptic Gregorian calendar (H. Hinnant's
/// civil-from-days).
fn year_month(days: i64) -> (i64, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month)
}

/// Days since 1970-01-01 of the first day of (year, month) (days-from-civil).
fn first_of_month(year: i64, month: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Unix seconds at which the period containing `now` began (UTC). `None` for a quota that never
/// resets.
pub fn period_start(period: QuotaPeriod, now: i64) -> Option<i64> {
    match period {
        QuotaPeriod::None => None,
        QuotaPeriod::Daily => Some(now.div_euclid(DAY) * DAY),
        QuotaPeriod::Monthly => {
            let (year, month) = year_month(now.div_euclid(DAY));
            Some(first_of_month(year, month) * DAY)
        }
    }
}

/// Live use of one quota; survives config swaps.
pub struct QuotaState {
    period_start: AtomicI64,
    used_tokens: AtomicU64,
    used_cost: AtomicU64,
}

impl Default for QuotaState {
    fn default() -> Self {
        Self { period_start: AtomicI64::new(i64::MIN), used_tokens: AtomicU64::new(0), used_cost: AtomicU64::new(0) }
    }
}

/// A reservation held by one request.
pub struct QuotaHold {
    state: Arc<QuotaState>,
    period_start: i64,
    tokens: u64,
    cost: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exhausted {
    pub tokens: bool,
    pub limit: u64,
    pub used: u64,
}

fn reserve_one(counter: &AtomicU64, limit: Option<u64>, amount: u64) -> Result<(), (u64, u64)> {
    match limit {
        None => {
            counter.fetch_add(amount, Ordering::AcqRel);
            Ok(())
        }
        Some(limit) => counter
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(amount).filter(|total| *total <= limit)
            })
            .map(|_| ())
            .map_err(|used| (limit, used)),
    }
}

impl QuotaState {
    /// Move to the period `now` is in, adopting the ledger's figures when they describe it.
    fn sync(&self, config: &QuotaConfig, now: i64) -> i64 {
        let current = period_start(config.period, now).map_or(config.period_start, |p| p.max(config.period_start));
        let seen = self.period_start.load(Ordering::Acquire);
        if seen < current
            && self.period_start.compare_exchange(seen, current, Ordering::AcqRel, Ordering::Acquire).is_ok()
        {
            let from_ledger = config.period_start == current;
            self.used_tokens.store(if from_ledger { config.used_tokens } else { 0 }, Ordering::Release);
            self.used_cost.store(if from_ledger { config.used_cost_micros } else { 0 }, Ordering::Release);
        }
        self.period_start.load(Ordering::Acquire)
    }

    pub fn used(&self) -> (u64, u64) {
        (self.used_tokens.load(Ordering::Acquire), self.used_cost.load(Ordering::Acquire))
    }

    /// Hold `tokens` and `cost` against the quota, or say which allowance is spent.
    pub fn reserve(
        self: &Arc<Self>,
        config: &QuotaConfig,
        now: i64,
        tokens: u64,
        cost: u64,
    ) -> Result<QuotaHold, Exhausted> {
        let period = self.sync(config, now);
        reserve_one(&self.used_tokens, config.tokens, tokens).map_err(|(limit, used)| Exhausted {
            tokens: true,
            limit,
            used,
        })?;
        if let Err((limit, used)) = reserve_one(&self.used_cost, config.cost_micros, cost) {
            self.used_tokens.fetch_sub(tokens, Ordering::AcqRel);
            return Err(Exhausted { tokens: false, limit, used });
        }
        Ok(QuotaHold { state: self.clone(), period_start: period, tokens, cost })
    }
}

fn adjust(counter: &AtomicU64, reserved: u64, actual: u64) {
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
        Some(used.saturating_sub(reserved).saturating_add(actual))
    });
}

impl QuotaHold {
    /// Replace the reservation by what was actually used. A request that began in an earlier
    /// period leaves the new period's count alone (the ledger bills it to its own period).
    pub fn settle(self, tokens: u64, cost: u64) {
        if self.state.period_start.load(Ordering::Acquire) == self.period_start {
            adjust(&self.state.used_tokens, self.tokens, tokens);
            adjust(&self.state.used_cost, self.cost, cost);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(tokens: Option<u64>, cost: Option<u64>, period: QuotaPeriod, start: i64) -> QuotaConfig {
        QuotaConfig { period, tokens, cost_micros: cost, period_start: start, used_tokens: 0, used_cost_micros: 0 }
    }

    #[test]
    fn periods_start_at_utc_midnight_and_the_first_of_the_month() {
        // 2026-11-30T13:45:00Z
        let now = 1_796_046_300;
        assert_eq!(period_start(QuotaPeriod::Daily, now), Some(1_795_996_800));
        assert_eq!(period_start(QuotaPeriod::Monthly, now), Some(1_793_491_200)); // 2026-11-01
        assert_eq!(period_start(QuotaPeriod::Monthly, 1_709_251_200), Some(1_709_251_200)); // 2024-03-01
        assert_eq!(period_start(QuotaPeriod::Monthly, 1_709_251_199), Some(1_706_745_600)); // 2024-02-01
        assert_eq!(period_start(QuotaPeriod::None, now), None);
    }

    #[test]
    fn reservations_are_atomic_and_settle_to_actual() {
        let state = Arc::new(QuotaState::default());
        let q = quota(Some(100), None, QuotaPeriod::None, 0);
        let hold = state.reserve(&q, 10, 60, 0).ok().unwrap();
        let refused = state.reserve(&q, 10, 60, 0).err().unwrap();
        assert_eq!(refused, Exhausted { tokens: true, limit: 100, used: 60 });
        hold.settle(30, 0);
        assert_eq!(state.used(), (30, 0));
        assert!(state.reserve(&q, 10, 60, 0).is_ok());
    }

    #[test]
    fn money_refusal_gives_back_the_tokens() {
        let state = Arc::new(QuotaState::default());
        let q = quota(Some(1000), Some(50), QuotaPeriod::None, 0);
        assert!(!state.reserve(&q, 0, 10, 80).err().unwrap().tokens);
        assert_eq!(state.used(), (0, 0));
    }

    #[test]
    fn a_new_period_starts_from_zero_and_old_requests_do_not_leak_into_it() {
        let state = Arc::new(QuotaState::default());
        let mut q = quota(Some(100), None, QuotaPeriod::Daily, 0);
        q.used_tokens = 90; // the ledger's count, but for day 0
        let hold = state.reserve(&q, 10, 10, 0).ok().unwrap(); // day 0: 90 + 10
        assert!(state.reserve(&q, 20, 1, 0).is_err());
        let next_day = DAY + 5;
        let fresh = state.reserve(&q, next_day, 50, 0).ok().unwrap();
        assert_eq!(state.used(), (50, 0));
        hold.settle(100, 0); // yesterday's request ends today: billed to yesterday
        assert_eq!(state.used(), (50, 0));
        fresh.settle(20, 0);
        assert_eq!(state.used(), (20, 0));
    }

    #[test]
    fn an_operator_reset_moves_period_start_and_adopts_the_ledger() {
        let state = Arc::new(QuotaState::default());
        let q = quota(Some(100), None, QuotaPeriod::None, 0);
        state.reserve(&q, 1, 100, 0).ok().unwrap().settle(100, 0);
        assert!(state.reserve(&q, 2, 1, 0).is_err());
        let reset = quota(Some(100), None, QuotaPeriod::None, 50);
        assert!(state.reserve(&reset, 60, 1, 0).is_ok());
        assert_eq!(state.used(), (1, 0));
    }
}
