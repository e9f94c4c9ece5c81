//! The Responses API as OpenAI answers it: a `response` object (whole, or carried by the
//! stream's first and last events) whose `output` holds one assistant message, and the named
//! events of a stream, each with its `sequence_number`: `response.created`, `.in_progress`, the
//! message item and its text part added, one `response.output_text.delta` per token, the text,
//! part and item done, then `response.completed` (or `response.incomplete` when the answer was
//! cut at `max_output_tokens`) with the usage.

use bytes::Bytes;
use serde_json::{json, Value};

/// Events before the first token (their sequence numbers are 0..PREAMBLE).
pub const PREAMBLE: u32 = 4;

pub struct ResponseIds {
    pub id: String,
    pub item_id: String,
    pub model: String,
    pub created: u64,
}

impl ResponseIds {
    pub fn new(id: &str, model: &str, created: u64) -> Self {
        let item_id = format!("msg_{}", id.strip_prefix("resp_").unwrap_or(id));
        Self { id: id.to_string(), item_id, model: model.to_string(), created }
    }

    fn message(&self, text: Option<&str>) -> Value {
        let content = match text {
            Some(text) => json!([{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]),
            None => json!([]),
        };
        let status = if text.is_some() { "completed" } else { "in_progress" };
        json!({"id": self.item_id, "type": "message", "status": status, "role": "assistant", "content": content})
    }

    /// The `response` object. `finish`: `None` while in progress, else "stop" or "length".
    pub fn object(&self, finish: Option<&str>, text: Option<&str>, usage: Option<Value>) -> Value {
        let (status, incomplete) = match finish {
            None => ("in_progress", Value::Null),
            Some("length") => ("incomplete", json!({"reason": "max_output_tokens"})),
            Some(_) => ("completed", Value::Null),
        };
        let output = if finish.is_some() { json!([self.message(text)]) } else { json!([]) };
        json!({
            "id": self.id, "object": "response", "created_at": self.created, "status": status,
            "error": null, "incomplete_details": incomplete, "model": self.model, "output": output,
            "parallel_tool_calls": true, "tool_choice": "auto", "tools": [],
            "usage": usage.unwrap_or(Value::Null),
        })
    }

    fn event(kind: &str, sequence: u32, mut body: Value) -> Bytes {
        if let Some(map) = body.as_object_mut() {
            map.insert("type".into(), json!(kind));
            map.insert("sequence_number".into(), json!(sequence));
        }
        Bytes::from(format!("event: {kind}\ndata: {body}\n\n"))
    }

    pub fn preamble(&self) -> Vec<Bytes> {
        let text_part = json!({"type": "output_text", "text": "", "annotations": [], "logprobs": []});
        vec![
            Self::event("response.created", 0, json!({"response": self.object(None, None, None)})),
            Self::event("response.in_progress", 1, json!({"response": self.object(None, None, None)})),
            Self::event("response.output_item.added", 2, json!({"output_index": 0, "item": self.message(None)})),
            Self::event(
                "response.content_part.added",
                3,
                json!({"item_id": self.item_id, "output_index": 0, "content_index": 0, "part": text_part}),
            ),
        ]
    }

    pub fn token(&self, i: u32, text: &str) -> Bytes {
        let body = json!({
            "item_id": self.item_id, "output_index": 0, "content_index": 0, "delta": text, "logprobs": [],
        });
        Self::event("response.output_text.delta", PREAMBLE + i, body)
    }

    /// The events after `completion` tokens: the text, part and item done, and the response's end.
    pub fn epilogue(&self, completion: u32, text: &str, finish: &str, usage: Option<Value>) -> Vec<Bytes> {
        let at = PREAMBLE + completion;
        let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        let where_ = |mut extra: Value| {
            if let Some(map) = extra.as_object_mut() {
                map.insert("item_id".into(), json!(self.item_id));
                map.insert("output_index".into(), json!(0));
                map.insert("content_index".into(), json!(0));
            }
            extra
        };
        vec![
            Self::event("response.output_text.done", at, where_(json!({"text": text, "logprobs": []}))),
            Self::event("response.content_part.done", at + 1, where_(json!({"part": part}))),
            Self::event(
                "response.output_item.done",
                at + 2,
                json!({"output_index": 0, "item": self.message(Some(text))}),
            ),
            self.end(at + 3, finish, Some(text), usage),
        ]
    }

    /// The last event: `response.completed`, or `response.incomplete` for an answer cut at its cap.
    pub fn end(&self, sequence: u32, finish: &str, text: Option<&str>, usage: Option<Value>) -> Bytes {
        let kind = if finish == "length" { "response.incomplete" } else { "response.completed" };
        Self::event(kind, sequence, json!({"response": self.object(Some(finish), text, usage)}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(frame: &Bytes) -> Value {
        let text = std::str::from_utf8(frame).unwrap();
        let line = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
        serde_json::from_str(line).unwrap()
    }

    #[test]
    fn a_stream_numbers_its_events_and_ends_with_the_usage() {
        let ids = ResponseIds::new("resp_7", "m", 1);
        let mut frames = ids.preamble();
        frames.push(ids.token(0, " the"));
        frames.push(ids.token(1, " gate"));
        let usage = json!({"input_tokens": 3, "output_tokens": 2});
        frames.extend(ids.epilogue(2, " the gate", "stop", Some(usage.clone())));
        let events: Vec<Value> = frames.iter().map(data).collect();
        let numbers: Vec<u64> = events.iter().map(|e| e["sequence_number"].as_u64().unwrap()).collect();
        assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
        assert_eq!(events[4]["type"], "response.output_text.delta");
        assert_eq!(events[4]["item_id"], "msg_7");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "response.completed");
        assert_eq!(last["response"]["usage"], usage);
        assert_eq!(last["response"]["output"][0]["content"][0]["text"], " the gate");
        assert!(std::str::from_utf8(frames.last().unwrap()).unwrap().starts_with("event: response.completed\n"));
    }

    #[test]
    fn an_answer_cut_at_its_cap_is_incomplete() {
        let ids = ResponseIds::new("resp_1", "m", 1);
        let whole = ids.object(Some("length"), Some("x"), None);
        assert_eq!(
            (whole["status"].as_str(), whole["incomplete_details"]["reason"].as_str()),
            (Some("incomplete"), Some("max_output_tokens"))
        );
        assert_eq!(data(&ids.end(9, "length", None, None))["type"], "response.incomplete");
    }
}
