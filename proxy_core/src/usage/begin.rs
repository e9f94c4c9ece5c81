//! The begin and progress records: what the journal knows of a request in flight, enough to bill
//! it (as `interrupted`) if the gateway dies before the request ends: its prompt, and what a
//! stream had relayed to the client by its latest progress record.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::event::{Outcome, UsageEvent, UsageSource};
use super::json_object::JsonObject;
use crate::config::Price;
use crate::sse::TokenUsage;

/// Content events a stream relays between two progress records by default (`usage.
/// progress_every_events`), at least (and at least one journal commit interval between them): a
/// request found interrupted is billed at most that many events (or one interval's worth, if
/// more) short of what its client received.
pub const PROGRESS_EVERY_EVENTS: u64 = 16;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BeginRecord {
    /// The journal's sequence counter when the request began (not an event's own number).
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
    /// The price's rates, to cost the completion tokens a progress record reports (absent from
    /// records of older releases: those are billed their prompt cost only).
    #[serde(default)]
    pub input_per_mtok: Option<u64>,
    #[serde(default)]
    pub output_per_mtok: Option<u64>,
    /// The rates of the parts (absent from older records: the input or output rate).
    #[serde(default)]
    pub cached_input_per_mtok: Option<u64>,
    #[serde(default)]
    pub cache_write_per_mtok: Option<u64>,
    #[serde(default)]
    pub reasoning_per_mtok: Option<u64>,
    pub client_retry_count: Option<u32>,
    /// Cost attribution (absent from older records: none).
    #[serde(default)]
    pub tags: Option<Arc<str>>,
    #[serde(default)]
    pub end_user: Option<Arc<str>>,
}

/// Room reserved up front for a begin record's JSON (about 400 bytes), so that writing it does
/// not grow its buffer step by step.
const BEGIN_BYTES: usize = 512;

impl BeginRecord {
    /// The record as JSON, the bytes `serde_json::to_vec` makes of it (a test holds them to it),
    /// written field by field as the usage event is (`json_object.rs`). One of these a request.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = JsonObject::with_capacity(BEGIN_BYTES);
        out.number("seq", self.seq);
        out.str("request_id", &self.request_id);
        out.str("key_id", &self.key_id);
        out.str("key_prefix", &self.key_prefix);
        out.str("tenant_id", &self.tenant_id);
        out.str("endpoint", &self.endpoint);
        out.str("model", &self.model);
        out.opt_str("upstream_model", self.upstream_model.as_deref());
        out.opt_str("pool", self.pool.as_deref());
        out.opt_str("upstream", self.upstream.as_deref());
        out.str("priority", &self.priority);
        out.bool("stream", self.stream);
        out.number("prompt_estimate", self.prompt_estimate);
        out.number("started_at", self.started_at);
        out.opt_number("price_version", self.price_version);
        out.number("prompt_cost_micros", self.prompt_cost_micros);
        out.opt_number("input_per_mtok", self.input_per_mtok);
        out.opt_number("output_per_mtok", self.output_per_mtok);
        out.opt_number("cached_input_per_mtok", self.cached_input_per_mtok);
        out.opt_number("cache_write_per_mtok", self.cache_write_per_mtok);
        out.opt_number("reasoning_per_mtok", self.reasoning_per_mtok);
        out.opt_number("client_retry_count", self.client_retry_count);
        out.opt_str("tags", self.tags.as_deref());
        out.opt_str("end_user", self.end_user.as_deref());
        out.finish()
    }

    /// The rates of the price in force when the request began; `None` when it had no price
    /// or the record is of a release that did not write them.
    fn price(&self) -> Option<Price> {
        let flat = Price::flat(self.price_version?, self.input_per_mtok?, self.output_per_mtok?);
        Some(Price {
            cached_input_per_mtok: self.cached_input_per_mtok.unwrap_or(flat.cached_input_per_mtok),
            cache_write_per_mtok: self.cache_write_per_mtok.unwrap_or(flat.cache_write_per_mtok),
            reasoning_per_mtok: self.reasoning_per_mtok.unwrap_or(flat.reasoning_per_mtok),
            ..flat
        })
    }
}

