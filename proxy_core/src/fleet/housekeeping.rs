//! The fleet's background work, off the request path: the replica's heartbeat in Redis (its slots
//! are dropped by others once it lapses), giving back what sits unused (bucket tokens idle for a
//! second, surplus slots idle for a moment, quota chunks idle for a second), and, while Redis is
//! away, probing it; when it answers again, what was spent meanwhile is charged to it first, then
//! the limits are shared again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::Fleet;
use crate::limits::LimitState;

const TICK: Duration = Duration::from_millis(200);
/// A share with no limit behind it (see `admit::quota`).
pub(super) const UNLIMITED: i64 = i64::MAX / 4;
/// The housekeeping's own calls are off the request path: they may wait longer for Redis.
const CALL_TIMEOUT: Duration = Duration::from_secs(1);
/// A replica whose heartbeat is older than this has its slots dropped by the others.
const ALIVE_TTL_MS: u64 = 10_000;
const HEARTBEAT_EVERY: u32 = 5;
/// Bucket tokens and quota chunks unused this long go back.
const IDLE_MS: u64 = 1_000;
/// Quota periods used within this long have what the fleet used of them refreshed.
const ACTIVE_MS: u64 = 5_000;
/// Surplus slots unused this long go back.
const SLOT_IDLE_MS: u64 = 100;

impl Fleet {
    async fn heartbeat(&self) -> bool {
        let mut invocation = self.scripts.heartbeat.prepare_invoke();
        invocation.key(self.key(&["alive"])).arg(&self.settings.replica).arg(ALIVE_TTL_MS);
        self.call::<i64>(&invocation, CALL_TIMEOUT).await.is_some()
    }

    async fn return_bucket(&self, scope: &str, state: &LimitState, kind: &str, idle_ms: u64) {
        let allowance = if kind == "rpm" { &state.leased.rpm } else { &state.leased.tpm };
        if allowance.level() <= 0 || allowance.idle_ms() < idle_ms {
            return;
        }
        let unused = allowance.take_all();
        if unused <= 0 {
            return;
        }
        let interval = allowance.interval_us.load(Ordering::Relaxed);
        let mut invocation = self.scripts.bucket_return.prepare_invoke();
        invocation.key(self.key(&["b", scope, kind])).arg(interval).arg(unused);
        if self.call::<i64>(&invocation, CALL_TIMEOUT).await.is_none() {
            // Not given back: keep using them.
            allowance.add(unused);
        }
    }

    async fn return_slots(&self, scope: &str, state: &LimitState, idle_ms: u64) {
        let slots = &state.leased.slots;
        if slots.idle_ms() < idle_ms {
            return;
        }
        let surplus = slots.take_surplus(0);
        if surplus == 0 {
            return;
        }
        let mut invocation = self.scripts.slots_release.prepare_invoke();
        invocation.key(self.key(&["c", scope])).arg(&self.settings.replica).arg(surplus);
        if self.call::<i64>(&invocation, CALL_TIMEOUT).await.is_none() {
            slots.add_held(surplus);
        }
    }

    /// Change a quota period's count by a signed amount (give back < 0, charge > 0), raising
    /// it first to `floor` (what this replica last knew of it) if the store holds less.
    async fn adjust_quota(&self, scope: &str, period: i64, tokens: i64, cost: i64, floor: (i64, i64)) -> bool {
        if tokens == 0 && cost == 0 && floor == (0, 0) {
            return true;
        }
        let mut invocation = self.scripts.quota_adjust.prepare_invoke();
        invocation
            .key(self.key(&["q", scope, &period.to_string()]))
            .arg(tokens)
            .arg(cost)
            .arg(86_400_000u64 * 400)
            .arg(floor.0)
            .arg(floor.1);
        self.call::<(i64, i64)>(&invocation, CALL_TIMEOUT).await.is_some()
    }

    /// Give back a chunk of an earlier period (the request path calls this; it does not wait).
    pub fn give_back_quota(self: &Arc<Self>, scope: String, period: i64, tokens: i64, cost: i64) {
        if (tokens <= 0 && cost <= 0) || period == i64::MIN {
            return;
        }
        let fleet = self.clone();
        tokio::spawn(async move {
            fleet.adjust_quota(&scope, period, -tokens.max(0), -cost.max(0), (0, 0)).await;
        });
    }

