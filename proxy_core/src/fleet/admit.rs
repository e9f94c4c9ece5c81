//! Admission against fleet-wide limits: the same two phases as `limits::admit_request` and
//! `limits::admit_tokens`, all or nothing, tenant first, but each limit taken from what this
//! replica leased (leasing more, within one Redis round trip, only when it holds none), or from
//! its local share while Redis is away.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::housekeeping::UNLIMITED;
use super::Fleet;
use crate::config::QuotaConfig;
use crate::error::{ErrorKind, GatewayError, RateLimitInfo};
use crate::limits::{
    limited, period_start, rpm_rate, tpm_rate, Allowance, Estimate, Held, LeaseHold, LimitState, LocalCharge, Rate,
    Scope,
};

/// Largest share of a limit one replica leases at once: the fleet's under-use stays within 2%.
const LEASE_SHARE: f64 = 0.02;
/// Attempts to take from a fresh lease before the request is refused (others may take it first).
const TAKE_ATTEMPTS: usize = 3;

fn unavailable(what: &str) -> GatewayError {
    GatewayError::new(
        ErrorKind::LimitsUnavailable,
        format!("the fleet's shared {what} limits cannot be checked right now; try again shortly"),
    )
    .with_retry_after(Duration::from_secs(1))
}

fn scope_key(scope: &Scope<'_>) -> String {
    format!("{}/{}", scope.name, scope.id)
}

/// A lease size: `share` of `limit` over the live replicas, at least `floor`.
fn lease_size(limit: u64, replicas: u32, floor: u64) -> u64 {
    (((limit as f64) * LEASE_SHARE / f64::from(replicas)) as u64).max(floor)
}

/// The local share of a limit while Redis is away: the limit over the live replicas.
fn local_rate(rate: Rate, replicas: u32) -> Rate {
    let n = u64::from(replicas);
    Rate { per_minute: (rate.per_minute / n).max(1), burst: (rate.burst / n).max(1) }
}

fn allowance<'a>(state: &'a LimitState, kind: &str) -> &'a Allowance {
    if kind == "rpm" {
        &state.leased.rpm
    } else {
        &state.leased.tpm
    }
}

impl Fleet {
    fn note_lease(&self, scope: &str, state: &Arc<LimitState>) {
        if state.leased.first_lease() {
            self.track(scope.to_string(), state);
        }
    }

    /// Lease bucket tokens: `Some(Ok(granted))`, `Some(Err(wait))` refused, `None` Redis away.
    async fn lease_bucket(
        &self,
        scope: &str,
        state: &Arc<LimitState>,
        kind: &str,
        rate: Rate,
        want: u64,
        need: u64,
    ) -> Option<Result<u64, Duration>> {
        let interval_us = (60_000_000 / rate.per_minute.max(1)).max(1);
        let mut invocation = self.scripts.bucket_lease.prepare_invoke();
        invocation.key(self.key(&["b", scope, kind])).arg(interval_us).arg(rate.burst).arg(want).arg(need);
        let reply: (i64, i64) = self.invoke(&invocation).await?;
        self.note_lease(scope, state);
        allowance(state, kind).interval_us.store(interval_us, Ordering::Relaxed);
        Some(match reply {
            (granted, _) if granted > 0 => Ok(granted as u64),
            (_, wait_us) => Err(Duration::from_micros(wait_us.max(0) as u64)),
        })
    }

    /// Take `n` from an allowance, leasing `lease` more (at least `n`) when it holds too few; a
    /// refill is started ahead of need when it runs low.
    async fn take(
        self: &Arc<Self>,
        scope: &Scope<'_>,
        kind: &'static str,
        rate: Rate,
        n: u64,
        lease: u64,
    ) -> Option<Result<(), Duration>> {
        let key = scope_key(scope);
        let held = allowance(scope.state, kind);
        for _ in 0..TAKE_ATTEMPTS {
            if held.try_take(n as i64) {
                self.refill_ahead(&key, scope.state, kind, rate, lease);
                return Some(Ok(()));
            }
            self.counters.waits.fetch_add(1, Ordering::Relaxed);
            match self.lease_bucket(&key, scope.state, kind, rate, lease.max(n), n).await? {
                Ok(granted) => held.add(granted as i64),
                Err(wait) => return Some(Err(wait)),
            }
        }
        Some(Err(Duration::from_millis(10)))
    }

