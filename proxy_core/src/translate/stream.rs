//! The streaming translation: a state machine fed one upstream event at a time, writing that
//! event's translation at once. It keeps only what later events need (the message's id and
//! model, the open content block, which tool call is which, the stop reason and usage), never
//! text, so its memory does not grow with the answer.
//!
//! One event in gives at most one event out, except where one vocabulary says in one event what
//! the other says in several: an OpenAI chunk that ends one content block and starts another
//! (`content_block_stop`, `content_block_start`, `content_block_delta`), and OpenAI's `[DONE]`
//! (`message_delta`, `message_stop`). Those go out together, in the same write.

use bytes::{BufMut, BytesMut};
use serde_json::{json, Value};

use super::vocab::{anthropic_usage, finish_reason, openai_usage, stop_reason};
use super::Translation;
use crate::sse::parse_event;

pub struct StreamTranslator {
    state: State,
}

enum State {
    ToChat(Box<ToChat>),
    ToMessages(Box<ToMessages>),
}

impl StreamTranslator {
    /// `include_usage`: the chat client asked for the usage chunk (Anthropic clients always get
    /// usage). `created`: the Unix time written into chat chunks.
    pub fn new(translation: Translation, include_usage: bool, created: u64) -> Self {
        let state = match translation {
            Translation::ChatToMessages => State::ToChat(Box::new(ToChat {
                include_usage,
                created,
                id: String::new(),
                model: String::new(),
                tools: Vec::new(),
                usage: json!({}),
            })),
            Translation::MessagesToChat => State::ToMessages(Box::default()),
        };
        Self { state }
    }

    /// Translate one complete upstream event (its raw bytes, blank line included) into `out`.
    pub fn event(&mut self, raw: &[u8], out: &mut BytesMut) {
        let event = parse_event(raw);
        let Some(data) = event.data else {
            return; // comments and keep-alives: the gateway writes its own
        };
        match &mut self.state {
            State::ToChat(s) => s.event(&data, out),
            State::ToMessages(s) => s.event(&data, out),
        }
    }
}

fn write_data(out: &mut BytesMut, value: &Value) {
    out.put_slice(b"data: ");
    // Writing a Value into memory cannot fail.
    let _ = serde_json::to_writer((&mut *out).writer(), value);
    out.put_slice(b"\n\n");
}

fn write_event(out: &mut BytesMut, name: &str, value: &Value) {
    out.put_slice(b"event: ");
    out.put_slice(name.as_bytes());
    out.put_slice(b"\n");
    write_data(out, value);
}

// --- Anthropic events to chat chunks -------------------------------------------------------------

struct ToChat {
    include_usage: bool,
    created: u64,
    id: String,
    model: String,
    /// Anthropic content block index of each tool call, by its chat `tool_calls` index, and
    /// whether any of its arguments came.
    tools: Vec<(u64, bool)>,
    /// Anthropic usage as it accumulates (`message_start`, then `message_delta`).
    usage: Value,
}

