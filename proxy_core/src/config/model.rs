//! The configuration snapshot as the control plane sends it: plain data, deserialized from JSON.
//! Unknown fields are refused so that a typo in the control plane is a NACK, not a silent default.

use serde::Deserialize;

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
}

/// Keys added, replaced (same id) or removed (by id), applied on top of the snapshot in force.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyDelta {
    #[serde(default)]
    pub upsert: Vec<KeyConfig>,
    #[serde(default)]
    pub remove: Vec<String>,
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
    Openai,
    Anthropic,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
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
    /// Decrypted upstream credential; sent as `Authorization: Bearer` (openai) or `x-api-key`.
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
}

fn default_weight() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Timeouts {
    #[serde(default = "default_connect_ms")]
    pub connect_ms: u64,
    /// Until response headers arrive, and for streams until the first event after them.
    #[serde(default = "default_first_byte_ms")]
    pub first_byte_ms: u64,
    /// Longest silence between two chunks of a response body.
    #[serde(default = "default_idle_ms")]
    pub idle_ms: u64,
    /// Overall deadline of a non-streaming call.
    #[serde(default = "default_total_ms")]
    pub total_ms: u64,
}

fn default_connect_ms() -> u64 {
    5_000
}
fn default_first_byte_ms() -> u64 {
    120_000
}
fn default_idle_ms() -> u64 {
    60_000
}
fn default_total_ms() -> u64 {
    600_000
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect_ms: default_connect_ms(),
            first_byte_ms: default_first_byte_ms(),
            idle_ms: default_idle_ms(),
            total_ms: default_total_ms(),
        }
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
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Attempts per request, the first included (1 = no retries).
    #[serde(default = "RetryConfig::default_max_attempts")]
    pub max_attempts: u32,
    /// Full-jitter exponential backoff: sleep rand(0, min(cap, base * 2^retry)).
    #[serde(default = "RetryConfig::default_backoff_base_ms")]
    pub backoff_base_ms: u64,
    #[serde(default = "RetryConfig::default_backoff_cap_ms")]
    pub backoff_cap_ms: u64,
    /// Retries allowed per request over the budget window (Envoy and Linkerd use 0.2)...
    #[serde(default = "RetryConfig::default_budget_ratio")]
    pub budget_ratio: f64,
    /// ...plus this many retries per second whatever the traffic.
    #[serde(default = "RetryConfig::default_budget_min_per_second")]
    pub budget_min_per_second: f64,
    /// What may be retried: `connect`, `reset`, `timeout`, or an upstream status code.
    #[serde(default = "RetryConfig::default_retry_on")]
    pub retry_on: Vec<String>,
    /// An upstream `retry-after` longer than this is not waited for on the same member.
    #[serde(default = "RetryConfig::default_max_retry_after_ms")]
    pub max_retry_after_ms: u64,
}

impl RetryConfig {
    fn default_max_attempts() -> u32 {
        3
    }
    fn default_backoff_base_ms() -> u64 {
        25
    }
    fn default_backoff_cap_ms() -> u64 {
        250
    }
    fn default_budget_ratio() -> f64 {
        0.2
    }
    fn default_budget_min_per_second() -> f64 {
        10.0
    }
    fn default_retry_on() -> Vec<String> {
        ["connect", "reset", "429", "500", "502", "503", "504"].map(String::from).to_vec()
    }
    fn default_max_retry_after_ms() -> u64 {
        10_000
    }
}

impl Default for RetryConfig {
    fn default() -> Self {
        Self {
            max_attempts: Self::default_max_attempts(),
            backoff_base_ms: Self::default_backoff_base_ms(),
            backoff_cap_ms: Self::default_backoff_cap_ms(),
            budget_ratio: Self::default_budget_ratio(),
            budget_min_per_second: Self::default_budget_min_per_second(),
            retry_on: Self::default_retry_on(),
            max_retry_after_ms: Self::default_max_retry_after_ms(),
        }
    }
}

