//! Per-key and per-tenant limits: requests per minute and tokens per minute as GCRA buckets,
//! and a concurrency cap. Parameters come from the config snapshot; the state (`LimitState`) is
//! kept by the registry across swaps, so changing a limit never resets what was already used.
//!
//! TPM charges an estimate at admission (prompt estimate + max_tokens clamped to the model's
//! maximum) and settles to the actual tokens when the request ends. Overshoot bound: within any
//! window the bucket can be exceeded only by what requests in flight used beyond their estimate,
//! i.e. at most (requests in flight) x (their prompt-estimate error), since completions never
//! exceed max_tokens; requests without max_tokens reserve the model's maximum.

mod adoption;
mod concurrency;
mod gcra;
mod leased;
mod quota;

pub use adoption::adopt_ledger;
pub use concurrency::{Concurrency, Slot};
pub use gcra::{Gcra, Level, Rate, Refusal};
pub use leased::{Allowance, LeaseHold, Leased, QuotaChunk, Slots};
pub use quota::{
    effective_start as quota_period_start, period_start, Exhausted, QuotaHold, QuotaScope, QuotaState, Unledgered,
};

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{Limits, QuotaConfig};
use crate::error::{ErrorKind, GatewayError, RateLimitInfo};

/// Bucket and counter state of one key or one tenant.
pub struct LimitState {
    pub rpm: Gcra,
    pub tpm: Gcra,
    pub concurrency: Arc<Concurrency>,
    /// What this replica holds of the fleet-wide limits (a fleet only).
    pub leased: Leased,
}

impl Default for LimitState {
    fn default() -> Self {
        let base = Instant::now();
        Self {
            rpm: Gcra::new(base),
            tpm: Gcra::new(base),
            concurrency: Arc::new(Concurrency::default()),
            leased: Leased::default(),
        }
    }
}

/// One scope (key or tenant) to check: its configured limits and quota, and their state.
pub struct Scope<'a> {
    pub name: &'static str,
    /// The key's or tenant's id (with `name`, its name in a fleet's shared store).
    pub id: &'a str,
    pub limits: &'a Limits,
    pub state: &'a Arc<LimitState>,
    pub quota: Option<(&'a QuotaConfig, &'a Arc<QuotaState>)>,
}

/// What a request is expected to use, charged at admission and settled at its end.
#[derive(Debug, Clone, Copy, Default)]
pub struct Estimate {
    pub tokens: u64,
    pub cost_micros: u64,
    /// Unix seconds, for quota periods.
    pub now: i64,
}

pub fn rpm_rate(l: &Limits) -> Option<Rate> {
    l.rpm.map(|per_minute| Rate { per_minute, burst: l.rpm_burst.unwrap_or(per_minute) })
}

pub fn tpm_rate(l: &Limits) -> Option<Rate> {
    l.tpm.map(|per_minute| Rate { per_minute, burst: l.tpm_burst.unwrap_or(per_minute) })
}

struct TokenCharge {
    state: Arc<LimitState>,
    rate: Rate,
}

/// What admission took: released (slots) or settled (token and quota charges) when the request
/// ends.
#[derive(Default)]
pub struct Held {
    slots: Vec<Slot>,
    /// What was taken from fleet-wide limits (a fleet only).
    leases: Vec<LeaseHold>,
    /// RPM charges, given back if the request is refused by a later limit.
    rpm: Vec<(Arc<LimitState>, Rate)>,
    tokens: Vec<TokenCharge>,
    quotas: Vec<QuotaHold>,
    reserved: u64,
    settled: bool,
}

impl Held {
    /// Settle every charge to what the request actually used. Once.
    pub fn settle(&mut self, actual_tokens: u64, actual_cost_micros: u64) {
        if self.settled {
            return;
        }
        self.settled = true;
        let delta = i64::try_from(actual_tokens).unwrap_or(i64::MAX) - i64::try_from(self.reserved).unwrap_or(i64::MAX);
        for charge in &self.tokens {
            charge.state.tpm.settle(charge.rate, delta);
        }
        for hold in self.quotas.drain(..) {
            hold.settle(actual_tokens, actual_cost_micros);
        }
        let actual =
            (i64::try_from(actual_tokens).unwrap_or(i64::MAX), i64::try_from(actual_cost_micros).unwrap_or(i64::MAX));
        for lease in &mut self.leases {
            lease.settle(Some(actual));
        }
    }

    /// Keep what a fleet-wide limit gave this request.
    pub fn lease(&mut self, hold: LeaseHold) {
        self.leases.push(hold);
    }

