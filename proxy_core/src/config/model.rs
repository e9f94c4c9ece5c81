//! The configuration snapshot as the control plane sends it: plain data, deserialized from JSON.
//! Unknown fields are refused so that a typo in the control plane is a NACK, not a silent default.

use serde::Deserialize;

use crate::endpoint::Endpoint;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigPayload {
    pub auth: AuthConfig,
    #[serde(default)]
    pub tenants: Vec<TenantConfig>,
    #[serde(default)]
    pub keys: Vec<KeyConfig>,
    #[serde(default)]
    pub pools: Vec<PoolConfig>,
    #[serde(default)]
    pub routes: Vec<RouteConfig>,
    /// Prices in force, one per model alias.
    #[serde(default)]
    pub prices: Vec<PriceConfig>,
    /// The core's usage acknowledgement (`Core.usage_acked`) read before the quotas' ledger
    /// figures: every event up to it is in them, and what the core charged after it is added
    /// when a figure is adopted. Absent: the acknowledgement when the snapshot is applied.
    #[serde(default)]
    pub usage_acked: Option<u64>,
}

/// Keys added, replaced (same id) or removed (by id), applied on top of the snapshot in force.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyDelta {
    #[serde(default)]
    pub upsert: Vec<KeyConfig>,
    #[serde(default)]
    pub remove: Vec<String>,
    /// As `ConfigPayload::usage_acked`, for the quotas of the keys upserted.
    #[serde(default)]
    pub usage_acked: Option<u64>,
}

/// What a model costs, in integer micro-units of the billing currency per million tokens.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceConfig {
    pub model: String,
    /// The price's version id in the control plane; copied into every usage event.
    pub version: i64,
    pub input_per_mtok: u64,
    pub output_per_mtok: u64,
    /// Rates of the parts providers invoice apart; absent: the input rate (cache reads and
    /// writes) or the output rate (reasoning).
    #[serde(default)]
    pub cached_input_per_mtok: Option<u64>,
    #[serde(default)]
    pub cache_write_per_mtok: Option<u64>,
    #[serde(default)]
    pub reasoning_per_mtok: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum QuotaPeriod {
    /// One allowance, never reset.
    #[default]
    None,
    /// Resets at 00:00 UTC.
    Daily,
    /// Resets at 00:00 UTC on the first of the month.
    Monthly,
}

/// An allowance of tokens and/or money per period, and what the control plane's ledger says was
/// used of it so far. The core keeps the live count (reservations included) and only takes the
/// ledger's figure when it starts, when a new period begins, or when `period_start` moves (an
/// operator reset).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuotaConfig {
    #[serde(default)]
    pub period: QuotaPeriod,
    /// Prompt plus completion tokens per period.
    pub tokens: Option<u64>,
    /// Cost in micro-units per period (see `prices`).
    pub cost_micros: Option<u64>,
    /// Unix seconds when the counted period (or the last reset) began.
    pub period_start: i64,
    #[serde(default)]
    pub used_tokens: u64,
    #[serde(default)]
    pub used_cost_micros: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    /// The server-held secret of the keyed hash (HMAC-SHA256) under which tenant keys are stored.
    pub key_pepper: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    #[default]
    Active,
    Disabled,
    Revoked,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// Requests per minute.
    pub rpm: Option<u64>,
    /// Tokens per minute (prompt + completion).
    pub tpm: Option<u64>,
    pub max_concurrency: Option<u32>,
    /// Bucket sizes; default one minute's worth (the whole per-minute limit at once).
    pub rpm_burst: Option<u64>,
    pub tpm_burst: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantConfig {
    pub id: String,
    #[serde(default)]
    pub status: Status,
    #[serde(default)]
    pub limits: Limits,
    pub quota: Option<QuotaConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    #[default]
    Interactive,
    Batch,
}