/// Outlier ejection: members that keep failing are taken out, for longer each time.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct EjectionConfig {
    /// Consecutive upstream-origin failures that eject a member (0 = never eject).
    #[serde(default = "EjectionConfig::default_consecutive_failures")]
    pub consecutive_failures: u32,
    /// First ejection; each further one doubles it (with +-10% jitter) up to `max_ms`.
    #[serde(default = "EjectionConfig::default_base_ms")]
    pub base_ms: u64,
    #[serde(default = "EjectionConfig::default_max_ms")]
    pub max_ms: u64,
    /// Largest share of a pool's members ejected at once.
    #[serde(default = "EjectionConfig::default_max_ejected_percent")]
    pub max_ejected_percent: u32,
}

impl EjectionConfig {
    fn default_consecutive_failures() -> u32 {
        5
    }
    fn default_base_ms() -> u64 {
        30_000
    }
    fn default_max_ms() -> u64 {
        300_000
    }
    fn default_max_ejected_percent() -> u32 {
        50
    }
}

impl Default for EjectionConfig {
    fn default() -> Self {
        Self {
            consecutive_failures: Self::default_consecutive_failures(),
            base_ms: Self::default_base_ms(),
            max_ms: Self::default_max_ms(),
            max_ejected_percent: Self::default_max_ejected_percent(),
        }
    }
}

/// Periodic GET of `path` (relative to the member's base URL) with the member's credential.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct HealthCheckConfig {
    #[serde(default = "HealthCheckConfig::default_path")]
    pub path: String,
    #[serde(default = "HealthCheckConfig::default_interval_ms")]
    pub interval_ms: u64,
    #[serde(default = "HealthCheckConfig::default_timeout_ms")]
    pub timeout_ms: u64,
    /// Consecutive failed checks that take a member out.
    #[serde(default = "HealthCheckConfig::default_unhealthy_after")]
    pub unhealthy_after: u32,
}

impl Default for HealthCheckConfig {
    fn default() -> Self {
        Self {
            path: Self::default_path(),
            interval_ms: Self::default_interval_ms(),
            timeout_ms: Self::default_timeout_ms(),
            unhealthy_after: Self::default_unhealthy_after(),
        }
    }
}

impl HealthCheckConfig {
    fn default_path() -> String {
        "/models".into()
    }
    fn default_interval_ms() -> u64 {
        5_000
    }
    fn default_timeout_ms() -> u64 {
        2_000
    }
    fn default_unhealthy_after() -> u32 {
        2
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

/// Per-pool admission: slots at the upstreams and the lanes that wait for them.
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AdmissionConfig {
    /// Requests at the pool's upstreams at once. Unset: the sum of the members'
    /// `max_concurrency` when every member has one, otherwise no limit (and no queue).
    pub max_inflight: Option<u32>,
    #[serde(default = "LaneConfig::interactive")]
    pub interactive: LaneConfig,
    #[serde(default = "LaneConfig::batch")]
    pub batch: LaneConfig,
    /// Largest fraction of a lane one tenant may hold.
    #[serde(default = "default_tenant_share")]
    pub tenant_share: f64,
    /// A stream queued this long gets its headers and an SSE keep-alive comment, and another
    /// comment every `keepalive_ms` while it still waits.
    #[serde(default = "default_keepalive_ms")]
    pub keepalive_ms: u64,
}

impl LaneConfig {
    pub fn interactive() -> Self {
        Self { max_depth: 256, max_wait_ms: 10_000, weight: 8 }
    }

    pub fn batch() -> Self {
        Self { max_depth: 1024, max_wait_ms: 60_000, weight: 1 }
    }
}

fn default_tenant_share() -> f64 {
    0.5
}

fn default_keepalive_ms() -> u64 {
    1_000
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        Self {
            max_inflight: None,
            interactive: LaneConfig::interactive(),
            batch: LaneConfig::batch(),
            tenant_share: default_tenant_share(),
            keepalive_ms: default_keepalive_ms(),
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