    /// Keep a local charge taken against a share of a fleet-wide limit (the store away).
    pub fn local(&mut self, charge: LocalCharge) {
        match charge {
            LocalCharge::Slot(slot) => self.slots.push(slot),
            LocalCharge::Rpm(state, rate) => self.rpm.push((state, rate)),
            LocalCharge::Tpm(state, rate) => self.tokens.push(TokenCharge { state, rate }),
        }
    }

    /// Record the estimate reserved by the token limits.
    pub fn reserve(&mut self, tokens: u64) {
        self.reserved = tokens;
    }

    /// Give back everything but the slots (a limit refused the request).
    pub fn refund_all(&mut self) {
        self.refund();
    }

    /// Undo the token and quota charges and the RPM charges (the request was refused by a
    /// limit); the concurrency slots go when `self` is dropped.
    fn refund(&mut self) {
        if !self.settled {
            for lease in &mut self.leases {
                lease.settle(None);
            }
        }
        self.settle(0, 0);
        for (state, rate) in self.rpm.drain(..) {
            state.rpm.settle(rate, -1);
        }
    }
}

/// A charge against a local share of a fleet-wide limit while the shared store is away.
pub enum LocalCharge {
    Slot(Slot),
    Rpm(Arc<LimitState>, Rate),
    Tpm(Arc<LimitState>, Rate),
}

pub fn limited(
    kind: ErrorKind,
    scope: &str,
    what: &str,
    refusal: Option<Refusal>,
    info: RateLimitInfo,
) -> GatewayError {
    let retry_after = refusal.and_then(|r| r.retry_after);
    let mut error = GatewayError::new(kind, format!("{scope} {what}")).with_rate_limit(info);
    match (refusal, retry_after) {
        (Some(_), None) => error.no_retry = true,
        (_, Some(after)) => error = error.with_retry_after(after),
        (None, None) => error = error.with_retry_after(Duration::from_secs(1)),
    }
    error
}

