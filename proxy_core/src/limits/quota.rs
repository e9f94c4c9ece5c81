//! Quotas: an allowance of tokens and/or money per period for a key or a tenant. Admission
//! reserves the request's estimate atomically (a CAS against the limit, never check-then-charge),
//! and the request settles to what it actually used when it ends. The reservation is owned by the
//! request (RAII): every end, including a dropped connection, releases or settles it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

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

/// What one period of a quota has used, reservations included. A new period gets a new one,
/// swapped in whole: a reservation lands in exactly one period's counts, never between a reset
/// of the period and a reset of the counts.
struct PeriodUse {
    start: i64,
    tokens: AtomicU64,
    cost: AtomicU64,
}

/// Live use of one quota; survives config swaps.
pub struct QuotaState {
    current: ArcSwap<PeriodUse>,
}

impl Default for QuotaState {
    fn default() -> Self {
        let unset = PeriodUse { start: i64::MIN, tokens: AtomicU64::new(0), cost: AtomicU64::new(0) };
        Self { current: ArcSwap::from_pointee(unset) }
    }
}

/// A reservation held by one request, against the period it started in.
pub struct QuotaHold {
    period: Arc<PeriodUse>,
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

/// Where the period `now` is in starts: the period's own start, or `period_start` (a reset, a
/// new definition) when later.
pub fn effective_start(config: &QuotaConfig, now: i64) -> i64 {
    period_start(config.period, now).map_or(config.period_start, |p| p.max(config.period_start))
}

/// Whose quota: a key's or a tenant's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QuotaScope {
    Key(Arc<str>),
    Tenant(Arc<str>),
}

/// What the core has charged that the control plane's ledger may not have yet (events not yet
/// stored when the ledger's figures were read), by scope and arrival: what an adoption of those
/// figures must add so that it never forgets spend.
#[derive(Default)]
pub struct Unledgered {
    by_scope: HashMap<QuotaScope, Vec<(f64, u64, u64)>>,
}

impl Unledgered {
    /// One request's charge, counted against its key's and its tenant's quotas.
    pub fn add(&mut self, key: &Arc<str>, tenant: &Arc<str>, started_at: f64, tokens: u64, cost: u64) {
        for scope in [QuotaScope::Key(key.clone()), QuotaScope::Tenant(tenant.clone())] {
            self.by_scope.entry(scope).or_default().push((started_at, tokens, cost));
        }
    }

    /// Tokens and cost charged to `scope` by requests that arrived at `start` or later (the
    /// ledger counts a request in the period it started in).
    pub fn since(&self, scope: &QuotaScope, start: i64) -> (u64, u64) {
        self.by_scope.get(scope).map_or((0, 0), |charges| {
            charges
                .iter()
                .filter(|(started_at, _, _)| *started_at >= start as f64)
                .fold((0, 0), |(t, c), (_, tokens, cost)| (t + tokens, c + cost))
        })
    }
}

impl QuotaState {
    /// Whether `adopt` would take `config`'s ledger figures at `now`: they describe a period
    /// (a new one, a reset, a new definition) this state has not reached yet.
    pub fn would_adopt(&self, config: &QuotaConfig, now: i64) -> bool {
        let start = effective_start(config, now);
        config.period_start == start && self.current.load().start < start
    }

    /// Take the ledger's figures for the period `now` is in, if they describe a period this
    /// state has not reached, plus what the core knows of that period that the ledger does not
    /// have yet (`unledgered(start)`: events not yet stored). Done when a snapshot is applied,
    /// before any request reserves against it. Returns whether it adopted.
    pub fn adopt(&self, config: &QuotaConfig, now: i64, unledgered: impl FnOnce(i64) -> (u64, u64)) -> bool {
        if !self.would_adopt(config, now) {
            return false;
        }
        let start = effective_start(config, now);
        let (tokens, cost) = unledgered(start);
        loop {
            let seen = self.current.load_full();
            if seen.start >= start {
                return false;
            }
            let fresh = Arc::new(PeriodUse {
                start,
                tokens: AtomicU64::new(config.used_tokens.saturating_add(tokens)),
                cost: AtomicU64::new(config.used_cost_micros.saturating_add(cost)),
            });
            let previous = self.current.compare_and_swap(&seen, fresh);
            if Arc::ptr_eq(&previous, &seen) {
                return true;
            }
        }
    }

