//! The begin record: what the journal knows of a request that reached its first upstream, enough
//! to bill it (as `interrupted`) if the gateway dies before the request ends.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::event::{Outcome, UsageEvent, UsageSource};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BeginRecord {
    pub seq: u64,
    pub request_id: Arc<str>,
    pub key_id: Arc<str>,
    pub key_prefix: Arc<str>,
    pub tenant_id: Arc<str>,
    pub endpoint: String,
    pub model: Arc<str>,
    pub upstream_model: Option<Arc<str>>,
    pub pool: Option<Arc<str>>,
    pub upstream: Option<Arc<str>>,
    pub priority: String,
    pub stream: bool,
    pub prompt_estimate: u64,
    pub started_at: f64,
    pub price_version: Option<i64>,
    /// Cost of the prompt estimate at that price.
    pub prompt_cost_micros: u64,
    pub client_retry_count: Option<u32>,
}

fn leak(s: &str) -> &'static str {
    // Endpoint and priority names are a small fixed set; map back to the static names.
    match s {
        "chat_completions" => "chat_completions",
        "completions" => "completions",
        "embeddings" => "embeddings",
        "messages" => "messages",
        "models" => "models",
        "batch" => "batch",
        _ => "interactive",
    }
}

/// The usage event that bills a request found unfinished in the journal, as event `seq`.
pub fn interrupted_event(begin: &[u8], seq: u64) -> Option<Vec<u8>> {
    let b: BeginRecord = serde_json::from_slice(begin).ok()?;
    let event = UsageEvent {
        seq,
        request_id: b.request_id,
        key_id: b.key_id,
        key_prefix: b.key_prefix,
        tenant_id: b.tenant_id,
        endpoint: leak(&b.endpoint),
        model: b.model,
        upstream_model: b.upstream_model,
        pool: b.pool,
        upstream: b.upstream,
        priority: leak(&b.priority),
        stream: b.stream,
        status: 499,
        outcome: Outcome::Interrupted,
        error_code: Some("gateway_restarted"),
        prompt_tokens: b.prompt_estimate,
        completion_tokens: 0,
        cached_tokens: 0,
        usage_source: UsageSource::Estimated,
        cost_micros: b.prompt_cost_micros,
        price_version: b.price_version,
        queue_wait_ms: 0.0,
        connect_ms: None,
        ttft_ms: None,
        tpot_ms: None,
        duration_ms: 0.0,
        started_at: b.started_at,
        attempts: 1,
        fallback: false,
        client_retry_count: b.client_retry_count,
    };
    serde_json::to_vec(&event).ok()
}