/// Usage counts as an upstream reported them (the parts absent from older records: none).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ReportedUsage {
    pub prompt: u64,
    pub completion: u64,
    pub cached: u64,
    #[serde(default)]
    pub cache_write: u64,
    #[serde(default)]
    pub reasoning: u64,
}

impl From<TokenUsage> for ReportedUsage {
    fn from(u: TokenUsage) -> Self {
        Self {
            prompt: u.prompt,
            completion: u.completion,
            cached: u.cached,
            cache_write: u.cache_write,
            reasoning: u.reasoning,
        }
    }
}

/// What a stream had relayed when this was written.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProgressRecord {
    pub request_id: Arc<str>,
    /// Content events handed to the client's connection before the frame being relayed.
    pub relayed: u64,
    /// Prompt tokens the upstream reported before the end (Anthropic `message_start`).
    pub reported_prompt: Option<u64>,
    /// The upstream's usage, once it arrived.
    pub usage: Option<ReportedUsage>,
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

/// The counts and where they come from, for a request that ended with
/// the gateway: its prompt (as the upstream reported it, else the estimate) and the content
/// events its latest progress record says were relayed, never more (an upstream's count seen
/// mid-stream may be partial, Anthropic's `message_start`, or ahead of what the client got). It
/// is `upstream` when the upstream's own completion count agrees with what was relayed,
/// `progress` when the completion comes from a progress record alone, and `estimated` when no
/// progress record was written (the prompt estimate, nothing relayed that the journal knows of).
/// The prompt's cached parts are the upstream's; completion tokens counted from what was relayed
/// are content, never reasoning.
fn interrupted_usage(begin: &BeginRecord, progress: Option<&ProgressRecord>) -> (TokenUsage, UsageSource) {
    let Some(p) = progress else {
        return (TokenUsage { prompt: begin.prompt_estimate, ..TokenUsage::default() }, UsageSource::Estimated);
    };
    match p.usage {
        Some(u) if u.completion == p.relayed => (
            TokenUsage {
                prompt: u.prompt,
                completion: u.completion,
                cached: u.cached,
                cache_write: u.cache_write,
                reasoning: u.reasoning,
            },
            UsageSource::Upstream,
        ),
        Some(u) => (
            TokenUsage {
                prompt: u.prompt,
                completion: p.relayed,
                cached: u.cached,
                cache_write: u.cache_write,
                reasoning: 0,
            },
            UsageSource::Progress,
        ),
        None => (
            TokenUsage {
                prompt: p.reported_prompt.unwrap_or(begin.prompt_estimate),
                completion: p.relayed,
                ..TokenUsage::default()
            },
            UsageSource::Progress,
        ),
    }
}

