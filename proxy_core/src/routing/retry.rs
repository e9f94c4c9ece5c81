//! The compiled retry policy of a pool: what may be retried, how long to back off.

use std::time::Duration;

use crate::config::RetryConfig;

/// Why an attempt is being retried (the label of `sluicegate_retries_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    Connect,
    Reset,
    Timeout,
    Status429,
    Status5xx,
}

impl RetryReason {
    pub const ALL: [RetryReason; 5] = [
        RetryReason::Connect,
        RetryReason::Reset,
        RetryReason::Timeout,
        RetryReason::Status429,
        RetryReason::Status5xx,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::Connect => "connect",
            RetryReason::Reset => "reset",
            RetryReason::Timeout => "timeout",
            RetryReason::Status429 => "status_429",
            RetryReason::Status5xx => "status_5xx",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub budget_ratio: f64,
    pub budget_min_per_second: f64,
    pub max_retry_after: Duration,
    on_connect: bool,
    on_reset: bool,
    on_timeout: bool,
    statuses: Vec<u16>,
}

impl RetryPolicy {
    /// `Err` names the offending `retry_on` entry.
    pub fn compile(config: &RetryConfig) -> Result<Self, String> {
        let mut policy = RetryPolicy {
            max_attempts: config.max_attempts.max(1),
            backoff_base: Duration::from_millis(config.backoff_base_ms),
            backoff_cap: Duration::from_millis(config.backoff_cap_ms.max(config.backoff_base_ms)),
            budget_ratio: config.budget_ratio,
            budget_min_per_second: config.budget_min_per_second,
            max_retry_after: Duration::from_millis(config.max_retry_after_ms),
            on_connect: false,
            on_reset: false,
            on_timeout: false,
            statuses: Vec::new(),
        };
        for item in &config.retry_on {
            match item.as_str() {
                "connect" => policy.on_connect = true,
                "reset" => policy.on_reset = true,
                "timeout" => policy.on_timeout = true,
                code => match code.parse::<u16>() {
                    Ok(status) if status == 429 || (500..600).contains(&status) => policy.statuses.push(status),
                    _ => return Err(format!("{code:?} is not connect, reset, timeout, 429 or a 5xx status")),
                },
            }
        }
        Ok(policy)
    }

    pub fn retries(&self, reason: RetryReason, status: u16) -> bool {
        match reason {
            RetryReason::Connect => self.on_connect,
            RetryReason::Reset => self.on_reset,
            RetryReason::Timeout => self.on_timeout,
            RetryReason::Status429 | RetryReason::Status5xx => self.statuses.contains(&status),
        }
    }

    /// Full jitter: a uniform wait in [0, min(cap, base * 2^retry)] before retry number `retry`
    /// (1 for the first retry).
    pub fn backoff(&self, retry: u32) -> Duration {
        let exp = self.backoff_base.saturating_mul(1u32 << retry.saturating_sub(1).min(16));
        let ceiling = exp.min(self.backoff_cap);
        ceiling.mul_f64(fastrand::f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_on_parses_and_refuses_nonsense() {
        let policy = RetryPolicy::compile(&RetryConfig::default()).unwrap();
        assert!(policy.retries(RetryReason::Connect, 0));
        assert!(!policy.retries(RetryReason::Timeout, 0));
        assert!(policy.retries(RetryReason::Status5xx, 503));
        assert!(!policy.retries(RetryReason::Status5xx, 501));
        let bad = RetryConfig { retry_on: vec!["404".into()], ..RetryConfig::default() };
        assert!(RetryPolicy::compile(&bad).is_err());
    }

    #[test]
    fn backoff_is_full_jitter_under_a_growing_capped_ceiling() {
        let policy =
            RetryPolicy::compile(&RetryConfig { backoff_base_ms: 10, backoff_cap_ms: 50, ..RetryConfig::default() })
                .unwrap();
        for (retry, ceiling) in [(1, 10), (2, 20), (3, 40), (4, 50), (9, 50)] {
            let samples: Vec<Duration> = (0..2000).map(|_| policy.backoff(retry)).collect();
            let max = samples.iter().max().unwrap();
            assert!(*max <= Duration::from_millis(ceiling));
            assert!(*max > Duration::from_millis(ceiling) * 9 / 10, "retry {retry}: spread reaches the ceiling");
            assert!(samples.iter().min().unwrap() < &Duration::from_millis(ceiling / 10 + 1));
        }
    }
}