impl Priority {
    pub const ALL: [Priority; 2] = [Priority::Interactive, Priority::Batch];

    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Interactive => "interactive",
            Priority::Batch => "batch",
        }
    }

    pub fn parse(s: &str) -> Option<Priority> {
        match s {
            "interactive" => Some(Priority::Interactive),
            "batch" => Some(Priority::Batch),
            _ => None,
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyConfig {
    pub id: String,
    pub tenant_id: String,
    /// Hex HMAC-SHA256 of the full key under `auth.key_pepper`.
    pub hash: String,
    /// The short public prefix shown to operators and written to logs.
    pub prefix: String,
    #[serde(default)]
    pub status: Status,
    /// Unix seconds after which the key is refused.
    pub expires_at: Option<f64>,
    /// Model aliases this key may use; `None` means every route.
    pub models: Option<Vec<String>>,
    #[serde(default)]
    pub priority: Priority,
    #[serde(default)]
    pub limits: Limits,
    pub quota: Option<QuotaConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI's API and every server compatible with it (vLLM, ...).
    Openai,
    Anthropic,
    /// OpenAI's API as Azure serves it: the deployment in the path, `api-version` in the query,
    /// the credential in `api-key`.
    #[serde(rename = "azure_openai")]
    AzureOpenai,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::AzureOpenai => "azure_openai",
        }
    }

    /// The API its members speak on the wire.
    pub fn speaks_openai(self) -> bool {
        matches!(self, ProviderKind::Openai | ProviderKind::AzureOpenai)
    }

    /// Whether its members answer `endpoint`: Anthropic's the Messages API only, OpenAI-compatible
    /// servers every other one, Azure's deployments all but the Responses API (which Azure serves
    /// at a path of its own, outside the deployment's).
    pub fn serves(self, endpoint: Endpoint) -> bool {
        match self {
            ProviderKind::Anthropic => endpoint == Endpoint::Messages,
            ProviderKind::Openai => endpoint != Endpoint::Messages,
            ProviderKind::AzureOpenai => !matches!(endpoint, Endpoint::Messages | Endpoint::Responses),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberConfig {
    pub id: String,
    pub kind: ProviderKind,
    /// Base URL including the API version segment, e.g. `http://10.0.0.5:8000/v1`.
    pub base_url: String,
    /// Decrypted upstream credential; sent as `Authorization: Bearer` (openai, unless
    /// `auth_header` names another header), `x-api-key` (anthropic) or `api-key` (azure_openai).
    pub credential: Option<String>,
    #[serde(default = "default_weight")]
    pub weight: u32,
    pub max_concurrency: Option<u32>,
    /// Speak HTTP/2 with prior knowledge to a plaintext upstream (TLS upstreams negotiate by ALPN).
    #[serde(default)]
    pub http2: bool,
    /// An operator's internal upstream: may be on link-local addresses, which are refused
    /// otherwise (checked on the resolved address at connect time). Metadata services and the
    /// gateway's own listeners stay out of reach.
    #[serde(default)]
    pub internal: bool,
    /// Headers the operator sends to this upstream with every request (e.g. an
    /// `OpenAI-Organization`); they win over a client's header of the same name.
    #[serde(default)]
    pub headers: std::collections::BTreeMap<String, String>,
    /// Names of client headers this upstream may receive beyond the gateway's allow-list
    /// (e.g. `anthropic-beta`).
    #[serde(default)]
    pub forward_headers: Vec<String>,
    /// `azure_openai`: the `api-version` query every request carries (required there).
    #[serde(default)]
    pub api_version: Option<String>,
    /// `openai`: the header that carries the credential instead of `Authorization: Bearer`
    /// (sent as the bare credential, e.g. `api-key`).
    #[serde(default)]
    pub auth_header: Option<String>,
}

fn default_weight() -> u32 {
    1
}

/// A field left out takes its value from `Timeouts::default()` (so for every policy below).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct Timeouts {
    pub connect_ms: u64,
    /// Until response headers arrive, and for streams until the first event after them.
    pub first_byte_ms: u64,
    /// Longest silence between two chunks of a response body.
    pub idle_ms: u64,
    /// Overall deadline of a non-streaming call.
    pub total_ms: u64,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self { connect_ms: 5_000, first_byte_ms: 120_000, idle_ms: 60_000, total_ms: 600_000 }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    pub id: String,
    pub members: Vec<MemberConfig>,
    #[serde(default)]
    pub timeouts: Timeouts,
    #[serde(default)]
    pub admission: AdmissionConfig,
    #[serde(default)]
    pub retry: RetryConfig,
    #[serde(default)]
    pub ejection: EjectionConfig,
    /// Active health checks of each member; off when absent.
    pub health_check: Option<HealthCheckConfig>,
}

/// When and how an attempt that failed before the client saw a byte is tried again.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetryConfig {
    /// Attempts per request, the first included (1 = no retries).
    pub max_attempts: u32,
    /// Full-jitter exponential backoff: sleep rand(0, min(cap, base * 2^retry)).
    pub backoff_base_ms: u64,
    pub backoff_cap_ms: u64,
    /// Retries allowed per request over the budget window (Envoy and Linkerd use 0.2)...
    pub budget_ratio: f64,
    /// ...plus this many retries per second whatever the traffic.
    pub budget_min_per_second: f64,
    /// What may be retried: `connect`, `reset`, `timeout`, or an upstream status code.
    pub retry_on: Vec<String>,
    /// An upstream `retry-after` longer than this is not waited for on the same member.
    pub max_retry_after_ms: u64,
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: 3,
            backoff_base_ms: 25,
            backoff_cap_ms: 250,
            budget_ratio: 0.2,
            budget_min_per_second: 10.0,
            retry_on: ["connect", "reset", "429", "500", "502", "503", "504"].map(String::from).to_vec(),
            max_retry_after_ms: 10_000,
        }
    }
}

