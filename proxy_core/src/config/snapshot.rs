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
use crate::sse::TokenUsage;
use crate::stats::Windows;
use crate::translate::Translation;
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
    /// Full upstream URI per endpoint, built once (an Azure member's depend on the deployment:
    /// each route leg has its own, `RouteLeg::uris`).
    pub uris: EndpointUris,
    /// An Azure member's deployments: how a route leg's URIs are built.
    pub azure: Option<AzureDeployments>,
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

/// A member's upstream URI for each endpoint, indexed by `Endpoint::index`.
pub type EndpointUris = Arc<[Uri; Endpoint::ALL.len()]>;

/// Azure OpenAI puts the deployment in the path and the API version in the query:
/// `{base}/deployments/{deployment}/chat/completions?api-version=...`.
#[derive(Debug, Clone)]
pub struct AzureDeployments {
    /// The base URL without a trailing slash (`https://name.openai.azure.com/openai`).
    pub base: String,
    pub api_version: String,
}

impl AzureDeployments {
    /// The URIs of one deployment; `None` unless its name is one Azure allows (letters, digits,
    /// `_ - .`: nothing that could change the path or the query).
    pub fn uris(&self, deployment: &str) -> Option<EndpointUris> {
        let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
        if deployment.is_empty()
            || deployment.len() > 64
            || !deployment.chars().all(allowed)
            || deployment.starts_with('.')
        {
            return None;
        }
        let mut uris = Vec::with_capacity(Endpoint::ALL.len());
        for endpoint in Endpoint::ALL {
            let full = format!(
                "{}/deployments/{deployment}{}?api-version={}",
                self.base,
                endpoint.upstream_suffix(),
                self.api_version
            );
            uris.push(Uri::try_from(full).ok()?);
        }
        uris.try_into().ok().map(Arc::new)
    }
}

pub struct Pool {
    pub id: Arc<str>,
    /// Every member of a pool speaks the same API.
    pub kind: ProviderKind,
    /// The endpoints every member answers, one bit per `Endpoint::index` (see `serves`).
    pub served: u8,
    pub members: Vec<Arc<Member>>,
    pub timeouts: PoolTimeouts,
    pub gate: Arc<PoolGate>,
    pub retry: RetryPolicy,
    pub ejection: EjectionConfig,
    pub health_check: Option<HealthCheckConfig>,
    pub state: Arc<PoolState>,
    pub series: Arc<PoolSeries>,
}

impl Pool {
    /// Whether the pool takes requests for `endpoint`: every member answers it (so whichever the
    /// picker chooses, or a retry moves to, can), or answers the API it translates to.
    pub fn serves(&self, endpoint: Endpoint) -> bool {
        self.serves_natively(endpoint) || Translation::between(endpoint, self.served).is_some()
    }

    pub fn serves_natively(&self, endpoint: Endpoint) -> bool {
        self.served & (1 << endpoint.index()) != 0
    }

    /// How a request for `endpoint` must be translated to reach this pool (`None`: as it is).
    pub fn translation(&self, endpoint: Endpoint) -> Option<Translation> {
        if self.serves_natively(endpoint) {
            return None;
        }
        Translation::between(endpoint, self.served)
    }

    /// The bits of `served` for members of these kinds.
    pub fn served_by(kinds: impl Iterator<Item = ProviderKind> + Clone) -> u8 {
        Endpoint::ALL
            .iter()
            .filter(|e| kinds.clone().all(|kind| kind.serves(**e)))
            .fold(0, |bits, e| bits | (1 << e.index()))
    }
}