    /// Start one background refill when the allowance holds less than half a lease, so that
    /// requests rarely wait for Redis.
    fn refill_ahead(
        self: &Arc<Self>,
        scope: &str,
        state: &Arc<LimitState>,
        kind: &'static str,
        rate: Rate,
        lease: u64,
    ) {
        let held = allowance(state, kind);
        if lease < 2 || held.level() >= (lease / 2) as i64 || !held.begin_refill() {
            return;
        }
        let fleet = self.clone();
        let state = state.clone();
        let scope = scope.to_string();
        tokio::spawn(async move {
            let held = allowance(&state, kind);
            if let Some(Ok(granted)) = fleet.lease_bucket(&scope, &state, kind, rate, lease, 1).await {
                held.add(granted as i64);
            }
            held.refilled();
        });
    }

    /// A concurrency slot from those leased: `Some(true)` taken, `Some(false)` none left in the
    /// fleet, `None` Redis away.
    async fn slot(&self, scope: &Scope<'_>, max: u32) -> Option<bool> {
        let slots = &scope.state.leased.slots;
        let want = lease_size(u64::from(max), self.replicas(), 1);
        let alive = self.key(&["alive"]);
        for _ in 0..TAKE_ATTEMPTS {
            if slots.try_acquire(None) {
                return Some(true);
            }
            self.counters.waits.fetch_add(1, Ordering::Relaxed);
            let key = scope_key(scope);
            let mut invocation = self.scripts.slots_acquire.prepare_invoke();
            invocation.key(self.key(&["c", &key])).key(&alive).arg(&self.settings.replica).arg(want).arg(max);
            let granted: u64 = self.invoke(&invocation).await?;
            self.note_lease(&key, scope.state);
            if granted == 0 {
                return Some(false);
            }
            slots.add_held(granted);
        }
        Some(false)
    }
}