/// Outlier ejection: members that keep failing are taken out, for longer each time.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EjectionConfig {
    /// Consecutive upstream-origin failures that eject a member (0 = never eject).
    pub consecutive_failures: u32,
    /// First ejection; each further one doubles it (with +-10% jitter) up to `max_ms`.
    pub base_ms: u64,
    pub max_ms: u64,
    /// Largest share of a pool's members ejected at once.
    pub max_ejected_percent: u32,
}

impl Default for EjectionConfig {
    fn default() -> Self {
        Self { consecutive_failures: 5, base_ms: 30_000, max_ms: 300_000, max_ejected_percent: 50 }
    }
}

/// Periodic GET of `path` (relative to the member's base URL) with the member's credential.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HealthCheckConfig {
    pub path: String,
    pub interval_ms: u64,
    pub timeout_ms: u64,
    /// Consecutive failed checks that take a member out.
    pub unhealthy_after: u32,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self { path: "/models".into(), interval_ms: 5_000, timeout_ms: 2_000, unhealthy_after: 2 }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct LaneConfig {
    /// Requests that may wait in this lane; one more is refused at once (503).
    pub max_depth: usize,
    /// Longest wait in this lane before the request is refused (503).
    pub max_wait_ms: u64,
    /// Share of freed slots this lane gets while several lanes have waiters.
    pub weight: u32,
}

/// Per-pool admission: slots at the upstreams and the lanes that wait for them. A lane sent is
/// sent whole (a lane has no defaults of its own: the two lanes' differ).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdmissionConfig {
    /// Requests at the pool's upstreams at once. Unset: the sum of the members'
    /// `max_concurrency` when every member has one, otherwise no limit (and no queue).
    pub max_inflight: Option<u32>,
    pub interactive: LaneConfig,
    pub batch: LaneConfig,
    /// Largest fraction of a lane one tenant may hold.
    pub tenant_share: f64,
    /// A stream queued this long gets its headers and an SSE keep-alive comment, and another
    /// comment every `keepalive_ms` while it still waits.
    pub keepalive_ms: u64,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_inflight: None,
            interactive: LaneConfig { max_depth: 256, max_wait_ms: 10_000, weight: 8 },
            batch: LaneConfig { max_depth: 1024, max_wait_ms: 60_000, weight: 1 },
            tenant_share: 0.5,
            keepalive_ms: 1_000,
        }
    }
}

impl AdmissionConfig {
    pub fn lane(&self, priority: Priority) -> &LaneConfig {
        match priority {
            Priority::Interactive => &self.interactive,
            Priority::Batch => &self.batch,
        }
    }

