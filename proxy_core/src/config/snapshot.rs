//! The compiled snapshot: lookup tables the request path reads through one `ArcSwap` load.
//! Everything here is immutable; state that must survive a swap (limiter buckets, in-flight
//! counts, metric series, connection pools) is owned by the `Registry` and only referenced.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Uri};

use super::model::{EjectionConfig, HealthCheckConfig, Limits, Priority, ProviderKind, QuotaConfig, Status};
use crate::admission::PoolGate;
use crate::auth::{KeyHash, KeyHasher};
use crate::endpoint::Endpoint;
use crate::limits::{LimitState, QuotaState};
use crate::metrics::{GenAiSeries, LegSeries, PoolSeries, TenantSeries};
use crate::routing::{MemberState, PoolState, RetryPolicy};
use crate::stats::Windows;
use crate::upstream::UpstreamClient;

pub struct Snapshot {
    pub version: u64,
    pub hasher: KeyHasher,
    pub keys: HashMap<KeyHash, Arc<KeyEntry>>,
    /// Key id to its hash, for key changes by id.
    pub key_ids: HashMap<Arc<str>, KeyHash>,
    pub tenants: HashMap<Arc<str>, Arc<TenantEntry>>,
    pub routes: HashMap<Arc<str>, Arc<Route>>,
    /// Route aliases in sorted order, for `/v1/models`.
    pub route_aliases: Vec<Arc<str>>,
    pub pools: HashMap<Arc<str>, Arc<Pool>>,
    /// The usage acknowledgement the quotas' ledger figures were read after (see
    /// `ConfigPayload::usage_acked`).
    pub usage_acked: Option<u64>,
}

pub struct TenantEntry {
    pub id: Arc<str>,
    pub status: Status,
    pub limits: Limits,
    pub limit_state: Arc<LimitState>,
    pub quota: Option<QuotaConfig>,
    pub quota_state: Arc<QuotaState>,
    /// Its requests, tokens and cost (or `(other)`'s, past the bound of tenant series).
    pub series: Arc<TenantSeries>,
}

pub struct KeyEntry {
    pub id: Arc<str>,
    pub hash: KeyHash,
    pub prefix: Arc<str>,
    pub tenant: Arc<TenantEntry>,
    pub status: Status,
    /// Unix seconds.
    pub expires_at: Option<f64>,
    pub models: Option<HashSet<Arc<str>>>,
    pub priority: Priority,
    pub limits: Limits,
    pub limit_state: Arc<LimitState>,
    pub quota: Option<QuotaConfig>,
    pub quota_state: Arc<QuotaState>,
}

impl KeyEntry {
    pub fn allows_model(&self, alias: &str) -> bool {
        self.models.as_ref().is_none_or(|m| m.contains(alias))
    }

    /// Active, unexpired, and its tenant active.
    pub fn usable_at(&self, unix_now: f64) -> bool {
        self.status == Status::Active
            && self.tenant.status == Status::Active
            && self.expires_at.is_none_or(|t| unix_now < t)
    }
}

pub struct PoolTimeouts {
    pub connect: Duration,
    pub first_byte: Duration,
    pub idle: Duration,
    pub total: Duration,
}

pub struct Member {
    pub id: Arc<str>,
    pub kind: ProviderKind,
    /// The base URL's host and port (`server.address`, `server.port` in traces and metrics).
    pub host: Arc<str>,
    pub port: u16,
    /// Full upstream URI per endpoint, built once.
    pub uris: [Uri; Endpoint::ALL.len()],
    /// The header carrying the upstream credential, marked sensitive.
    pub credential: Option<(HeaderName, HeaderValue)>,
    /// The credential itself, to scrub from upstream error bodies before they are relayed.
    pub secret: Option<Arc<str>>,
    /// Client headers this member may receive beyond the gateway's allow-list.
    pub pass_through: Vec<HeaderName>,
    /// The operator's own headers for this member.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// Where active health checks go (the pool's check path under the base URL).
    pub health_uri: Option<Uri>,
    pub weight: u32,
    pub max_concurrency: Option<u32>,
    pub client: Arc<UpstreamClient>,
    pub state: Arc<MemberState>,
}

pub struct Pool {
    pub id: Arc<str>,
    /// Every member of a pool speaks the same API.
    pub kind: ProviderKind,
    pub members: Vec<Arc<Member>>,
    pub timeouts: PoolTimeouts,
    pub gate: Arc<PoolGate>,
    pub retry: RetryPolicy,
    pub ejection: EjectionConfig,
    pub health_check: Option<HealthCheckConfig>,
    pub state: Arc<PoolState>,
    pub series: Arc<PoolSeries>,
}

/// One pool in a route's chain, with the upstream model name and the per-member series.
pub struct RouteLeg {
    pub pool: Arc<Pool>,
    pub upstream_model: Arc<str>,
    /// The upstream model as a JSON string literal, spliced into request bodies.
    pub model_json: Bytes,
    /// Indexed like `pool.members`.
    pub series: Vec<Arc<LegSeries>>,
    /// The GenAI series, indexed like `pool.members`.
    pub genai: Vec<Arc<GenAiSeries>>,
}

pub struct Route {
    pub alias: Arc<str>,
    pub chain: Vec<RouteLeg>,
    pub max_output_tokens: Option<u64>,
    pub price: Option<Price>,
    /// Windowed figures of the route (kept across swaps by the registry).
    pub windows: Arc<Windows>,
}

/// A model's price in force: micro-units per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub version: i64,
    pub input_per_mtok: u64,
    pub output_per_mtok: u64,
}

impl Price {
    /// Cost in micro-units, rounded up to a whole micro-unit.
    pub fn cost(&self, prompt_tokens: u64, completion_tokens: u64) -> u64 {
        let total = u128::from(prompt_tokens) * u128::from(self.input_per_mtok)
            + u128::from(completion_tokens) * u128::from(self.output_per_mtok);
        u64::try_from(total.div_ceil(1_000_000)).unwrap_or(u64::MAX)
    }
}
