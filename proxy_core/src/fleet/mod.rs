//! A fleet of replicas sharing their limits through Redis: per key and tenant, RPM and TPM
//! buckets, concurrency slots and quota periods are counted once for the whole fleet.
//!
//! Redis is not asked on every request: a replica leases small allowances (bucket tokens, slots,
//! a chunk of a quota period) and admits from what it holds, refilling ahead of need, and its
//! housekeeping gives back what sits unused. Lease sizes are bounded so that the fleet's error is
//! under-use of at most 2% of a limit (never over-admission): every lease is drawn from one
//! atomic count in Redis.
//!
//! When Redis does not answer in time, the replica falls back to a local share of each limit
//! (the limit divided by the live replicas, as Envoy's local rate limit does; a quota's share of
//! what the store last said remained), or refuses the kinds the operator set to fail closed; its
//! housekeeping probes Redis and returns to shared mode by itself, first charging what it spent
//! meanwhile.

mod admit;
mod housekeeping;
mod scripts;

pub use admit::{admit_request, admit_tokens};
pub use housekeeping::run as housekeeping;

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{FromRedisValue, ScriptInvocation};
use serde::Serialize;

use crate::limits::LimitState;
use scripts::Scripts;

/// Limit kinds an operator can make refuse requests (fail closed) while Redis is away.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailClosed {
    pub rpm: bool,
    pub tpm: bool,
    pub concurrency: bool,
    pub quota: bool,
}

impl FailClosed {
    pub fn parse(kinds: &[String]) -> Result<Self, String> {
        let mut out = Self::default();
        for kind in kinds {
            match kind.as_str() {
                "rpm" => out.rpm = true,
                "tpm" => out.tpm = true,
                "concurrency" => out.concurrency = true,
                "quota" => out.quota = true,
                other => return Err(format!("unknown limit kind {other:?} (rpm, tpm, concurrency, quota)")),
            }
        }
        Ok(out)
    }
}

#[derive(Debug, Clone)]
pub struct FleetSettings {
    pub redis_url: String,
    /// Prefix of every key this fleet writes (several fleets may share one Redis).
    pub prefix: String,
    /// This process's name in the store: unique per start, so a restarted replica never
    /// inherits the slots of its previous life.
    pub replica: String,
    pub fail_closed: FailClosed,
    /// Longest wait for Redis on the request path before falling back.
    pub timeout: Duration,
}

/// After an outage, how long a replica waits before new quota leases: the other replicas' probes
/// (every 200 ms) find Redis back and charge their spending well within it.
const SETTLE_MS: u64 = 1_000;

const SHARED: u8 = 0;
const AWAY: u8 = 1;

/// The fleet as one replica sees it.
pub struct Fleet {
    pub settings: FleetSettings,
    client: redis::Client,
    conn: OnceLock<ConnectionManager>,
    scripts: Scripts,
    mode: AtomicU8,
    /// Live replicas (from the control plane's heartbeats), at least 1.
    replicas: AtomicU32,
    /// When Redis last answered again after an outage (ms on the monotonic clock; 0: never).
    recovered_ms: AtomicU64,
    /// Scopes holding something leased, for the housekeeping to look at.
    tracked: Mutex<Vec<Tracked>>,
    pub counters: FleetCounters,
}

/// A scope with leases: its name in the store and its state.
pub struct Tracked {
    pub scope: String,
    pub state: Weak<LimitState>,
}

#[derive(Default)]
pub struct FleetCounters {
    pub commands: AtomicU64,
    pub errors: AtomicU64,
    pub fallbacks: AtomicU64,
    pub waits: AtomicU64,
}

#[derive(Serialize)]
pub struct FleetStatus {
    pub mode: &'static str,
    pub replica: String,
    pub replicas: u32,
    pub redis_commands: u64,
    pub redis_errors: u64,
    pub fallbacks: u64,
    pub lease_waits: u64,
}

impl Fleet {
    pub fn new(settings: FleetSettings) -> Result<Arc<Self>, String> {
        let client = redis::Client::open(settings.redis_url.as_str())
            .map_err(|e| format!("redis.url is not a Redis URL ({:?})", e.kind()))?;
        Ok(Arc::new(Self {
            settings,
            client,
            conn: OnceLock::new(),
            scripts: Scripts::default(),
            mode: AtomicU8::new(SHARED),
            replicas: AtomicU32::new(1),
            recovered_ms: AtomicU64::new(0),
            tracked: Mutex::new(Vec::new()),
            counters: FleetCounters::default(),
        }))
    }