impl ToChat {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        })
    }

    fn merge_usage(&mut self, usage: Option<&Value>) {
        if let (Some(Value::Object(new)), Some(acc)) = (usage, self.usage.as_object_mut()) {
            for (key, value) in new {
                if !value.is_null() {
                    acc.insert(key.clone(), value.clone());
                }
            }
        }
    }

    fn event(&mut self, data: &[u8], out: &mut BytesMut) {
        let Ok(event) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        match event.get("type").and_then(Value::as_str).unwrap_or("") {
            "message_start" => {
                let message = &event["message"];
                self.id = message["id"].as_str().unwrap_or("").to_string();
                self.model = message["model"].as_str().unwrap_or("").to_string();
                self.merge_usage(message.get("usage"));
                write_data(out, &self.chunk(json!({"role": "assistant", "content": ""}), None));
            }
            "content_block_start" => {
                let block = &event["content_block"];
                match block["type"].as_str() {
                    Some("tool_use") => {
                        let index = self.tools.len();
                        self.tools.push((event["index"].as_u64().unwrap_or(0), false));
                        let call = json!({"index": index, "id": block["id"], "type": "function",
                            "function": {"name": block["name"], "arguments": ""}});
                        write_data(out, &self.chunk(json!({"tool_calls": [call]}), None));
                    }
                    Some("text") => {
                        if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                            write_data(out, &self.chunk(json!({"content": text}), None));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_delta" => {
                let delta = &event["delta"];
                let translated = match delta["type"].as_str() {
                    Some("text_delta") => json!({"content": delta["text"]}),
                    Some("thinking_delta") => json!({"reasoning_content": delta["thinking"]}),
                    Some("input_json_delta") => {
                        let block = event["index"].as_u64().unwrap_or(0);
                        let Some(index) = self.tools.iter().position(|(b, _)| *b == block) else {
                            return;
                        };
                        self.tools[index].1 = true;
                        json!({"tool_calls": [{"index": index, "function": {"arguments": delta["partial_json"]}}]})
                    }
                    _ => return,
                };
                write_data(out, &self.chunk(translated, None));
            }
            "message_delta" => {
                self.merge_usage(event.get("usage"));
                let stop = event.pointer("/delta/stop_reason").and_then(Value::as_str).unwrap_or("end_turn");
                let mut chunk = self.chunk(json!({}), Some(finish_reason(stop)));
                if self.include_usage {
                    chunk["usage"] = openai_usage(&self.usage);
                }
                write_data(out, &chunk);
            }
            "content_block_stop" => {
                // A tool without parameters streams no arguments at all: the chat client still
                // needs a JSON object to parse.
                let block = event["index"].as_u64().unwrap_or(0);
                if let Some(index) = self.tools.iter().position(|(b, got)| *b == block && !got) {
                    self.tools[index].1 = true;
                    let call = json!({"index": index, "function": {"arguments": "{}"}});
                    write_data(out, &self.chunk(json!({"tool_calls": [call]}), None));
                }
            }
            "message_stop" => out.put_slice(b"data: [DONE]\n\n"),
            "error" => {
                let kind = event.pointer("/error/type").and_then(Value::as_str).unwrap_or("api_error");
                let message = event.pointer("/error/message").and_then(Value::as_str).unwrap_or("upstream error");
                let error = json!({"error": {"message": message, "type": super::vocab::openai_error_type(kind),
                    "param": null, "code": kind}});
                write_data(out, &error);
            }
            // ping: nothing a chat client reads.
            _ => {}
        }
    }
}

// --- Chat chunks to Anthropic events -------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Open {
    #[default]
    Nothing,
    Text,
    Thinking,
    /// A tool call, by its chat `tool_calls` index.
    Tool(u64),
}

#[derive(Default)]
struct ToMessages {
    started: bool,
    finished: bool,
    /// The Anthropic index of the open block (or of the next one when nothing is open).
    block: u64,
    open: Open,
    stop: Option<&'static str>,
    matched_stop: Option<String>,
    usage: Option<Value>,
}

impl ToMessages {
    fn start(&mut self, chunk: &Value, out: &mut BytesMut) {
        if self.started {
            return;
        }
        self.started = true;
        let message = json!({
            "id": chunk.get("id").cloned().unwrap_or(Value::Null),
            "type": "message",
            "role": "assistant",
            "model": chunk.get("model").cloned().unwrap_or(Value::Null),
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {"input_tokens": 0, "output_tokens": 0},
        });
        write_event(out, "message_start", &json!({"type": "message_start", "message": message}));
    }

    fn close(&mut self, out: &mut BytesMut) {
        if self.open != Open::Nothing {
            write_event(out, "content_block_stop", &json!({"type": "content_block_stop", "index": self.block}));
            self.open = Open::Nothing;
            self.block += 1;
        }
    }

    fn open(&mut self, kind: Open, block: Value, out: &mut BytesMut) {
        self.close(out);
        self.open = kind;
        let start = json!({"type": "content_block_start", "index": self.block, "content_block": block});
        write_event(out, "content_block_start", &start);
    }

    fn delta(&self, delta: Value, out: &mut BytesMut) {
        write_event(
            out,
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": self.block, "delta": delta}),
        );
    }