    pub fn weights(&self) -> [u32; Priority::ALL.len()] {
        Priority::ALL.map(|p| self.lane(p).weight)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteTarget {
    pub pool: String,
    /// The model name sent upstream in place of the alias.
    pub model: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteConfig {
    /// The model name clients ask for.
    pub alias: String,
    /// Pools in order of preference: the first serves, the rest are the fallback chain.
    pub chain: Vec<RouteTarget>,
    /// Largest `max_tokens` the model accepts; used to clamp token estimates.
    pub max_output_tokens: Option<u64>,
}

/// The defaults the core applies to every pool policy left out of a snapshot, as JSON: the one
/// place the control plane reads them from.
pub fn defaults_json() -> String {
    serde_json::json!({
        "timeouts": Timeouts::default(),
        "admission": AdmissionConfig::default(),
        "retry": RetryConfig::default(),
        "ejection": EjectionConfig::default(),
        "health_check": HealthCheckConfig::default(),
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the control plane reads: a change here changes every new pool's stored policy.
    #[test]
    fn the_defaults_are_these() {
        let expected = serde_json::json!({
            "timeouts": {"connect_ms": 5000, "first_byte_ms": 120000, "idle_ms": 60000, "total_ms": 600000},
            "admission": {
                "max_inflight": null,
                "interactive": {"max_depth": 256, "max_wait_ms": 10000, "weight": 8},
                "batch": {"max_depth": 1024, "max_wait_ms": 60000, "weight": 1},
                "tenant_share": 0.5,
                "keepalive_ms": 1000,
            },
            "retry": {
                "max_attempts": 3,
                "backoff_base_ms": 25,
                "backoff_cap_ms": 250,
                "budget_ratio": 0.2,
                "budget_min_per_second": 10.0,
                "retry_on": ["connect", "reset", "429", "500", "502", "503", "504"],
                "max_retry_after_ms": 10000,
            },
            "ejection": {"consecutive_failures": 5, "base_ms": 30000, "max_ms": 300000, "max_ejected_percent": 50},
            "health_check": {"path": "/models", "interval_ms": 5000, "timeout_ms": 2000, "unhealthy_after": 2},
        });
        let actual: serde_json::Value = serde_json::from_str(&defaults_json()).unwrap();
        assert_eq!(actual, expected);
    }

    #[test]
    fn a_field_left_out_takes_its_default_and_the_rest_are_kept() {
        let t: Timeouts = serde_json::from_str(r#"{"idle_ms": 7}"#).unwrap();
        assert_eq!((t.connect_ms, t.idle_ms, t.total_ms), (5_000, 7, 600_000));
        let a: AdmissionConfig =
            serde_json::from_str(r#"{"tenant_share": 0.25, "batch": {"max_depth": 1, "max_wait_ms": 2, "weight": 3}}"#)
                .unwrap();
        assert_eq!(a.interactive, AdmissionConfig::default().interactive);
        assert_eq!((a.batch.max_depth, a.tenant_share, a.keepalive_ms), (1, 0.25, 1_000));
        let r: RetryConfig = serde_json::from_str(r#"{"max_attempts": 1}"#).unwrap();
        assert_eq!(r, RetryConfig { max_attempts: 1, ..RetryConfig::default() });
        let e: EjectionConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(e, EjectionConfig::default());
        let h: HealthCheckConfig = serde_json::from_str(r#"{"path": "/health"}"#).unwrap();
        assert_eq!(h, HealthCheckConfig { path: "/health".into(), ..HealthCheckConfig::default() });
    }

    #[test]
    fn a_lane_is_sent_whole_and_unknown_fields_are_refused() {
        assert!(serde_json::from_str::<AdmissionConfig>(r#"{"batch": {"max_depth": 1}}"#).is_err());
        assert!(serde_json::from_str::<RetryConfig>(r#"{"max_attempt": 1}"#).is_err());
        assert!(serde_json::from_str::<Timeouts>(r#"{"idle": 1}"#).is_err());
    }
}