    /// The connection (made lazily on the runtime, reconnecting by itself).
    fn conn(&self) -> Option<ConnectionManager> {
        if let Some(conn) = self.conn.get() {
            return Some(conn.clone());
        }
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(self.settings.timeout.max(Duration::from_millis(200))))
            .set_response_timeout(Some(self.settings.timeout))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_millis(500));
        let made = ConnectionManager::new_lazy_with_config(self.client.clone(), config).ok()?;
        Some(self.conn.get_or_init(|| made).clone())
    }

    pub fn shared(&self) -> bool {
        self.mode.load(Ordering::Acquire) == SHARED
    }

    pub fn replicas(&self) -> u32 {
        self.replicas.load(Ordering::Relaxed).max(1)
    }

    pub fn set_replicas(&self, live: u32) {
        self.replicas.store(live.max(1), Ordering::Relaxed);
    }

    fn enter_away(&self) {
        if self.mode.swap(AWAY, Ordering::AcqRel) == SHARED {
            self.counters.fallbacks.fetch_add(1, Ordering::Relaxed);
            tracing::warn!("redis does not answer: limits fall back to this replica's share");
        }
    }

    fn enter_shared(&self) {
        if self.mode.swap(SHARED, Ordering::AcqRel) == AWAY {
            self.recovered_ms.store(crate::clock::monotonic_ms().max(1), Ordering::Release);
            tracing::info!("redis answers again: limits are shared by the fleet");
        }
    }

    /// Wait until the fleet settled after an outage: every replica's probe has found Redis back
    /// (and charged its spending) within `SETTLE_MS` of this one's.
    pub async fn settled(&self) {
        let since = self.recovered_ms.load(Ordering::Acquire);
        if since == 0 {
            return;
        }
        let left = (since + SETTLE_MS).saturating_sub(crate::clock::monotonic_ms());
        if left > 0 {
            tokio::time::sleep(Duration::from_millis(left)).await;
        }
    }

    /// Run a script, within the request-path timeout; `None` (and fallback) if Redis does not
    /// answer in time. While away, nothing is sent: the housekeeping's probe decides when to
    /// come back.
    async fn invoke<T: FromRedisValue>(&self, invocation: &ScriptInvocation<'_>) -> Option<T> {
        if !self.shared() {
            return None;
        }
        self.call(invocation, self.settings.timeout).await
    }

    /// Run a script whatever the mode, waiting up to `timeout` (the housekeeping's own calls
    /// wait longer than the request path does).
    async fn call<T: FromRedisValue>(&self, invocation: &ScriptInvocation<'_>, timeout: Duration) -> Option<T> {
        let mut conn = self.conn()?;
        self.counters.commands.fetch_add(1, Ordering::Relaxed);
        match tokio::time::timeout(timeout, invocation.invoke_async(&mut conn)).await {
            Ok(Ok(value)) => Some(value),
            Ok(Err(e)) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(error = %e, "redis call failed");
                self.enter_away();
                None
            }
            Err(_) => {
                self.counters.errors.fetch_add(1, Ordering::Relaxed);
                self.enter_away();
                None
            }
        }
    }

    /// Remember a scope that now holds leases.
    fn track(&self, scope: String, state: &Arc<LimitState>) {
        let mut tracked = self.tracked.lock().unwrap_or_else(PoisonError::into_inner);
        tracked.push(Tracked { scope, state: Arc::downgrade(state) });
    }

    /// The scopes with leases, still alive (the dead are forgotten).
    fn tracked(&self) -> Vec<(String, Arc<LimitState>)> {
        let mut tracked = self.tracked.lock().unwrap_or_else(PoisonError::into_inner);
        tracked.retain(|t| t.state.strong_count() > 0);
        tracked.iter().filter_map(|t| t.state.upgrade().map(|s| (t.scope.clone(), s))).collect()
    }

    fn key(&self, parts: &[&str]) -> String {
        let mut key = self.settings.prefix.clone();
        for part in parts {
            key.push(':');
            key.push_str(part);
        }
        key
    }

    pub fn status(&self) -> FleetStatus {
        let c = &self.counters;
        FleetStatus {
            mode: if self.shared() { "shared" } else { "fallback" },
            replica: self.settings.replica.clone(),
            replicas: self.replicas(),
            redis_commands: c.commands.load(Ordering::Relaxed),
            redis_errors: c.errors.load(Ordering::Relaxed),
            fallbacks: c.fallbacks.load(Ordering::Relaxed),
            lease_waits: c.waits.load(Ordering::Relaxed),
        }
    }
}

/// The fleet's metric families, read at scrape time.
pub fn metric_families(fleet: &Fleet) -> Vec<crate::metrics::FamilySnapshot> {
    use crate::metrics::FamilySnapshot;
    let c = &fleet.counters;
    vec![
        FamilySnapshot::gauge(
            "sluicegate_fleet_mode",
            "1 while this replica's limits fall back to its local share (Redis away), 0 while shared.",
            if fleet.shared() { 0.0 } else { 1.0 },
        ),
        FamilySnapshot::gauge(
            "sluicegate_fleet_replicas",
            "Live replicas of the fleet, as this replica was last told.",
            f64::from(fleet.replicas()),
        ),
        FamilySnapshot::counter(
            "sluicegate_fleet_redis_calls_total",
            "Scripts run in Redis by this replica (leases, give-backs, heartbeats).",
            c.commands.load(Ordering::Relaxed) as f64,
        ),
        FamilySnapshot::counter(
            "sluicegate_fleet_redis_errors_total",
            "Redis calls that failed or timed out.",
            c.errors.load(Ordering::Relaxed) as f64,
        ),
        FamilySnapshot::counter(
            "sluicegate_fleet_fallbacks_total",
            "Times this replica fell back to local shares because Redis did not answer.",
            c.fallbacks.load(Ordering::Relaxed) as f64,
        ),
        FamilySnapshot::counter(
            "sluicegate_fleet_lease_waits_total",
            "Requests that waited for a lease from Redis (the replica held none left).",
            c.waits.load(Ordering::Relaxed) as f64,
        ),
    ]
}