    fn event(&mut self, data: &[u8], out: &mut BytesMut) {
        if data == b"[DONE]" {
            return self.finish(out);
        }
        let Ok(chunk) = serde_json::from_slice::<Value>(data) else {
            return;
        };
        if let Some(error) = chunk.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("upstream error");
            let event = json!({"type": "error", "error": {"type": "api_error", "message": message}});
            return write_event(out, "error", &event);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        // Some servers (Azure) open with a chunk of no choices and no id: the message starts
        // with the first chunk that has a choice.
        let Some(choice) = chunk.pointer("/choices/0") else {
            return;
        };
        self.start(&chunk, out);
        let delta = &choice["delta"];
        let reasoning = delta.get("reasoning_content").or_else(|| delta.get("reasoning")).and_then(Value::as_str);
        if let Some(thinking) = reasoning.filter(|t| !t.is_empty()) {
            if self.open != Open::Thinking {
                self.open(Open::Thinking, json!({"type": "thinking", "thinking": "", "signature": ""}), out);
            }
            self.delta(json!({"type": "thinking_delta", "thinking": thinking}), out);
        }
        if let Some(text) = delta.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
            if self.open != Open::Text {
                self.open(Open::Text, json!({"type": "text", "text": ""}), out);
            }
            self.delta(json!({"type": "text_delta", "text": text}), out);
        }
        for call in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(0);
            if self.open != Open::Tool(index) {
                let id =
                    call.get("id").and_then(Value::as_str).map_or_else(|| format!("toolu_{index}"), str::to_string);
                let name = call.pointer("/function/name").cloned().unwrap_or(Value::Null);
                let block = json!({"type": "tool_use", "id": id, "name": name, "input": {}});
                self.open(Open::Tool(index), block, out);
            }
            if let Some(args) = call.pointer("/function/arguments").and_then(Value::as_str).filter(|a| !a.is_empty()) {
                self.delta(json!({"type": "input_json_delta", "partial_json": args}), out);
            }
        }
        if let Some(finish) = choice.get("finish_reason").and_then(Value::as_str) {
            self.close(out);
            self.matched_stop = choice.get("stop_reason").and_then(Value::as_str).map(str::to_string);
            self.stop = Some(stop_reason(finish, self.matched_stop.as_deref()));
        }
    }

    fn finish(&mut self, out: &mut BytesMut) {
        if self.finished {
            return;
        }
        self.finished = true;
        self.start(&Value::Null, out);
        self.close(out);
        let stop = self.stop.unwrap_or("end_turn");
        let sequence = if stop == "stop_sequence" { json!(self.matched_stop) } else { Value::Null };
        let usage = anthropic_usage(self.usage.as_ref().unwrap_or(&Value::Null));
        let delta =
            json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": sequence}, "usage": usage});
        write_event(out, "message_delta", &delta);
        write_event(out, "message_stop", &json!({"type": "message_stop"}));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(translation: Translation, include_usage: bool, events: &[&str]) -> Vec<Value> {
        let mut t = StreamTranslator::new(translation, include_usage, 1);
        let mut out = BytesMut::new();
        for e in events {
            t.event(e.as_bytes(), &mut out);
        }
        let text = String::from_utf8(out.to_vec()).unwrap();
        text.split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| {
                let data = e.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
                serde_json::from_str(data).unwrap_or(Value::String(data.to_string()))
            })
            .collect()
    }

    #[test]
    fn anthropic_tool_call_stream_becomes_tool_call_chunks() {
        let events = [
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"c\",\"usage\":{\"input_tokens\":7,\"output_tokens\":1}}}\n\n",
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"get\",\"input\":{}}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"1}\"}}\n\n",
            "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":5}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ];
        let out = run(Translation::ChatToMessages, true, &events);
        assert_eq!(out.len(), 6);
        assert_eq!(out[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(out[1]["choices"][0]["delta"]["tool_calls"][0]["id"], "toolu_1");
        let args: String = out[2..4]
            .iter()
            .map(|c| c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(args, "{\"q\":1}");
        assert_eq!(out[4]["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(out[4]["usage"]["prompt_tokens"], 7);
        assert_eq!(out[4]["usage"]["completion_tokens"], 5);
        assert_eq!(out[5], "[DONE]");
        // Without include_usage, the usage stays with the gateway.
        let quiet = run(Translation::ChatToMessages, false, &events);
        assert!(quiet[4].get("usage").is_none());
    }

    #[test]
    fn chat_chunks_become_anthropic_blocks() {
        let chunk = |delta: &str, finish: &str| {
            format!("data: {{\"id\":\"c1\",\"model\":\"g\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n")
        };
        let events = [
            chunk("{\"role\":\"assistant\",\"content\":\"\"}", "null"),
            chunk("{\"content\":\"Hel\"}", "null"),
            chunk("{\"content\":\"lo\"}", "null"),
            chunk("{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"get\",\"arguments\":\"\"}}]}", "null"),
            chunk("{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{}\"}}]}", "null"),
            chunk("{}", "\"tool_calls\""),
            "data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":3}}\n\n".to_string(),
            "data: [DONE]\n\n".to_string(),
        ];
        let events: Vec<&str> = events.iter().map(String::as_str).collect();
        let out = run(Translation::MessagesToChat, false, &events);
        let kinds: Vec<&str> = out.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            [
                "message_start",
                "content_block_start",
                "content_block_delta",
                "content_block_delta",
                "content_block_stop",
                "content_block_start",
                "content_block_delta",
                "content_block_stop",
                "message_delta",
                "message_stop"
            ]
        );
        assert_eq!(out[5]["index"], 1);
        assert_eq!(out[5]["content_block"]["id"], "call_1");
        assert_eq!(out[8]["delta"]["stop_reason"], "tool_use");
        assert_eq!(out[8]["usage"]["input_tokens"], 9);
        assert_eq!(out[8]["usage"]["output_tokens"], 3);
    }
}
