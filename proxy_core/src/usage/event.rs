//! The usage event: one per request that reached routing, whatever its end.

use std::sync::Arc;

use serde::Serialize;

use super::json_object::JsonObject;

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

impl Outcome {
    /// The name serde gives it (a test holds the two together).
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Complete => "complete",
            Outcome::ClientCancelled => "client_cancelled",
            Outcome::UpstreamError => "upstream_error",
            Outcome::Timeout => "timeout",
            Outcome::Interrupted => "interrupted",
        }
    }
}

impl UsageSource {
    /// The name serde gives it (a test holds the two together).
    pub fn as_str(self) -> &'static str {
        match self {
            UsageSource::Upstream => "upstream",
            UsageSource::Estimated => "estimated",
            UsageSource::Progress => "progress",
        }
    }
}

/// Room reserved up front for the event's JSON (about 700 bytes), so that writing it does not
/// grow its buffer step by step.
const EVENT_BYTES: usize = 1024;

impl UsageEvent {
    /// The event as JSON, the bytes `serde_json::to_vec` makes of it (a test holds them to it),
    /// at a third of the cost: the keys are written as they are, not escaped byte by byte, and a
    /// string is copied whole unless it holds a byte JSON escapes. One of these a request.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = JsonObject::with_capacity(EVENT_BYTES);
        out.number("seq", self.seq);
        out.str("request_id", &self.request_id);
        out.str("key_id", &self.key_id);
        out.str("key_prefix", &self.key_prefix);
        out.str("tenant_id", &self.tenant_id);
        out.str("endpoint", self.endpoint);
        out.str("model", &self.model);
        out.opt_str("upstream_model", self.upstream_model.as_deref());
        out.opt_str("pool", self.pool.as_deref());
        out.opt_str("upstream", self.upstream.as_deref());
        out.str("priority", self.priority);
        out.bool("stream", self.stream);
        out.number("status", self.status);
        out.str("outcome", self.outcome.as_str());
        out.opt_str("error_code", self.error_code);
        out.number("prompt_tokens", self.prompt_tokens);
        out.number("completion_tokens", self.completion_tokens);
        out.number("cached_tokens", self.cached_tokens);
        out.number("cache_write_tokens", self.cache_write_tokens);
        out.number("reasoning_tokens", self.reasoning_tokens);
        out.str("usage_source", self.usage_source.as_str());
        out.number("cost_micros", self.cost_micros);
        out.opt_number("price_version", self.price_version);
        out.number("queue_wait_ms", self.queue_wait_ms);
        out.opt_number("connect_ms", self.connect_ms);
        out.opt_number("ttft_ms", self.ttft_ms);
        out.opt_number("tpot_ms", self.tpot_ms);
        out.number("duration_ms", self.duration_ms);
        out.number("started_at", self.started_at);
        out.number("attempts", self.attempts);
        out.bool("fallback", self.fallback);
        out.opt_number("client_retry_count", self.client_retry_count);
        out.opt_str("tags", self.tags.as_deref());
        out.opt_str("end_user", self.end_user.as_deref());
        out.finish()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::super::json_object::strategies::{number, text};
    use super::*;

    prop_compose! {
        fn strings()(
            request_id in text(), key_id in text(), key_prefix in text(), tenant_id in text(),
            model in text(), upstream_model in prop::option::of(text()), pool in prop::option::of(text()),
            upstream in prop::option::of(text()), tags in prop::option::of(text()),
            end_user in prop::option::of(text()),
        ) -> [Option<Arc<str>>; 10] {
            [Some(request_id), Some(key_id), Some(key_prefix), Some(tenant_id), Some(model), upstream_model,
             pool, upstream, tags, end_user]
        }
    }

    prop_compose! {
        fn event()(
            s in strings(),
            seq in any::<u64>(), status in any::<u16>(), stream in any::<bool>(), fallback in any::<bool>(),
            outcome in prop::sample::select(vec![Outcome::Complete, Outcome::ClientCancelled,
                Outcome::UpstreamError, Outcome::Timeout, Outcome::Interrupted]),
            usage_source in prop::sample::select(vec![UsageSource::Upstream, UsageSource::Estimated,
                UsageSource::Progress]),
            error_code in prop::option::of(prop::sample::select(vec!["upstream_timeout", "a \"quoted\" code"])),
            tokens in any::<[u64; 6]>(), price_version in prop::option::of(any::<i64>()),
            times in prop::array::uniform6(number()), optional in prop::array::uniform3(any::<bool>()),
            attempts in any::<u32>(), client_retry_count in prop::option::of(any::<u32>()),
        ) -> UsageEvent {
            let [request_id, key_id, key_prefix, tenant_id, model, upstream_model, pool, upstream, tags, end_user] = s;
            let some = |s: Option<Arc<str>>| s.unwrap_or_else(|| Arc::from(""));
            UsageEvent {
                seq, request_id: some(request_id), key_id: some(key_id), key_prefix: some(key_prefix),
                tenant_id: some(tenant_id), endpoint: "chat_completions", model: some(model), upstream_model,
                pool, upstream, priority: "interactive", stream, status, outcome, error_code,
                prompt_tokens: tokens[0], completion_tokens: tokens[1], cached_tokens: tokens[2],
                cache_write_tokens: tokens[3], reasoning_tokens: tokens[4], usage_source,
                cost_micros: tokens[5], price_version, queue_wait_ms: times[0],
                connect_ms: optional[0].then_some(times[1]), ttft_ms: optional[1].then_some(times[2]),
                tpot_ms: optional[2].then_some(times[3]), duration_ms: times[4], started_at: times[5],
                attempts, fallback, client_retry_count, tags, end_user,
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases(512)))]

        /// Byte for byte what serde_json makes of the derived `Serialize`, the event's contract
        /// with the journal and the drainer.
        #[test]
        fn the_json_is_serde_jsons(event in event()) {
            let expected = serde_json::to_vec(&event).expect("serializes");
            let written = event.to_json();
            prop_assert_eq!(String::from_utf8_lossy(&written), String::from_utf8_lossy(&expected));
        }
    }
}
