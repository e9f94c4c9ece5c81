//! Whole answers and upstream error bodies in the client's vocabulary.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::vocab::{
    anthropic_error_type, anthropic_usage, finish_reason, openai_error_type, openai_usage, stop_reason,
};
use super::Translation;
use crate::error::{ErrorKind, GatewayError};

fn protocol_error(what: &str) -> GatewayError {
    GatewayError::new(ErrorKind::UpstreamProtocol, format!("the upstream's answer could not be translated: {what}"))
}

/// A whole 2xx answer of the upstream, as the client's API would have answered. `created` is the
/// Unix time written into a Chat Completions answer.
pub fn translate_whole(translation: Translation, body: &[u8], created: u64) -> Result<Bytes, GatewayError> {
    let answer: Value = serde_json::from_slice(body).map_err(|_| protocol_error("it is not JSON"))?;
    let translated = match translation {
        Translation::ChatToMessages => message_to_completion(&answer, created)?,
        Translation::MessagesToChat => completion_to_message(&answer)?,
    };
    serde_json::to_vec(&translated).map(Bytes::from).map_err(|_| protocol_error("it could not be written"))
}

/// An Anthropic message as a chat completion.
fn message_to_completion(message: &Value, created: u64) -> Result<Value, GatewayError> {
    let blocks = message.get("content").and_then(Value::as_array).ok_or_else(|| protocol_error("no 'content'"))?;
    let mut text = String::new();
    let mut reasoning = String::new();
    let mut calls = Vec::new();
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(block["text"].as_str().unwrap_or("")),
            Some("thinking") => reasoning.push_str(block["thinking"].as_str().unwrap_or("")),
            Some("tool_use") => {
                let arguments = serde_json::to_string(block.get("input").unwrap_or(&json!({})))
                    .map_err(|_| protocol_error("a tool call's input"))?;
                calls.push(json!({
                    "id": block["id"], "type": "function",
                    "function": {"name": block["name"], "arguments": arguments},
                }));
            }
            // Redacted thinking and server-side tool blocks have nothing to show a chat client.
            _ => {}
        }
    }
    let mut reply = Map::new();
    reply.insert("role".into(), json!("assistant"));
    reply.insert("content".into(), if text.is_empty() && !calls.is_empty() { Value::Null } else { text.into() });
    if !reasoning.is_empty() {
        reply.insert("reasoning_content".into(), reasoning.into());
    }
    if !calls.is_empty() {
        reply.insert("tool_calls".into(), Value::Array(calls));
    }
    let stop = message.get("stop_reason").and_then(Value::as_str).unwrap_or("end_turn");
    Ok(json!({
        "id": message["id"],
        "object": "chat.completion",
        "created": created,
        "model": message["model"],
        "choices": [{"index": 0, "message": reply, "logprobs": null, "finish_reason": finish_reason(stop)}],
        "usage": openai_usage(message.get("usage").unwrap_or(&Value::Null)),
    }))
}

/// A chat completion (its first choice: translated requests never ask for more) as an Anthropic
/// message.
fn completion_to_message(completion: &Value) -> Result<Value, GatewayError> {
    let choice = completion.pointer("/choices/0").ok_or_else(|| protocol_error("no choices"))?;
    let reply = choice.get("message").ok_or_else(|| protocol_error("no message"))?;
    let mut content = Vec::new();
    let reasoning = reply.get("reasoning_content").or_else(|| reply.get("reasoning")).and_then(Value::as_str);
    if let Some(thinking) = reasoning.filter(|t| !t.is_empty()) {
        content.push(json!({"type": "thinking", "thinking": thinking, "signature": ""}));
    }
    if let Some(text) = reply.get("content").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        content.push(json!({"type": "text", "text": text}));
    }
    for call in reply.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
        let arguments = call.pointer("/function/arguments").and_then(Value::as_str).unwrap_or("");
        let input: Value = if arguments.trim().is_empty() {
            json!({})
        } else {
            serde_json::from_str(arguments).map_err(|_| protocol_error("a tool call's arguments are not JSON"))?
        };
        content.push(json!({
            "type": "tool_use", "id": call["id"], "name": call.pointer("/function/name").unwrap_or(&Value::Null),
            "input": input,
        }));
    }
    let finish = choice.get("finish_reason").and_then(Value::as_str).unwrap_or("stop");
    let matched = choice.get("stop_reason").and_then(Value::as_str);
    let stop = stop_reason(finish, matched);
    Ok(json!({
        "id": completion["id"],
        "type": "message",
        "role": "assistant",
        "model": completion["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": if stop == "stop_sequence" { json!(matched) } else { Value::Null },
        "usage": anthropic_usage(completion.get("usage").unwrap_or(&Value::Null)),
    }))
}

