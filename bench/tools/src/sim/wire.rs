//! What the simulator writes: OpenAI chat/completion chunks, Anthropic events, Responses API
//! events (`responses.rs`), whole-response bodies and errors. Per-request prefixes are serialized once; a token frame is three copies.

use bytes::{Bytes, BytesMut};
use serde_json::json;

use super::parts::UsageParts;
use super::responses::{ResponseIds, PREAMBLE};
use crate::endpoint::Endpoint;

/// JSON-safe token texts (no escaping needed), cycled through.
const VOCAB: &[&str] = &[
    " the", " gate", " opens", " and", " water", " flows", " through", " a", " narrow", " sluice", " into", " the",
    " mill", " race", " below", ".",
];

pub fn token_text(i: u32) -> &'static str {
    VOCAB[i as usize % VOCAB.len()]
}

pub fn completion_text(n: u32) -> String {
    (0..n).map(token_text).collect()
}

fn concat(parts: &[&[u8]]) -> Bytes {
    let mut out = BytesMut::with_capacity(parts.iter().map(|p| p.len()).sum());
    for p in parts {
        out.extend_from_slice(p);
    }
    out.freeze()
}

/// Frames of one streamed response.
pub struct StreamWire {
    endpoint: Endpoint,
    id: String,
    model_json: String,
    created: u64,
    include_usage: bool,
    parts: UsageParts,
    token_prefix: Bytes,
    token_suffix: Bytes,
    /// The Responses API's events are numbered: built per frame.
    responses: Option<ResponseIds>,
}

impl StreamWire {
    /// `parts`: already within the prompt and the completion.
    pub fn new(
        endpoint: Endpoint,
        id: &str,
        model: &str,
        created: u64,
        include_usage: bool,
        parts: UsageParts,
    ) -> Self {
        let model_json = serde_json::to_string(model).unwrap_or_else(|_| "\"sim\"".into());
        let usage_null = if include_usage { ",\"usage\":null" } else { "" };
        let (prefix, suffix) = match endpoint {
            Endpoint::Messages => (
                "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"".to_string(),
                "\"}}\n\n".to_string(),
            ),
            Endpoint::Completions => (
                format!("data: {{\"id\":\"{id}\",\"object\":\"text_completion\",\"created\":{created},\"model\":{model_json},\"choices\":[{{\"index\":0,\"text\":\""),
                format!("\",\"logprobs\":null,\"finish_reason\":null}}]{usage_null}}}\n\n"),
            ),
            _ => (
                format!("data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{model_json},\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\""),
                format!("\"}},\"finish_reason\":null}}]{usage_null}}}\n\n"),
            ),
        };
        Self {
            endpoint,
            id: id.to_string(),
            model_json,
            created,
            include_usage,
            parts,
            token_prefix: Bytes::from(prefix),
            token_suffix: Bytes::from(suffix),
            responses: (endpoint == Endpoint::Responses).then(|| ResponseIds::new(id, model, created)),
        }
    }

    /// Frames sent before the first token.
    pub fn preamble(&self, prompt_tokens: u64, with_usage: bool) -> Vec<Bytes> {
        if let Some(responses) = &self.responses {
            return responses.preamble();
        }
        let (id, model, created) = (&self.id, &self.model_json, self.created);
        match self.endpoint {
            Endpoint::Messages => {
                let usage = if with_usage {
                    let mut counts = self.parts.anthropic_prompt(prompt_tokens);
                    counts.insert("output_tokens".into(), json!(1));
                    serde_json::Value::Object(counts).to_string()
                } else {
                    "{}".into()
                };
                vec![
                    Bytes::from(format!("event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":{model},\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{usage}}}}}\n\n")),
                    Bytes::from_static(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"),
                    Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n"),
                ]
            }
            Endpoint::Completions => Vec::new(),
            _ => {
                let usage_null = if self.include_usage { ",\"usage\":null" } else { "" };
                vec![Bytes::from(format!("data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"\"}},\"finish_reason\":null}}]{usage_null}}}\n\n"))]
            }
        }
    }

    pub fn token(&self, i: u32) -> Bytes {
        if let Some(responses) = &self.responses {
            return responses.token(i, token_text(i));
        }
        concat(&[&self.token_prefix, token_text(i).as_bytes(), &self.token_suffix])
    }

    /// Frames after the last token: finish reason, usage (when asked and not suppressed), end.
    pub fn epilogue(&self, prompt_tokens: u64, completion: u32, finish: &str, with_usage: bool) -> Vec<Bytes> {
        if let Some(responses) = &self.responses {
            let usage = with_usage.then(|| self.parts.responses_usage(prompt_tokens, u64::from(completion)));
            return responses.epilogue(completion, &completion_text(completion), finish, usage);
        }
        let (id, model, created) = (&self.id, &self.model_json, self.created);
        match self.endpoint {
            Endpoint::Messages => {
                let stop_reason = if finish == "length" { "max_tokens" } else { "end_turn" };
                let usage =
                    if with_usage { format!(",\"usage\":{{\"output_tokens\":{completion}}}") } else { String::new() };
                vec![
                    Bytes::from_static(b"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"),
                    Bytes::from(format!("event: message_delta\ndata: {{\"type\":\"message_delta\",\"delta\":{{\"stop_reason\":\"{stop_reason}\",\"stop_sequence\":null}}{usage}}}\n\n")),
                    Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
                ]
            }
            _ => {
                let object =
                    if self.endpoint == Endpoint::Completions { "text_completion" } else { "chat.completion.chunk" };
                let choice = if self.endpoint == Endpoint::Completions {
                    format!("{{\"index\":0,\"text\":\"\",\"logprobs\":null,\"finish_reason\":\"{finish}\"}}")
                } else {
                    format!("{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"{finish}\"}}")
                };
                let usage_null = if self.include_usage { ",\"usage\":null" } else { "" };
                let mut frames = vec![Bytes::from(format!(
                    "data: {{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":{created},\"model\":{model},\"choices\":[{choice}]{usage_null}}}\n\n"
                ))];
                if self.include_usage && with_usage {
                    let usage = self.parts.openai_usage(prompt_tokens, u64::from(completion));
                    frames.push(Bytes::from(format!(
                        "data: {{\"id\":\"{id}\",\"object\":\"{object}\",\"created\":{created},\"model\":{model},\"choices\":[],\"usage\":{usage}}}\n\n"
                    )));
                }
                frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
                frames
            }
        }
    }

    pub fn done(&self) -> Bytes {
        if let Some(responses) = &self.responses {
            return responses.end(PREAMBLE, "stop", None, None);
        }
        match self.endpoint {
            Endpoint::Messages => Bytes::from_static(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
            _ => Bytes::from_static(b"data: [DONE]\n\n"),
        }
    }

    pub fn malformed(&self) -> Bytes {
        Bytes::from_static(b"data: {\"choices\":[{\"delta\":{\"content\":\"unterminated\n\n")
    }
}