/// One pool in a route's chain, with the upstream model name and the per-member series.
pub struct RouteLeg {
    pub pool: Arc<Pool>,
    pub upstream_model: Arc<str>,
    /// The upstream model as a JSON string literal, spliced into request bodies.
    pub model_json: Bytes,
    /// Each member's URIs for this leg's model (indexed like `pool.members`): the member's own,
    /// or an Azure member's for the deployment the model names.
    pub uris: Vec<EndpointUris>,
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

/// A model's price in force: micro-units per million tokens, with a rate for each part of a
/// count that providers invoice apart (the input or output rate where the price sets none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Price {
    pub version: i64,
    pub input_per_mtok: u64,
    pub output_per_mtok: u64,
    /// Prompt tokens read from the provider's cache.
    pub cached_input_per_mtok: u64,
    /// Prompt tokens written to the provider's cache (Anthropic's cache creation).
    pub cache_write_per_mtok: u64,
    /// Completion tokens spent on reasoning.
    pub reasoning_per_mtok: u64,
}

impl Price {
    /// A price with one input and one output rate for every part.
    pub fn flat(version: i64, input_per_mtok: u64, output_per_mtok: u64) -> Self {
        Self {
            version,
            input_per_mtok,
            output_per_mtok,
            cached_input_per_mtok: input_per_mtok,
            cache_write_per_mtok: input_per_mtok,
            reasoning_per_mtok: output_per_mtok,
        }
    }

    /// Cost in micro-units of what an upstream counted, each part at its own rate, rounded up to
    /// a whole micro-unit.
    pub fn cost(&self, usage: &TokenUsage) -> u64 {
        let fresh = usage.prompt.saturating_sub(usage.cached).saturating_sub(usage.cache_write);
        let answer = usage.completion.saturating_sub(usage.reasoning);
        let total = u128::from(fresh) * u128::from(self.input_per_mtok)
            + u128::from(usage.cached) * u128::from(self.cached_input_per_mtok)
            + u128::from(usage.cache_write) * u128::from(self.cache_write_per_mtok)
            + u128::from(answer) * u128::from(self.output_per_mtok)
            + u128::from(usage.reasoning) * u128::from(self.reasoning_per_mtok);
        micros(total)
    }

    /// The most `prompt` and `completion` tokens can cost however the upstream splits them into
    /// parts: what a reservation holds, so that no split outruns a quota.
    pub fn bound(&self, prompt: u64, completion: u64) -> u64 {
        let prompt_rate = self.input_per_mtok.max(self.cached_input_per_mtok).max(self.cache_write_per_mtok);
        let completion_rate = self.output_per_mtok.max(self.reasoning_per_mtok);
        micros(u128::from(prompt) * u128::from(prompt_rate) + u128::from(completion) * u128::from(completion_rate))
    }
}

fn micros(per_mtok_total: u128) -> u64 {
    u64::try_from(per_mtok_total.div_ceil(1_000_000)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod price_tests {
    use super::*;

    #[test]
    fn each_part_at_its_rate_and_a_reservation_covers_any_split() {
        let price = Price {
            cached_input_per_mtok: 500_000,
            cache_write_per_mtok: 2_500_000,
            reasoning_per_mtok: 7_000_000,
            ..Price::flat(1, 2_000_000, 3_000_000)
        };
        let usage = TokenUsage { prompt: 20, completion: 10, cached: 6, cache_write: 4, reasoning: 3 };
        assert_eq!(price.cost(&usage), 10 * 2 + 3 + 10 + 7 * 3 + 3 * 7);
        // The most 20 prompt and 10 completion tokens can cost: all written to the cache, all
        // reasoning; never less than what any split of them is billed.
        assert_eq!(price.bound(20, 10), 50 + 70);
        assert!(price.bound(20, 10) >= price.cost(&usage));
        // A flat price bills the parts as the whole.
        let flat = Price::flat(1, 2_000_000, 3_000_000);
        assert_eq!(flat.cost(&usage), 20 * 2 + 10 * 3);
        assert_eq!(flat.bound(20, 10), flat.cost(&usage));
        // Half a micro-unit is billed whole.
        assert_eq!(price.cost(&TokenUsage { prompt: 1, cached: 1, ..TokenUsage::default() }), 1);
    }
}
