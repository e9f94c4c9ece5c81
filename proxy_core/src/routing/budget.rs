//! The retry budget of a pool: every request deposits `ratio` of a retry, time deposits
//! `min_per_second`, and each retry withdraws one. When everything fails, retries stay a fraction
//! of the traffic instead of multiplying it.

use std::sync::{Mutex, PoisonError};

use tokio::time::Instant;

/// Seconds of the floor rate the budget can hold (Linkerd's window is 10 s).
const WINDOW_SECONDS: f64 = 10.0;

/// Budget amounts are counted in thousandths of a retry, so ratios add up exactly.
const UNIT: u64 = 1000;

pub struct RetryBudget {
    /// (thousandths of a retry, when the floor was last added)
    state: Mutex<(u64, Instant)>,
}

impl Default for RetryBudget {
    fn default() -> Self {
        // A new pool starts with one second of the floor, so its first failures can be retried.
        let start = Instant::now();
        let earlier = start.checked_sub(std::time::Duration::from_secs(1)).unwrap_or(start);
        Self { state: Mutex::new((0, earlier)) }
    }
}

fn thousandths(v: f64) -> u64 {
    (v * UNIT as f64).round().max(0.0) as u64
}

impl RetryBudget {
    fn with<R>(&self, min_per_second: f64, ratio: f64, f: impl FnOnce(&mut u64) -> R) -> R {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (tokens, last) = &mut *guard;
        let now = Instant::now();
        let earned = thousandths(min_per_second * now.saturating_duration_since(*last).as_secs_f64());
        // Keep the clock where it was until a whole thousandth is earned, so fractions add up.
        if earned > 0 || min_per_second == 0.0 {
            *last = now;
        }
        let cap = thousandths((min_per_second + ratio * 1000.0).max(1.0) * WINDOW_SECONDS);
        *tokens = (*tokens + earned).min(cap);
        f(tokens)
    }

    /// A request came in: it earns `ratio` of a retry.
    pub fn deposit(&self, min_per_second: f64, ratio: f64) {
        self.with(min_per_second, ratio, |t| *t += thousandths(ratio));
    }

    /// Spend one retry if the budget has it.
    pub fn try_withdraw(&self, min_per_second: f64, ratio: f64) -> bool {
        self.with(min_per_second, ratio, |t| {
            if *t >= UNIT {
                *t -= UNIT;
                true
            } else {
                false
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn retries_are_a_ratio_of_requests_plus_a_floor() {
        let budget = RetryBudget::default();
        // The first second of the floor is there from the start.
        assert_eq!((0..10).filter(|_| budget.try_withdraw(3.0, 0.2)).count(), 3);
        // No floor: 100 requests at 20% earn 20 retries.
        for _ in 0..100 {
            budget.deposit(0.0, 0.2);
        }
        let granted = (0..100).filter(|_| budget.try_withdraw(0.0, 0.2)).count();
        assert_eq!(granted, 20);
        // The floor refills with time alone: 2 per second for 3 seconds.
        tokio::time::advance(Duration::from_secs(3)).await;
        let granted = (0..100).filter(|_| budget.try_withdraw(2.0, 0.2)).count();
        assert_eq!(granted, 6);
    }
}