    /// The counts of the period `now` is in: moved to a new period if the one in force is
    /// older. A snapshot's ledger figures were adopted when it was applied (`adopt`); a period
    /// that turns later starts from zero here, since every request of it reserves here first
    /// (the figures are taken again only if they describe it: a state that was never adopted).
    fn period(&self, config: &QuotaConfig, now: i64) -> Arc<PeriodUse> {
        let start = effective_start(config, now);
        loop {
            let seen = self.current.load_full();
            if seen.start >= start {
                return seen;
            }
            let from_ledger = config.period_start == start;
            let fresh = Arc::new(PeriodUse {
                start,
                tokens: AtomicU64::new(if from_ledger { config.used_tokens } else { 0 }),
                cost: AtomicU64::new(if from_ledger { config.used_cost_micros } else { 0 }),
            });
            let previous = self.current.compare_and_swap(&seen, fresh);
            if Arc::ptr_eq(&previous, &seen) {
                return self.current.load_full();
            }
            // Another request moved the period first: use (or move past) what it put in.
        }
    }

    /// What the period `now` is in has used so far (reservations included): nothing yet when
    /// the counts in force are an older period's.
    pub fn used_in(&self, config: &QuotaConfig, now: i64) -> (u64, u64) {
        let period = self.current.load();
        if period.start < effective_start(config, now) {
            return (0, 0);
        }
        (period.tokens.load(Ordering::Acquire), period.cost.load(Ordering::Acquire))
    }

    pub fn used(&self) -> (u64, u64) {
        let period = self.current.load();
        (period.tokens.load(Ordering::Acquire), period.cost.load(Ordering::Acquire))
    }

    /// Hold `tokens` and `cost` against the quota, or say which allowance is spent.
    pub fn reserve(&self, config: &QuotaConfig, now: i64, tokens: u64, cost: u64) -> Result<QuotaHold, Exhausted> {
        let period = self.period(config, now);
        reserve_one(&period.tokens, config.tokens, tokens).map_err(|(limit, used)| Exhausted {
            tokens: true,
            limit,
            used,
        })?;
        if let Err((limit, used)) = reserve_one(&period.cost, config.cost_micros, cost) {
            period.tokens.fetch_sub(tokens, Ordering::AcqRel);
            return Err(Exhausted { tokens: false, limit, used });
        }
        Ok(QuotaHold { period, tokens, cost })
    }
}

fn adjust(counter: &AtomicU64, reserved: u64, actual: u64) {
    let _ = counter.fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
        Some(used.saturating_sub(reserved).saturating_add(actual))
    });
}

impl QuotaHold {
    /// Replace the reservation by what was actually used, in the period the request started in.
    /// A request that began in an earlier period leaves the new period's count alone (the
    /// ledger bills it to its own period).
    pub fn settle(self, tokens: u64, cost: u64) {
        adjust(&self.period.tokens, self.tokens, tokens);
        adjust(&self.period.cost, self.cost, cost);
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

    /// Many threads reserving while the period turns: every reservation is counted in exactly one
    /// period, none is lost to the turn.
    #[test]
    fn a_reservation_made_as_the_period_turns_is_never_lost() {
        for _ in 0..50 {
            let state = Arc::new(QuotaState::default());
            let q = quota(Some(u64::MAX / 2), None, QuotaPeriod::Daily, 0);
            let held: Vec<QuotaHold> = std::thread::scope(|s| {
                let handles: Vec<_> = (0..8)
                    .map(|i| {
                        let state = &state;
                        let q = &q;
                        s.spawn(move || {
                            (0..200)
                                .map(|j| state.reserve(q, DAY + (i * 200 + j) % 2, 1, 0).ok().unwrap())
                                .collect::<Vec<_>>()
                        })
                    })
                    .collect();
                handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
            });
            // All at DAY or DAY+1: one period; every one of the 1600 is in it.
            assert_eq!(state.used().0, 1600);
            drop(held);
        }
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
