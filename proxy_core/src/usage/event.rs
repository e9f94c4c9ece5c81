//! The usage event: one per request that reached routing, whatever its end.

use std::sync::Arc;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The response was relayed to its end (whatever its status).
    Complete,
    /// The client went away first; the upstream request was cancelled.
    ClientCancelled,
    /// The upstream failed: refused, reset, cut the stream, or sent something unusable.
    UpstreamError,
    /// An upstream timeout (connect, first byte, idle, total) or the client's deadline.
    Timeout,
    /// The gateway stopped (crash, kill) while the request was in flight; found in the journal
    /// at the next start. Billed as its prompt estimate, flagged estimated.
    Interrupted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UsageSource {
    /// Token counts reported by the upstream.
    Upstream,
    /// Counted or estimated by the gateway because the upstream reported none.
    Estimated,
    /// An interrupted request's completion, counted from the content events its stream's latest
    /// progress record says reached the client (short of what it received by at most the bound
    /// in ARCHITECTURE.md, "Billing of abnormal ends").
    Progress,
}

#[derive(Debug, Clone, Serialize)]
pub struct UsageEvent {
    /// Position in the usage journal; assigned when the event is recorded.
    pub seq: u64,
    pub request_id: Arc<str>,
    pub key_id: Arc<str>,
    pub key_prefix: Arc<str>,
    pub tenant_id: Arc<str>,
    pub endpoint: &'static str,
    /// The alias the client asked for.
    pub model: Arc<str>,
    pub upstream_model: Option<Arc<str>>,
    pub pool: Option<Arc<str>>,
    pub upstream: Option<Arc<str>>,
    pub priority: &'static str,
    pub stream: bool,
    /// HTTP status the client saw (200 even for a stream that later failed).
    pub status: u16,
    pub outcome: Outcome,
    pub error_code: Option<&'static str>,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of the prompt: read from the provider's cache.
    pub cached_tokens: u64,
    /// Of the prompt: written to the provider's cache.
    pub cache_write_tokens: u64,
    /// Of the completion: spent on reasoning.
    pub reasoning_tokens: u64,
    pub usage_source: UsageSource,
    /// Cost in micro-units at the price in force (0 when the model has no price).
    pub cost_micros: u64,
    pub price_version: Option<i64>,
    pub queue_wait_ms: f64,
    pub connect_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub duration_ms: f64,
    /// Unix seconds at arrival.
    pub started_at: f64,
    pub attempts: u32,
    pub fallback: bool,
    /// `x-stainless-retry-count` sent by the official SDKs.
    pub client_retry_count: Option<u32>,
    /// The request's `x-sluicegate-tags`, as the text of a JSON object (names in order).
    pub tags: Option<Arc<str>>,
    /// The end user the request named (OpenAI `user`, Anthropic `metadata.user_id`).
    pub end_user: Option<Arc<str>>,
}
