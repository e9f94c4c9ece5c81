//! What the simulator writes: OpenAI chat/completion chunks, Anthropic events, Responses API
//! events (`responses.rs`), whole-response bodies and errors, for text and for a tool call
//! (`content.rs`). Per-request prefixes are serialized once; a vocabulary token frame is three
//! copies.

use bytes::{Bytes, BytesMut};
use serde_json::json;

use super::content::{anthropic_stop, Content};
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

/// A JSON string's inside: `text` escaped, without the quotes.
fn escaped(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_string()
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
    content: Content,
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
        content: Content,
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
            content,
        }
    }

    /// A chat chunk with this `delta` (a JSON object) and no finish reason.
    fn chat_chunk(&self, delta: &str) -> Bytes {
        let (id, model, created) = (&self.id, &self.model_json, self.created);
        let usage_null = if self.include_usage { ",\"usage\":null" } else { "" };
        Bytes::from(format!("data: {{\"id\":\"{id}\",\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{model},\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":null}}]{usage_null}}}\n\n"))
    }

    /// Frames sent before the first token.
    pub fn preamble(&self, prompt_tokens: u64, with_usage: bool) -> Vec<Bytes> {
        if let Some(responses) = &self.responses {
            return responses.preamble();
        }
        let (id, model) = (&self.id, &self.model_json);
        match self.endpoint {
            Endpoint::Messages => {
                let usage = if with_usage {
                    let mut counts = self.parts.anthropic_prompt(prompt_tokens);
                    counts.insert("output_tokens".into(), json!(1));
                    serde_json::Value::Object(counts).to_string()
                } else {
                    "{}".into()
                };
                let block = match &self.content {
                    Content::Call { id: call_id, name, .. } => {
                        json!({"type": "tool_use", "id": call_id, "name": name, "input": {}}).to_string()
                    }
                    _ => "{\"type\":\"text\",\"text\":\"\"}".to_string(),
                };
                vec![
                    Bytes::from(format!("event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"{id}\",\"type\":\"message\",\"role\":\"assistant\",\"model\":{model},\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{usage}}}}}\n\n")),
                    Bytes::from(format!("event: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":0,\"content_block\":{block}}}\n\n")),
                    Bytes::from_static(b"event: ping\ndata: {\"type\": \"ping\"}\n\n"),
                ]
            }
            Endpoint::Completions => Vec::new(),
            // A call's message has no text: OpenAI opens it with `content: null`.
            _ => vec![self.chat_chunk(match self.content {
                Content::Call { .. } => "{\"role\":\"assistant\",\"content\":null}",
                _ => "{\"role\":\"assistant\",\"content\":\"\"}",
            })],
        }
    }

    pub fn token(&self, i: u32) -> Bytes {
        let piece = self.content.piece(i);
        if let Some(responses) = &self.responses {
            return responses.token(i, piece);
        }
        match (&self.content, self.endpoint) {
            // The vocabulary needs no escaping.
            (Content::Vocab, _) => concat(&[&self.token_prefix, piece.as_bytes(), &self.token_suffix]),
            (Content::Call { id, name, opening, .. }, Endpoint::ChatCompletions) => {
                let call = if i < *opening {
                    json!({"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}})
                } else {
                    json!({"index": 0, "function": {"arguments": piece}})
                };
                self.chat_chunk(&json!({"tool_calls": [call]}).to_string())
            }
            (Content::Call { .. }, Endpoint::Messages) => {
                let delta = json!({"type": "input_json_delta", "partial_json": piece});
                Bytes::from(format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{delta}}}\n\n"))
            }
            _ => concat(&[&self.token_prefix, escaped(piece).as_bytes(), &self.token_suffix]),
        }
    }

    /// Frames after the last token: finish reason, usage (when asked and not suppressed), end.
    pub fn epilogue(&self, prompt_tokens: u64, completion: u32, finish: &str, with_usage: bool) -> Vec<Bytes> {
        if let Some(responses) = &self.responses {
            let usage = with_usage.then(|| self.parts.responses_usage(prompt_tokens, u64::from(completion)));
            return responses.epilogue(completion, &self.content.sent(completion), finish, usage);
        }
        let (id, model, created) = (&self.id, &self.model_json, self.created);
        match self.endpoint {
            Endpoint::Messages => {
                let stop_reason = anthropic_stop(finish);
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
    pub content: &'a Content,
}

impl Answer<'_> {
    pub fn body(&self) -> Vec<u8> {
        let (id, model, created, finish) = (self.id, self.model, self.created, self.finish);
        let (prompt, completion) = (self.prompt_tokens, self.completion_tokens);
        // A call's arguments, or the text: what the `completion` tokens carried.
        let text = self.content.sent(completion);
        let openai_usage = self.parts.openai_usage(prompt, u64::from(completion));
        let mut body = match self.endpoint {
            Endpoint::Messages => {
                let mut usage = self.parts.anthropic_prompt(prompt);
                usage.insert("output_tokens".into(), json!(completion));
                let block = match self.content {
                    // Arguments cut at the output cap are no object: the input is left empty.
                    Content::Call { id: call_id, name, .. } => {
                        let input = serde_json::from_str::<serde_json::Value>(&text)
                            .ok()
                            .filter(serde_json::Value::is_object)
                            .unwrap_or_else(|| json!({}));
                        json!({"type": "tool_use", "id": call_id, "name": name, "input": input})
                    }
                    _ => json!({"type": "text", "text": text}),
                };
                json!({
                    "id": id, "type": "message", "role": "assistant", "model": model,
                    "content": [block],
                    "stop_reason": anthropic_stop(finish),
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
            _ => {
                let message = match self.content {
                    Content::Call { id: call_id, name, .. } => json!({
                        "role": "assistant", "content": null,
                        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}],
                    }),
                    _ => json!({"role": "assistant", "content": text}),
                };
                json!({
                    "id": id, "object": "chat.completion", "created": created, "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": openai_usage,
                })
            }
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

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::sim::tools::{Reply, ToolCall};

    const ARGUMENTS: &str = r#"{"city":"sim","days":1,"unit":"celsius"}"#;

    fn call(endpoint: Endpoint) -> Content {
        let reply = Reply::Call(ToolCall { name: "get_weather".into(), arguments: ARGUMENTS.into() });
        Content::new(&reply, endpoint, 7)
    }

    /// Every frame of a whole stream of `content`, parsed: (event name, data) per event.
    fn stream(endpoint: Endpoint, content: Content) -> Vec<(Option<String>, Value)> {
        let tokens = content.fixed_tokens().unwrap_or(3);
        let finish = content.finish();
        let wire = StreamWire::new(endpoint, "id_1", "m", 1, true, UsageParts::default(), content);
        let mut frames = wire.preamble(10, true);
        frames.extend((0..tokens).map(|i| wire.token(i)));
        frames.extend(wire.epilogue(10, tokens, finish, true));
        let text: String = frames.iter().map(|f| std::str::from_utf8(f).unwrap()).collect();
        text.split("\n\n")
            .filter(|event| !event.is_empty() && !event.ends_with("[DONE]"))
            .map(|event| {
                let name = event.lines().find_map(|l| l.strip_prefix("event: ")).map(str::to_string);
                let data = event.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                (name, serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")))
            })
            .collect()
    }

    fn body(endpoint: Endpoint, content: &Content, completion: u32, finish: &str) -> Value {
        let answer = Answer {
            endpoint,
            id: "id_1",
            model: "m",
            created: 1,
            prompt_tokens: 10,
            completion_tokens: completion,
            finish,
            with_usage: true,
            parts: UsageParts::default(),
            content,
        };
        serde_json::from_slice(&answer.body()).unwrap()
    }

    #[test]
    fn openai_streams_a_call_in_pieces() {
        let events = stream(Endpoint::ChatCompletions, call(Endpoint::ChatCompletions));
        let deltas: Vec<&Value> = events.iter().filter_map(|(_, e)| e.pointer("/choices/0/delta")).collect();
        assert_eq!(deltas[0], &json!({"role": "assistant", "content": null}));
        assert_eq!(
            deltas[1]["tool_calls"],
            json!([{"index": 0, "id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": ""}}])
        );
        // Then the pieces, then the finish chunk's empty delta.
        let (fragments, last) = (&deltas[2..deltas.len() - 1], deltas[deltas.len() - 1]);
        assert_eq!(last, &json!({}));
        let pieces: Vec<&str> = fragments
            .iter()
            .filter_map(|d| d.pointer("/tool_calls/0/function/arguments").and_then(Value::as_str))
            .collect();
        assert!(pieces.len() >= 5 && pieces.iter().all(|p| p.len() <= 8), "{pieces:?}");
        assert_eq!(pieces.len(), fragments.len());
        assert!(fragments.iter().all(|d| d["tool_calls"][0]["index"] == 0 && d["tool_calls"][0].get("id").is_none()));
        let arguments: Value = serde_json::from_str(&pieces.concat()).unwrap();
        assert_eq!(arguments, json!({"city": "sim", "days": 1, "unit": "celsius"}));
        let finish = &events[events.len() - 2].1;
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        // The opening chunk and each piece are tokens: the usage counts them all.
        let usage = &events[events.len() - 1].1["usage"];
        assert_eq!(usage["completion_tokens"].as_u64(), Some(pieces.len() as u64 + 1));
    }

    #[test]
    fn anthropic_streams_a_call_in_pieces() {
        let events = stream(Endpoint::Messages, call(Endpoint::Messages));
        let names: Vec<&str> = events.iter().filter_map(|(name, _)| name.as_deref()).collect();
        assert_eq!(&names[..3], ["message_start", "content_block_start", "ping"]);
        assert_eq!(&names[names.len() - 3..], ["content_block_stop", "message_delta", "message_stop"]);
        assert_eq!(
            events[1].1["content_block"],
            json!({"type": "tool_use", "id": "toolu_7", "name": "get_weather", "input": {}})
        );
        let deltas: Vec<&Value> =
            events.iter().filter(|(name, _)| name.as_deref() == Some("content_block_delta")).map(|(_, e)| e).collect();
        assert!(deltas.iter().all(|d| d["delta"]["type"] == "input_json_delta" && d["index"] == 0));
        let json: String = deltas.iter().filter_map(|d| d["delta"]["partial_json"].as_str()).collect();
        assert_eq!(serde_json::from_str::<Value>(&json).unwrap(), json!({"city": "sim", "days": 1, "unit": "celsius"}));
        let message_delta = &events[events.len() - 2].1;
        assert_eq!(message_delta["delta"]["stop_reason"], "tool_use");
        assert_eq!(message_delta["usage"]["output_tokens"].as_u64(), Some(deltas.len() as u64));
    }

    #[test]
    fn whole_calls_in_each_vocabulary() {
        let content = call(Endpoint::ChatCompletions);
        let tokens = content.fixed_tokens().unwrap();
        let openai = body(Endpoint::ChatCompletions, &content, tokens, "tool_calls");
        assert_eq!(openai["choices"][0]["finish_reason"], "tool_calls");
        let message = &openai["choices"][0]["message"];
        assert_eq!((message["role"].as_str(), message["content"].is_null()), (Some("assistant"), true));
        let made = &message["tool_calls"][0];
        assert_eq!((made["id"].as_str(), made["type"].as_str()), (Some("call_7"), Some("function")));
        assert_eq!(made["function"]["name"], "get_weather");
        assert_eq!(made["function"]["arguments"], ARGUMENTS);
        assert_eq!(openai["usage"]["completion_tokens"].as_u64(), Some(u64::from(tokens)));

        let content = call(Endpoint::Messages);
        let tokens = content.fixed_tokens().unwrap();
        let anthropic = body(Endpoint::Messages, &content, tokens, "tool_calls");
        assert_eq!(
            anthropic["content"],
            json!([{"type": "tool_use", "id": "toolu_7", "name": "get_weather",
                "input": {"city": "sim", "days": 1, "unit": "celsius"}}])
        );
        assert_eq!(anthropic["stop_reason"], "tool_use");
        assert_eq!(anthropic["usage"]["output_tokens"].as_u64(), Some(u64::from(tokens)));
        // Cut at the output cap: what was generated, and no object to call with.
        let cut = body(Endpoint::Messages, &content, 2, "length");
        assert_eq!((cut["content"][0]["input"].clone(), cut["stop_reason"].as_str()), (json!({}), Some("max_tokens")));
        let cut = body(Endpoint::ChatCompletions, &call(Endpoint::ChatCompletions), 2, "length");
        assert_eq!(cut["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"city\":");
    }

    #[test]
    fn tool_results_come_back_as_text_escaped() {
        let text = "tool result: 22\u{b0}C, \"sunny\"\nwindy";
        let content = || Content::new(&Reply::Text(text.into()), Endpoint::ChatCompletions, 0);
        let events = stream(Endpoint::ChatCompletions, content());
        let streamed: String =
            events.iter().filter_map(|(_, e)| e.pointer("/choices/0/delta/content").and_then(Value::as_str)).collect();
        assert_eq!(streamed, text);
        assert_eq!(events[events.len() - 2].1["choices"][0]["finish_reason"], "stop");
        let events = stream(Endpoint::Messages, Content::new(&Reply::Text(text.into()), Endpoint::Messages, 0));
        let streamed: String =
            events.iter().filter_map(|(_, e)| e.pointer("/delta/text").and_then(Value::as_str)).collect();
        assert_eq!(streamed, text);
        assert_eq!(events[events.len() - 2].1["delta"]["stop_reason"], "end_turn");
        let whole = body(Endpoint::Messages, &content(), content().fixed_tokens().unwrap(), "stop");
        assert_eq!(whole["content"], json!([{"type": "text", "text": text}]));
    }

    #[test]
    fn vocabulary_text_is_unchanged() {
        let events = stream(Endpoint::ChatCompletions, Content::Vocab);
        assert_eq!(events[0].1["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
        let text: String =
            events.iter().filter_map(|(_, e)| e.pointer("/choices/0/delta/content").and_then(Value::as_str)).collect();
        assert_eq!(text, " the gate opens");
        let events = stream(Endpoint::Messages, Content::Vocab);
        assert_eq!(events[1].1["content_block"], json!({"type": "text", "text": ""}));
    }
}