/// The message of an error body in either vocabulary (or a few bytes of a body in neither).
fn error_message(body: &[u8]) -> String {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let found = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message").or_else(|| v.get("message")).or_else(|| v.get("detail")).and_then(Value::as_str)
    });
    match found {
        Some(m) => m.to_string(),
        None => {
            let text = String::from_utf8_lossy(&body[..body.len().min(512)]);
            if text.trim().is_empty() {
                "the upstream answered with an error".to_string()
            } else {
                text.trim().to_string()
            }
        }
    }
}

/// An upstream error body (status `status`) in the client's error format.
pub fn translate_error(translation: Translation, status: u16, body: &[u8]) -> Bytes {
    let message = error_message(body);
    let translated = match translation {
        Translation::ChatToMessages => {
            let parsed: Option<Value> = serde_json::from_slice(body).ok();
            let kind = parsed
                .as_ref()
                .and_then(|v| v.pointer("/error/type"))
                .and_then(Value::as_str)
                .unwrap_or_else(|| anthropic_error_type(status))
                .to_string();
            json!({"error": {"message": message, "type": openai_error_type(&kind), "param": null, "code": kind}})
        }
        Translation::MessagesToChat => {
            json!({"type": "error", "error": {"type": anthropic_error_type(status), "message": message}})
        }
    };
    Bytes::from(translated.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(t: Translation, body: Value) -> Value {
        serde_json::from_slice(&translate_whole(t, body.to_string().as_bytes(), 7).unwrap()).unwrap()
    }

    #[test]
    fn an_anthropic_tool_call_answer_becomes_a_completion() {
        let out = whole(
            Translation::ChatToMessages,
            json!({"id": "msg_1", "type": "message", "model": "claude", "stop_reason": "tool_use",
                "content": [{"type": "text", "text": "checking"},
                    {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"q": 1}}],
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 2}}),
        );
        assert_eq!(out["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(out["choices"][0]["message"]["content"], "checking");
        assert_eq!(out["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"q\":1}");
        assert_eq!(out["usage"]["prompt_tokens"], 5);
        assert_eq!(out["created"], 7);
    }

    #[test]
    fn a_completion_becomes_an_anthropic_message() {
        let out = whole(
            Translation::MessagesToChat,
            json!({"id": "chatcmpl-1", "model": "gpt", "choices": [{"index": 0, "finish_reason": "stop",
                "stop_reason": "###", "message": {"role": "assistant", "content": "hi"}}],
                "usage": {"prompt_tokens": 9, "completion_tokens": 1}}),
        );
        assert_eq!(out["content"], json!([{"type": "text", "text": "hi"}]));
        assert_eq!(out["stop_reason"], "stop_sequence");
        assert_eq!(out["stop_sequence"], "###");
        assert_eq!(out["usage"]["input_tokens"], 9);
    }

    #[test]
    fn errors_reach_the_client_in_its_own_format() {
        let anthropic = br#"{"type":"error","error":{"type":"overloaded_error","message":"busy"}}"#;
        let out: Value = serde_json::from_slice(&translate_error(Translation::ChatToMessages, 529, anthropic)).unwrap();
        assert_eq!(out["error"]["message"], "busy");
        assert_eq!(out["error"]["type"], "server_error");
        let openai = br#"{"error":{"message":"bad model","type":"invalid_request_error"}}"#;
        let out: Value = serde_json::from_slice(&translate_error(Translation::MessagesToChat, 400, openai)).unwrap();
        assert_eq!(out, json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad model"}}));
        let out: Value = serde_json::from_slice(&translate_error(Translation::MessagesToChat, 502, b"<html>")).unwrap();
        assert_eq!(out["error"]["message"], "<html>");
    }
}