/// A whole (non-streaming) answer.
pub struct Answer<'a> {
    pub endpoint: Endpoint,
    pub id: &'a str,
    pub model: &'a str,
    pub created: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u32,
    pub finish: &'a str,
    pub with_usage: bool,
    /// Already within the prompt and the completion.
    pub parts: UsageParts,
}

impl Answer<'_> {
    pub fn body(&self) -> Vec<u8> {
        let (id, model, created, finish) = (self.id, self.model, self.created, self.finish);
        let (prompt, completion) = (self.prompt_tokens, self.completion_tokens);
        let text = completion_text(completion);
        let openai_usage = self.parts.openai_usage(prompt, u64::from(completion));
        let mut body = match self.endpoint {
            Endpoint::Messages => {
                let mut usage = self.parts.anthropic_prompt(prompt);
                usage.insert("output_tokens".into(), json!(completion));
                json!({
                    "id": id, "type": "message", "role": "assistant", "model": model,
                    "content": [{"type": "text", "text": text}],
                    "stop_reason": if finish == "length" { "max_tokens" } else { "end_turn" },
                    "stop_sequence": null,
                    "usage": usage,
                })
            }
            Endpoint::Responses => {
                let usage = self.parts.responses_usage(prompt, u64::from(completion));
                ResponseIds::new(id, model, created).object(Some(finish), Some(text.as_str()), Some(usage))
            }
            Endpoint::Completions => json!({
                "id": id, "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": null, "finish_reason": finish}],
                "usage": openai_usage,
            }),
            _ => json!({
                "id": id, "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": openai_usage,
            }),
        };
        if !self.with_usage {
            if let Some(map) = body.as_object_mut() {
                map.remove("usage");
            }
        }
        serde_json::to_vec(&body).unwrap_or_default()
    }
}

pub fn embeddings_body(model: &str, inputs: usize, dims: usize, prompt: u64, seed: u64) -> Vec<u8> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let data: Vec<serde_json::Value> = (0..inputs)
        .map(|i| {
            let v: Vec<f32> = (0..dims).map(|_| rng.f32() * 2.0 - 1.0).collect();
            json!({"object": "embedding", "index": i, "embedding": v})
        })
        .collect();
    serde_json::to_vec(&json!({
        "object": "list", "data": data, "model": model,
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
    }))
    .unwrap_or_default()
}

pub fn error_body(endpoint: Endpoint, status: u16, message: &str) -> Vec<u8> {
    let (openai_type, anthropic_type) = match status {
        429 => ("rate_limit_error", "rate_limit_error"),
        400..=499 => ("invalid_request_error", "invalid_request_error"),
        503 | 529 => ("overloaded_error", "overloaded_error"),
        _ => ("server_error", "api_error"),
    };
    let body = if endpoint == Endpoint::Messages {
        json!({"type": "error", "error": {"type": anthropic_type, "message": message}})
    } else {
        json!({"error": {"message": message, "type": openai_type, "param": null, "code": null}})
    };
    serde_json::to_vec(&body).unwrap_or_default()
}