/// The usage event that bills a request found unfinished in the journal, as event `seq`.
pub fn interrupted_event(begin: &[u8], progress: Option<&[u8]>, seq: u64) -> Option<Vec<u8>> {
    let b: BeginRecord = serde_json::from_slice(begin).ok()?;
    // A damaged or foreign progress record bills as if there were none.
    let progress: Option<ProgressRecord> = progress.and_then(|p| serde_json::from_slice(p).ok());
    let (usage, source) = interrupted_usage(&b, progress.as_ref());
    let cost_micros = b.price().map_or(b.prompt_cost_micros, |price| price.cost(&usage));
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
        prompt_tokens: usage.prompt,
        completion_tokens: usage.completion,
        cached_tokens: usage.cached,
        cache_write_tokens: usage.cache_write,
        reasoning_tokens: usage.reasoning,
        usage_source: source,
        cost_micros,
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
        tags: b.tags,
        end_user: b.end_user,
    };
    Some(event.to_json())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn begin(price: bool) -> Vec<u8> {
        let record = BeginRecord {
            seq: 7,
            request_id: "r".into(),
            key_id: "k".into(),
            key_prefix: "sk-sg-ab".into(),
            tenant_id: "t".into(),
            endpoint: "chat_completions".into(),
            model: "m".into(),
            upstream_model: None,
            pool: None,
            upstream: None,
            priority: "interactive".into(),
            stream: true,
            prompt_estimate: 10,
            started_at: 1.0,
            price_version: price.then_some(3),
            prompt_cost_micros: if price { 20 } else { 0 },
            input_per_mtok: price.then_some(2_000_000),
            output_per_mtok: price.then_some(3_000_000),
            cached_input_per_mtok: price.then_some(500_000),
            cache_write_per_mtok: None,
            reasoning_per_mtok: price.then_some(9_000_000),
            client_retry_count: None,
            tags: Some(r#"{"team":"search"}"#.into()),
            end_user: None,
        };
        serde_json::to_vec(&record).unwrap()
    }

    fn progress(relayed: u64, usage: Option<ReportedUsage>) -> Vec<u8> {
        let record = ProgressRecord { request_id: "r".into(), relayed, reported_prompt: None, usage };
        serde_json::to_vec(&record).unwrap()
    }

    fn billed(event: Vec<u8>) -> serde_json::Value {
        serde_json::from_slice(&event).unwrap()
    }

    #[test]
    fn without_progress_the_prompt_alone_is_billed() {
        let e = billed(interrupted_event(&begin(true), None, 9).unwrap());
        assert_eq!((e["prompt_tokens"].as_u64(), e["completion_tokens"].as_u64()), (Some(10), Some(0)));
        assert_eq!((e["cost_micros"].as_u64(), e["usage_source"].as_str()), (Some(20), Some("estimated")));
        assert_eq!(e["tags"].as_str(), Some(r#"{"team":"search"}"#), "attribution survives a crash");
        assert_eq!(
            (e["outcome"].as_str(), e["status"].as_u64(), e["seq"].as_u64()),
            (Some("interrupted"), Some(499), Some(9))
        );
    }

    #[test]
    fn progress_bills_the_relayed_events_at_the_price() {
        let e = billed(interrupted_event(&begin(true), Some(&progress(16, None)), 9).unwrap());
        assert_eq!((e["prompt_tokens"].as_u64(), e["completion_tokens"].as_u64()), (Some(10), Some(16)));
        assert_eq!(e["cost_micros"].as_u64(), Some(20 + 48));
        assert_eq!(e["usage_source"].as_str(), Some("progress"));
        // A begin record of an older release has no rates: its prompt cost stands.
        let mut old: serde_json::Value = serde_json::from_slice(&begin(true)).unwrap();
        old.as_object_mut().unwrap().retain(|k, _| !k.ends_with("per_mtok"));
        let e = billed(interrupted_event(&serde_json::to_vec(&old).unwrap(), Some(&progress(16, None)), 9).unwrap());
        assert_eq!((e["completion_tokens"].as_u64(), e["cost_micros"].as_u64()), (Some(16), Some(20)));
    }

    #[test]
    fn the_upstreams_usage_gives_the_prompt_and_never_more_completion_than_relayed() {
        let usage = ReportedUsage { prompt: 12, completion: 30, cached: 4, cache_write: 0, reasoning: 0 };
        let e = billed(interrupted_event(&begin(false), Some(&progress(30, Some(usage))), 9).unwrap());
        assert_eq!(e["usage_source"].as_str(), Some("upstream"));
        let counts = (e["prompt_tokens"].as_u64(), e["completion_tokens"].as_u64(), e["cached_tokens"].as_u64());
        assert_eq!(counts, (Some(12), Some(30), Some(4)));
        // Ahead of the client (the last events not relayed yet), or partial (Anthropic's
        // `message_start` says 1): what was relayed is billed.
        for (relayed, completion) in [(20, 30), (20, 1)] {
            let usage = ReportedUsage { prompt: 12, completion, cached: 0, cache_write: 0, reasoning: 0 };
            let e = billed(interrupted_event(&begin(false), Some(&progress(relayed, Some(usage))), 9).unwrap());
            assert_eq!((e["completion_tokens"].as_u64(), e["usage_source"].as_str()), (Some(20), Some("progress")));
            assert_eq!(e["prompt_tokens"].as_u64(), Some(12));
        }
        // A damaged progress record bills as if there were none.
        let e = billed(interrupted_event(&begin(false), Some(b"{not json"), 9).unwrap());
        assert_eq!(e["completion_tokens"].as_u64(), Some(0));
    }

    #[test]
    fn the_parts_are_billed_at_their_rates_and_relayed_content_is_never_reasoning() {
        // 12 prompt tokens (4 cached), 30 completion (10 reasoning), all relayed: input 2, cached
        // 0.5, cache write the input rate (unset), output 3, reasoning 9 per token.
        let usage = ReportedUsage { prompt: 12, completion: 30, cached: 4, cache_write: 0, reasoning: 10 };
        let e = billed(interrupted_event(&begin(true), Some(&progress(30, Some(usage))), 9).unwrap());
        assert_eq!(e["cost_micros"].as_u64(), Some(8 * 2 + 2 + 20 * 3 + 10 * 9));
        assert_eq!((e["reasoning_tokens"].as_u64(), e["cached_tokens"].as_u64()), (Some(10), Some(4)));
        // Cut short: the 20 relayed are content, at the output rate.
        let e = billed(interrupted_event(&begin(true), Some(&progress(20, Some(usage))), 9).unwrap());
        assert_eq!(e["cost_micros"].as_u64(), Some(8 * 2 + 2 + 20 * 3));
        assert_eq!(e["reasoning_tokens"].as_u64(), Some(0));
        // A progress record of an older release has no parts beyond the cached ones.
        let old =
            br#"{"request_id":"r","relayed":3,"reported_prompt":null,"usage":{"prompt":5,"completion":3,"cached":1}}"#;
        let e = billed(interrupted_event(&begin(true), Some(old), 9).unwrap());
        assert_eq!(e["cost_micros"].as_u64(), Some(4 * 2 + 1 + 3 * 3));
    }

    mod json {
        use proptest::prelude::*;

        use super::super::super::json_object::strategies::{number, text};
        use super::*;

        prop_compose! {
            fn record()(
                ids in prop::array::uniform5(text()), names in prop::array::uniform3(prop::option::of(text())),
                endpoint in "[a-z_]{0,16}|.*", priority in "[a-z]{0,12}|.*", stream in any::<bool>(),
                seq in any::<u64>(), counts in any::<[u64; 2]>(), started_at in number(),
                price_version in prop::option::of(any::<i64>()),
                rates in prop::array::uniform5(prop::option::of(any::<u64>())),
                client_retry_count in prop::option::of(any::<u32>()),
                tags in prop::option::of(text()), end_user in prop::option::of(text()),
            ) -> BeginRecord {
                let [request_id, key_id, key_prefix, tenant_id, model] = ids;
                let [upstream_model, pool, upstream] = names;
                let [input, output, cached_input, cache_write, reasoning] = rates;
                BeginRecord {
                    seq, request_id, key_id, key_prefix, tenant_id, endpoint, model, upstream_model, pool,
                    upstream, priority, stream, prompt_estimate: counts[0], started_at, price_version,
                    prompt_cost_micros: counts[1], input_per_mtok: input, output_per_mtok: output,
                    cached_input_per_mtok: cached_input, cache_write_per_mtok: cache_write,
                    reasoning_per_mtok: reasoning, client_retry_count, tags, end_user,
                }
            }
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(crate::test_cases(512)))]

            /// Byte for byte what serde_json makes of the derived `Serialize`, which the replay
            /// reads back (`Deserialize`).
            #[test]
            fn the_json_is_serde_jsons(record in record()) {
                let expected = serde_json::to_vec(&record).expect("serializes");
                let written = record.to_json();
                prop_assert_eq!(String::from_utf8_lossy(&written), String::from_utf8_lossy(&expected));
            }
        }
    }
}