/// First phase, before the request's body is read (so a key at its limits cannot make the
/// gateway buffer bodies): a concurrency slot and one request of RPM in every scope (tenant
/// first, then key), all or nothing.
pub fn admit_request(scopes: &[Scope<'_>]) -> Result<Held, GatewayError> {
    let mut held = Held::default();
    for scope in scopes {
        if let Some(max) = scope.limits.max_concurrency {
            match scope.state.concurrency.try_acquire(max) {
                Some(slot) => held.slots.push(slot),
                None => {
                    return Err(limited(
                        ErrorKind::ConcurrencyExceeded,
                        scope.name,
                        &format!("has {max} requests in flight, its concurrency limit"),
                        None,
                        RateLimitInfo::default(),
                    ));
                }
            }
        }
    }
    for scope in scopes {
        if let Some(rate) = rpm_rate(scope.limits) {
            match scope.state.rpm.try_charge(rate, 1) {
                Ok(_) => held.rpm.push((scope.state.clone(), rate)),
                Err(refusal) => {
                    held.refund();
                    let info = RateLimitInfo {
                        limit_requests: Some(rate.per_minute),
                        remaining_requests: Some(refusal.remaining),
                        reset_requests: Some(refusal.reset),
                        ..RateLimitInfo::default()
                    };
                    return Err(limited(
                        ErrorKind::RpmExceeded,
                        scope.name,
                        "is over its requests-per-minute limit",
                        Some(refusal),
                        info,
                    ));
                }
            }
        }
    }
    Ok(held)
}

/// Second phase, once the body says what the request may use: tokens per minute, then quotas,
/// in every scope. A refusal gives back everything of both phases but the slots (dropped with
/// `held`): a request a limit refused is not counted.
pub fn admit_tokens(held: &mut Held, scopes: &[Scope<'_>], estimate: Estimate) -> Result<(), GatewayError> {
    let estimate_tokens = estimate.tokens;
    held.reserved = estimate_tokens;
    for scope in scopes {
        if let Some(rate) = tpm_rate(scope.limits) {
            match scope.state.tpm.try_charge(rate, estimate_tokens) {
                Ok(_) => held.tokens.push(TokenCharge { state: scope.state.clone(), rate }),
                Err(refusal) => {
                    held.refund();
                    let info = RateLimitInfo {
                        limit_tokens: Some(rate.per_minute),
                        remaining_tokens: Some(refusal.remaining),
                        reset_tokens: Some(refusal.reset),
                        ..RateLimitInfo::default()
                    };
                    let what = match refusal.retry_after {
                        Some(_) => format!("is over its tokens-per-minute limit (this request needs about {estimate_tokens})"),
                        None => format!(
                            "cannot take this request: it needs about {estimate_tokens} tokens, more than the tokens-per-minute burst of {}",
                            rate.burst
                        ),
                    };
                    return Err(limited(ErrorKind::TpmExceeded, scope.name, &what, Some(refusal), info));
                }
            }
        }
    }
    for scope in scopes {
        let Some((config, state)) = scope.quota else {
            continue;
        };
        match state.reserve(config, estimate.now, estimate_tokens, estimate.cost_micros) {
            Ok(hold) => held.quotas.push(hold),
            Err(spent) => {
                held.refund();
                let (what, needs) =
                    if spent.tokens { ("token", estimate_tokens) } else { ("spending", estimate.cost_micros) };
                let message = format!(
                    "{} has used its {what} quota ({} of {}); this request needs about {needs} more",
                    scope.name, spent.used, spent.limit
                );
                return Err(GatewayError::new(ErrorKind::InsufficientQuota, message));
            }
        }
    }
    Ok(())
}

/// Whether any scope counts tokens (TPM or a quota): then the request's output must be capped
/// at what is reserved for it.
pub fn counts_tokens(scopes: &[Scope<'_>]) -> bool {
    scopes.iter().any(|s| s.limits.tpm.is_some() || s.quota.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both phases at once, as the handler runs them around reading the body.
    fn admit(scopes: &[Scope<'_>], estimate: Estimate) -> Result<Held, GatewayError> {
        let mut held = admit_request(scopes)?;
        admit_tokens(&mut held, scopes, estimate)?;
        Ok(held)
    }

    fn est(tokens: u64) -> Estimate {
        Estimate { tokens, cost_micros: 0, now: 0 }
    }

    fn limits(rpm: Option<u64>, tpm: Option<u64>, conc: Option<u32>) -> Limits {
        Limits { rpm, tpm, max_concurrency: conc, ..Limits::default() }
    }

    #[tokio::test(start_paused = true)]
    async fn all_or_nothing_across_scopes() {
        let tenant_state = Arc::new(LimitState::default());
        let key_state = Arc::new(LimitState::default());
        let tenant = limits(Some(100), Some(1000), None);
        let key = limits(Some(100), Some(300), Some(5));
        let scopes = [
            Scope { name: "tenant", id: "t", limits: &tenant, state: &tenant_state, quota: None },
            Scope { name: "key", id: "k", limits: &key, state: &key_state, quota: None },
        ];
        let held = admit(&scopes, est(200)).unwrap();
        // The key's TPM refuses the second: nothing of it stays charged anywhere.
        let err = admit(&scopes, est(200)).err().unwrap();
        assert_eq!(err.kind, ErrorKind::TpmExceeded);
        assert!(err.retry_after.is_some());
        assert_eq!(tenant_state.rpm.level(rpm_rate(&tenant).unwrap()).remaining, 99);
        assert_eq!(tenant_state.tpm.level(tpm_rate(&tenant).unwrap()).remaining, 800);
        assert_eq!(key_state.concurrency.current(), 1);
        drop(held);
        assert_eq!(key_state.concurrency.current(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn settle_after_usage_frees_the_unused_estimate() {
        let state = Arc::new(LimitState::default());
        let key = limits(None, Some(1000), None);
        let scopes = [Scope { name: "key", id: "k", limits: &key, state: &state, quota: None }];
        let mut held = admit(&scopes, est(900)).unwrap();
        assert!(admit(&scopes, est(200)).is_err());
        held.settle(100, 0);
        held.settle(5000, 0); // only the first settle counts
        assert!(admit(&scopes, est(200)).is_ok());
        assert_eq!(state.tpm.level(tpm_rate(&key).unwrap()).remaining, 700);
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_and_oversized_requests() {
        let state = Arc::new(LimitState::default());
        let key = limits(None, Some(100), Some(1));
        let scopes = [Scope { name: "key", id: "k", limits: &key, state: &state, quota: None }];
        let first = admit(&scopes, est(10)).unwrap();
        assert_eq!(admit(&scopes, est(10)).err().unwrap().kind, ErrorKind::ConcurrencyExceeded);
        drop(first);
        let too_big = admit(&scopes, est(500)).err().unwrap();
        assert!(too_big.no_retry && too_big.retry_after.is_none());
    }
}