    async fn return_quota(&self, scope: &str, state: &LimitState, idle_ms: u64) {
        let chunk = &state.leased.quota;
        if chunk.tokens.idle_ms() < idle_ms || (chunk.tokens.level() <= 0 && chunk.cost.level() <= 0) {
            return;
        }
        let period = chunk.period();
        let (tokens, cost) = (chunk.tokens.take_all(), chunk.cost.take_all());
        if !self.adjust_quota(scope, period, -tokens, -cost, (0, 0)).await {
            chunk.tokens.add(tokens);
            chunk.cost.add(cost);
        }
    }

    /// Put back in Redis what this replica holds and spent while it was away: its slots (Redis
    /// may have restarted empty), the period's use as it last knew it (a floor), and what it
    /// spent on its local shares meanwhile.
    async fn charge_away(&self, scope: &str, state: &LimitState) -> bool {
        let (held, _) = state.leased.slots.counts();
        if held > 0 {
            let mut invocation = self.scripts.slots_set.prepare_invoke();
            invocation.key(self.key(&["c", scope])).arg(&self.settings.replica).arg(held);
            if self.call::<i64>(&invocation, CALL_TIMEOUT).await.is_none() {
                return false;
            }
        }
        let chunk = &state.leased.quota;
        if chunk.period() == i64::MIN {
            return true;
        }
        let Some((budget, spent)) = chunk.end_away() else {
            return self.adjust_quota(scope, chunk.period(), 0, 0, chunk.known_use()).await;
        };
        // The whole share is charged (the other replicas counted on this one using up to it);
        // what is left of it becomes this replica's chunk.
        // An unlimited dimension had no real share: only what was spent is charged.
        let charge = |budget: i64, spent: i64| if budget >= UNLIMITED { spent } else { budget.max(spent) };
        let (charge_t, charge_c) = (charge(budget.0, spent.0).max(0), charge(budget.1, spent.1).max(0));
        if self.adjust_quota(scope, chunk.period(), charge_t, charge_c, chunk.known_use()).await {
            chunk.tokens.add(charge_t - spent.0);
            chunk.cost.add(charge_c - spent.1);
            return true;
        }
        chunk.away_budget(budget);
        chunk.away_tokens.fetch_add(spent.0, Ordering::AcqRel);
        chunk.away_cost.fetch_add(spent.1, Ordering::AcqRel);
        false
    }

    /// Keep what this replica knows of the quota periods it is using fresh (once a second), so
    /// that its share while Redis is away is computed from the fleet's recent use, not from its
    /// own last lease.
    async fn refresh_known_use(&self) {
        for (scope, state) in self.tracked() {
            let chunk = &state.leased.quota;
            if chunk.period() == i64::MIN || chunk.tokens.idle_ms() > ACTIVE_MS {
                continue;
            }
            let mut invocation = self.scripts.quota_read.prepare_invoke();
            invocation.key(self.key(&["q", &scope, &chunk.period().to_string()]));
            if let Some(used) = self.call::<(i64, i64)>(&invocation, CALL_TIMEOUT).await {
                chunk.learn(used, chunk.limits());
            }
        }
    }

    /// One round: give back what sits idle (`idle` thresholds), or everything (`everything`).
    async fn give_back(&self, everything: bool) {
        let (idle, slot_idle) = if everything { (0, 0) } else { (IDLE_MS, SLOT_IDLE_MS) };
        for (scope, state) in self.tracked() {
            self.return_bucket(&scope, &state, "rpm", idle).await;
            self.return_bucket(&scope, &state, "tpm", idle).await;
            self.return_slots(&scope, &state, slot_idle).await;
            self.return_quota(&scope, &state, idle).await;
        }
    }

    /// Redis answers again: charge what was spent meanwhile, then share again.
    async fn recover(&self) -> bool {
        for (scope, state) in self.tracked() {
            if !self.charge_away(&scope, &state).await {
                return false;
            }
        }
        self.enter_shared();
        true
    }

    /// Give back everything leased (a stopping replica).
    pub async fn release_all(&self) {
        if self.shared() {
            self.give_back(true).await;
        }
    }
}

/// The housekeeping loop; runs as long as the core's runtime.
pub async fn run(fleet: Arc<Fleet>) {
    // Connect (and announce this replica) before the first request needs it.
    fleet.heartbeat().await;
    let mut ticks: u32 = 0;
    loop {
        tokio::time::sleep(TICK).await;
        ticks = ticks.wrapping_add(1);
        if fleet.shared() {
            if ticks.is_multiple_of(HEARTBEAT_EVERY) {
                fleet.heartbeat().await;
                fleet.refresh_known_use().await;
            }
            fleet.give_back(false).await;
        } else if fleet.heartbeat().await {
            fleet.recover().await;
        }
    }
}