/// Phase 1 for a fleet: a concurrency slot and one request of RPM in every scope.
pub async fn admit_request(fleet: &Arc<Fleet>, scopes: &[Scope<'_>]) -> Result<Held, GatewayError> {
    let mut held = Held::default();
    let fail = fleet.settings.fail_closed;
    for scope in scopes {
        let Some(max) = scope.limits.max_concurrency else {
            continue;
        };
        let shared = if fleet.shared() { fleet.slot(scope, max).await } else { None };
        let taken = match shared {
            Some(taken) => taken,
            None if fail.concurrency => return Err(unavailable("concurrency")),
            None => {
                let cap = (u64::from(max) / u64::from(fleet.replicas())).max(1);
                scope.state.leased.slots.try_acquire(Some(cap))
            }
        };
        if !taken {
            return Err(limited(
                ErrorKind::ConcurrencyExceeded,
                scope.name,
                &format!("has {max} requests in flight across the fleet, its concurrency limit"),
                None,
                RateLimitInfo::default(),
            ));
        }
        held.lease(LeaseHold::Slot(scope.state.clone()));
    }
    for scope in scopes {
        let Some(rate) = rpm_rate(scope.limits) else {
            continue;
        };
        let lease = lease_size(rate.per_minute, fleet.replicas(), 1).min(rate.burst.max(1));
        let shared = if fleet.shared() { fleet.take(scope, "rpm", rate, 1, lease).await } else { None };
        match shared {
            Some(Ok(())) => held.lease(LeaseHold::Rpm(scope.state.clone())),
            Some(Err(wait)) => {
                held.refund_all();
                let info = RateLimitInfo {
                    limit_requests: Some(rate.per_minute),
                    remaining_requests: Some(0),
                    ..RateLimitInfo::default()
                };
                let error = GatewayError::new(
                    ErrorKind::RpmExceeded,
                    format!("{} is over its requests-per-minute limit", scope.name),
                )
                .with_rate_limit(info);
                return Err(error.with_retry_after(wait.max(Duration::from_millis(1))));
            }
            None if fail.rpm => {
                held.refund_all();
                return Err(unavailable("rate"));
            }
            None => {
                let share = local_rate(rate, fleet.replicas());
                if let Err(refusal) = scope.state.rpm.try_charge(share, 1) {
                    held.refund_all();
                    let info = RateLimitInfo {
                        limit_requests: Some(share.per_minute),
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
                held.local(LocalCharge::Rpm(scope.state.clone(), share));
            }
        }
    }
    Ok(held)
}

/// Phase 2 for a fleet: tokens per minute, then quotas, in every scope.
pub async fn admit_tokens(
    fleet: &Arc<Fleet>,
    held: &mut Held,
    scopes: &[Scope<'_>],
    estimate: Estimate,
) -> Result<(), GatewayError> {
    held.reserve(estimate.tokens);
    let fail = fleet.settings.fail_closed;
    for scope in scopes {
        let Some(rate) = tpm_rate(scope.limits) else {
            continue;
        };
        let need = estimate.tokens;
        let too_big = || {
            let message = format!(
                "{} cannot take this request: it needs about {need} tokens, more than the tokens-per-minute burst of {}",
                scope.name, rate.burst
            );
            let mut error = GatewayError::new(ErrorKind::TpmExceeded, message);
            error.no_retry = true;
            error
        };
        if need > rate.burst {
            held.refund_all();
            return Err(too_big());
        }
        let lease = lease_size(rate.per_minute, fleet.replicas(), need).min(rate.burst);
        let shared = if fleet.shared() { fleet.take(scope, "tpm", rate, need, lease).await } else { None };
        match shared {
            Some(Ok(())) => held.lease(LeaseHold::Tpm { state: scope.state.clone(), reserved: need as i64 }),
            Some(Err(wait)) => {
                held.refund_all();
                let info = RateLimitInfo {
                    limit_tokens: Some(rate.per_minute),
                    remaining_tokens: Some(0),
                    ..RateLimitInfo::default()
                };
                let message =
                    format!("{} is over its tokens-per-minute limit (this request needs about {need})", scope.name);
                return Err(GatewayError::new(ErrorKind::TpmExceeded, message)
                    .with_rate_limit(info)
                    .with_retry_after(wait));
            }
            None if fail.tpm => {
                held.refund_all();
                return Err(unavailable("token rate"));
            }
            None => {
                let share = local_rate(rate, fleet.replicas());
                if let Err(refusal) = scope.state.tpm.try_charge(share, need) {
                    held.refund_all();
                    let info = RateLimitInfo {
                        limit_tokens: Some(share.per_minute),
                        remaining_tokens: Some(refusal.remaining),
                        reset_tokens: Some(refusal.reset),
                        ..RateLimitInfo::default()
                    };
                    let what = format!("is over its tokens-per-minute limit (this request needs about {need})");
                    return Err(limited(ErrorKind::TpmExceeded, scope.name, &what, Some(refusal), info));
                }
                held.local(LocalCharge::Tpm(scope.state.clone(), share));
            }
        }
    }
    for scope in scopes {
        let Some((config, _)) = scope.quota else {
            continue;
        };
        if let Err(error) = quota(fleet, held, scope, config, estimate).await {
            held.refund_all();
            return Err(error);
        }
    }
    Ok(())
}

/// What a quota's period is: its start, and the ledger's figures when they describe it.
fn period_of(config: &QuotaConfig, now: i64) -> (i64, i64, i64) {
    let start = period_start(config.period, now).map_or(config.period_start, |p| p.max(config.period_start));
    if config.period_start == start {
        (start, config.used_tokens as i64, config.used_cost_micros as i64)
    } else {
        (start, 0, 0)
    }
}

/// How long a quota period's counts are kept in Redis.
fn period_ttl_ms(config: &QuotaConfig) -> u64 {
    use crate::config::QuotaPeriod;
    let days = match config.period {
        QuotaPeriod::Daily => 2,
        QuotaPeriod::Monthly => 33,
        QuotaPeriod::None => 400,
    };
    days * 86_400_000
}

fn exhausted(scope: &Scope<'_>, tokens: bool, used: i64, limit: u64, needs: u64) -> GatewayError {
    let what = if tokens { "token" } else { "spending" };
    let message =
        format!("{} has used its {what} quota ({used} of {limit}); this request needs about {needs} more", scope.name);
    GatewayError::new(ErrorKind::InsufficientQuota, message)
}

/// Take the two parts of an estimate from a chunk, both or neither.
fn take_both(tokens: &Allowance, cost: &Allowance, t: i64, c: i64) -> bool {
    if !tokens.try_take(t) {
        return false;
    }
    if cost.try_take(c) {
        return true;
    }
    tokens.add(t);
    false
}

async fn quota(
    fleet: &Arc<Fleet>,
    held: &mut Held,
    scope: &Scope<'_>,
    config: &QuotaConfig,
    estimate: Estimate,
) -> Result<(), GatewayError> {
    let chunk = &scope.state.leased.quota;
    let (period, ledger_t, ledger_c) = period_of(config, estimate.now);
    if let Some((tokens, cost, old)) = chunk.turn(period) {
        fleet.give_back_quota(scope_key(scope), old, tokens, cost);
    }
    let (need_t, need_c) = (estimate.tokens as i64, estimate.cost_micros as i64);
    let hold = |away| LeaseHold::Quota { state: scope.state.clone(), tokens: need_t, cost: need_c, away };
    if take_both(&chunk.tokens, &chunk.cost, need_t, need_c) {
        held.lease(hold(false));
        return Ok(());
    }
    let replicas = fleet.replicas();
    // Just back from an outage, the other replicas may not have charged what they spent on
    // their shares yet: a new lease waits for the fleet to settle (a second at most).
    fleet.settled().await;
    if fleet.shared() {
        let limit = |l: Option<u64>| l.map_or(-1, |v| v as i64);
        let want_t = config.tokens.map_or(need_t, |l| lease_size(l, replicas, estimate.tokens) as i64);
        let want_c = config.cost_micros.map_or(need_c, |l| lease_size(l, replicas, estimate.cost_micros) as i64);
        let key = scope_key(scope);
        let (known_t, known_c) = chunk.known_use();
        let mut invocation = fleet.scripts.quota_lease.prepare_invoke();
        invocation
            .key(fleet.key(&["q", &key, &period.to_string()]))
            .arg(limit(config.tokens))
            .arg(limit(config.cost_micros))
            .arg(need_t)
            .arg(need_c)
            .arg(want_t)
            .arg(want_c)
            .arg(ledger_t.max(known_t))
            .arg(ledger_c.max(known_c))
            .arg(period_ttl_ms(config));
        fleet.counters.waits.fetch_add(1, Ordering::Relaxed);
        if let Some((granted_t, granted_c, used_t, used_c)) = fleet.invoke::<(i64, i64, i64, i64)>(&invocation).await {
            fleet.note_lease(&key, scope.state);
            chunk.learn((used_t, used_c), (limit(config.tokens), limit(config.cost_micros)));
            if granted_t == 0 && granted_c == 0 && (need_t > 0 || need_c > 0) {
                let tokens_short = config.tokens.is_some_and(|l| used_t + need_t > l as i64);
                let (used, limit, needs) = if tokens_short {
                    (used_t, config.tokens.unwrap_or(0), estimate.tokens)
                } else {
                    (used_c, config.cost_micros.unwrap_or(0), estimate.cost_micros)
                };
                return Err(exhausted(scope, tokens_short, used, limit, needs));
            }
            chunk.tokens.add(granted_t - need_t);
            chunk.cost.add(granted_c - need_c);
            held.lease(hold(false));
            return Ok(());
        }
    }
    if fleet.settings.fail_closed.quota {
        return Err(unavailable("quota"));
    }
    // Redis away: this replica's share of what the store last said remained (or, never told,
    // of what the ledger says), fixed for the outage, so that the fleet together cannot
    // overshoot. When Redis is back the whole share is charged to it (the unspent part becomes
    // this replica's chunk).
    let (room_t, room_c) = match chunk.room() {
        (-1, -1) => (
            config.tokens.map_or(-1, |l| (l as i64 - ledger_t).max(0)),
            config.cost_micros.map_or(-1, |l| (l as i64 - ledger_c).max(0)),
        ),
        known => known,
    };
    let share = |room: i64| if room < 0 { UNLIMITED } else { room / i64::from(replicas) };
    let (budget_t, budget_c) = chunk.away_budget((share(room_t), share(room_c)));
    let fits = |spent: &std::sync::atomic::AtomicI64, need: i64, budget: i64| {
        spent.fetch_update(Ordering::AcqRel, Ordering::Acquire, |s| (s + need <= budget).then_some(s + need)).is_ok()
    };
    if !fits(&chunk.away_tokens, need_t, budget_t) {
        let spent = chunk.away_tokens.load(Ordering::Acquire);
        return Err(exhausted(scope, true, spent, budget_t.max(0) as u64, estimate.tokens));
    }
    if !fits(&chunk.away_cost, need_c, budget_c) {
        chunk.away_tokens.fetch_sub(need_t, Ordering::AcqRel);
        let spent = chunk.away_cost.load(Ordering::Acquire);
        return Err(exhausted(scope, false, spent, budget_c.max(0) as u64, estimate.cost_micros));
    }
    held.lease(hold(true));
    Ok(())
}
