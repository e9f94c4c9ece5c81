//! A client's request body in the upstream's vocabulary. Every field of the client's API is
//! either mapped, accepted because it asks for the upstream's default anyway (`n: 1`,
//! `frequency_penalty: 0`, `null`), or refused with a 400 naming it.

use bytes::Bytes;
use serde_json::{json, Map, Value};

use super::{malformed, untranslatable, Translation, DEFAULT_MAX_TOKENS};
use crate::error::{ErrorKind, GatewayError};

type Object = Map<String, Value>;

/// The upstream's body for a client's `body` (already carrying the upstream model and the
/// gateway's output cap).
pub fn translate_request(translation: Translation, body: &[u8]) -> Result<Bytes, GatewayError> {
    let request: Object = serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid(format!("request body is not a valid JSON object: {e}")))?;
    let translated = match translation {
        Translation::ChatToMessages => chat_to_messages(request)?,
        Translation::MessagesToChat => messages_to_chat(request)?,
    };
    serde_json::to_vec(&translated)
        .map(Bytes::from)
        .map_err(|e| GatewayError::new(ErrorKind::Internal, format!("could not write the translated request: {e}")))
}

fn text_of(value: &Value, field: &str) -> Result<String, GatewayError> {
    value.as_str().map(str::to_string).ok_or_else(|| malformed(field, "a string"))
}

fn object_of<'a>(value: &'a Value, field: &str) -> Result<&'a Object, GatewayError> {
    value.as_object().ok_or_else(|| malformed(field, "an object"))
}

fn array_of<'a>(value: &'a Value, field: &str) -> Result<&'a Vec<Value>, GatewayError> {
    value.as_array().ok_or_else(|| malformed(field, "an array"))
}

fn number_in(value: &Value, field: &str, max: f64, why: &str) -> Result<Value, GatewayError> {
    let n = value.as_f64().ok_or_else(|| malformed(field, "a number"))?;
    if !(0.0..=max).contains(&n) {
        return Err(untranslatable(field, why));
    }
    Ok(value.clone())
}

fn cap_of(value: &Value, field: &str) -> Result<Option<u64>, GatewayError> {
    match value {
        Value::Null => Ok(None),
        v => v.as_u64().map(Some).ok_or_else(|| malformed(field, "a non-negative integer")),
    }
}

// --- Chat Completions to Messages -------------------------------------------------------------

/// Whether a chat field the Messages API lacks asks only for what it does anyway.
fn chat_default(field: &str, value: &Value) -> bool {
    value.is_null()
        || match field {
            "n" => *value == 1,
            "frequency_penalty" | "presence_penalty" => value.as_f64() == Some(0.0),
            "logprobs" | "store" => *value == false,
            "response_format" => value.as_object().is_some_and(|o| o.len() == 1 && o["type"] == "text"),
            _ => false,
        }
}

fn chat_to_messages(request: Object) -> Result<Value, GatewayError> {
    if !request.contains_key("messages") {
        return Err(malformed("messages", "an array"));
    }
    let mut out = Object::new();
    let mut max_tokens: Option<u64> = None;
    let mut max_completion_tokens: Option<u64> = None;
    let mut parallel_tool_calls = true;
    let mut system: Vec<Value> = Vec::new();
    for (field, value) in &request {
        match field.as_str() {
            "model" => {
                out.insert("model".into(), value.clone());
            }
            "messages" => {
                let (sys, messages) = chat_messages(array_of(value, "messages")?)?;
                system = sys;
                out.insert("messages".into(), Value::Array(messages));
            }
            "max_tokens" => max_tokens = cap_of(value, field)?,
            "max_completion_tokens" => max_completion_tokens = cap_of(value, field)?,
            "temperature" if !value.is_null() => {
                let why = "Anthropic's temperature runs from 0 to 1";
                out.insert("temperature".into(), number_in(value, field, 1.0, why)?);
            }
            "top_p" if !value.is_null() => {
                out.insert("top_p".into(), number_in(value, field, 1.0, "top_p runs from 0 to 1")?);
            }
            "stop" => match value {
                Value::Null => {}
                Value::String(s) => {
                    out.insert("stop_sequences".into(), json!([s]));
                }
                Value::Array(items) if items.iter().all(Value::is_string) => {
                    out.insert("stop_sequences".into(), value.clone());
                }
                _ => return Err(malformed("stop", "a string or an array of strings")),
            },
            "stream" => {
                out.insert("stream".into(), Value::Bool(value.as_bool().unwrap_or(false)));
            }
            // The gateway's own business: Anthropic streams always carry their usage, and the
            // translator gives the client the usage chunk when it asked for it.
            "stream_options" => {}
            "tools" if !value.is_null() => {
                let tools = array_of(value, "tools")?;
                let mapped = tools.iter().enumerate().map(|(i, t)| chat_tool(t, i)).collect::<Result<Vec<_>, _>>()?;
                out.insert("tools".into(), Value::Array(mapped));
            }
            "tool_choice" if !value.is_null() => {
                out.insert("tool_choice".into(), chat_tool_choice(value)?);
            }
            "parallel_tool_calls" if !value.is_null() => {
                parallel_tool_calls = value.as_bool().ok_or_else(|| malformed(field, "a boolean"))?;
            }
            "user" if !value.is_null() => {
                out.insert("metadata".into(), json!({"user_id": text_of(value, "user")?}));
            }
            f if chat_default(f, value) => {}
            f => return Err(untranslatable(f, "the Anthropic Messages API has no counterpart")),
        }
    }
    if !system.is_empty() {
        out.insert("system".into(), Value::Array(system));
    }
    // OpenAI reads `max_completion_tokens` first; the gateway lowered both to what it reserved.
    let cap = max_completion_tokens.or(max_tokens).unwrap_or(DEFAULT_MAX_TOKENS);
    out.insert("max_tokens".into(), cap.into());
    if !parallel_tool_calls {
        let choice = out.entry("tool_choice").or_insert_with(|| json!({"type": "auto"}));
        if let Some(choice) = choice.as_object_mut() {
            choice.insert("disable_parallel_tool_use".into(), Value::Bool(true));
        }
    }
    Ok(Value::Object(out))
}

/// The system text blocks and the Anthropic turns of a chat conversation.
fn chat_messages(messages: &[Value]) -> Result<(Vec<Value>, Vec<Value>), GatewayError> {
    let mut system = Vec::new();
    let mut turns: Vec<Value> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let message = object_of(message, &at)?;
        let role =
            message.get("role").and_then(Value::as_str).ok_or_else(|| malformed(format!("{at}.role"), "a string"))?;
        for (key, value) in message {
            match key.as_str() {
                "role" | "content" | "tool_calls" | "tool_call_id" => {}
                "refusal" | "audio" | "name" if value.is_null() => {}
                k => return Err(untranslatable(format!("{at}.{k}"), "Anthropic messages have no such field")),
            }
        }
        let content = message.get("content").unwrap_or(&Value::Null);
        match role {
            "system" | "developer" => {
                if !turns.is_empty() {
                    return Err(untranslatable(
                        format!("{at}.role"),
                        "Anthropic takes system text only before the conversation starts",
                    ));
                }
                system.extend(chat_text_blocks(content, &format!("{at}.content"))?);
            }
            "user" => {
                let blocks = chat_user_blocks(content, &format!("{at}.content"))?;
                push_turn(&mut turns, "user", blocks);
            }
            "assistant" => {
                let mut blocks = match content {
                    Value::Null => Vec::new(),
                    c => chat_text_blocks(c, &format!("{at}.content"))?,
                };
                blocks.retain(|b| b["text"].as_str().is_some_and(|t| !t.is_empty()));
                if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
                    for (j, call) in array_of(calls, &format!("{at}.tool_calls"))?.iter().enumerate() {
                        blocks.push(chat_tool_call(call, &format!("{at}.tool_calls[{j}]"))?);
                    }
                }
                if !blocks.is_empty() {
                    push_turn(&mut turns, "assistant", blocks);
                }
            }
            "tool" => {
                let id =
                    message.get("tool_call_id").ok_or_else(|| malformed(format!("{at}.tool_call_id"), "a string"))?;
                let id = text_of(id, &format!("{at}.tool_call_id"))?;
                let text = chat_text_blocks(content, &format!("{at}.content"))?;
                let result = json!({"type": "tool_result", "tool_use_id": id, "content": text});
                push_turn(&mut turns, "user", vec![result]);
            }
            other => {
                return Err(untranslatable(format!("{at}.role"), &format!("Anthropic has no '{other}' role")));
            }
        }
    }
    Ok((system, turns))
}

/// Consecutive messages of one role go into one Anthropic turn (tool results after an assistant's
/// calls must share one user turn).
fn push_turn(turns: &mut Vec<Value>, role: &str, blocks: Vec<Value>) {
    if let Some(last) = turns.last_mut().filter(|t| t["role"] == role) {
        if let Some(content) = last["content"].as_array_mut() {
            content.extend(blocks);
            return;
        }
    }
    turns.push(json!({"role": role, "content": blocks}));
}

/// Text content (a string, or text parts) as Anthropic text blocks.
fn chat_text_blocks(content: &Value, at: &str) -> Result<Vec<Value>, GatewayError> {
    match content {
        Value::String(text) => Ok(vec![json!({"type": "text", "text": text})]),
        Value::Array(parts) => parts
            .iter()
            .enumerate()
            .map(|(j, part)| {
                let kind = part.get("type").and_then(Value::as_str);
                match kind {
                    Some("text") => {
                        Ok(json!({"type": "text", "text": text_of(&part["text"], &format!("{at}[{j}].text"))?}))
                    }
                    _ => Err(untranslatable(format!("{at}[{j}].type"), "only text is allowed here")),
                }
            })
            .collect(),
        Value::Null => Ok(Vec::new()),
        _ => Err(malformed(at, "a string or an array of content parts")),
    }
}

fn chat_user_blocks(content: &Value, at: &str) -> Result<Vec<Value>, GatewayError> {
    let Value::Array(parts) = content else {
        return chat_text_blocks(content, at);
    };
    let mut blocks = Vec::with_capacity(parts.len());
    for (j, part) in parts.iter().enumerate() {
        let here = format!("{at}[{j}]");
        match part.get("type").and_then(Value::as_str) {
            Some("text") => {
                blocks.push(json!({"type": "text", "text": text_of(&part["text"], &format!("{here}.text"))?}))
            }
            Some("image_url") => blocks.push(chat_image(part, &here)?),
            _ => return Err(untranslatable(format!("{here}.type"), "Anthropic takes text and images here")),
        }
    }
    Ok(blocks)
}

fn chat_image(part: &Value, at: &str) -> Result<Value, GatewayError> {
    let image = object_of(&part["image_url"], &format!("{at}.image_url"))?;
    if let Some(detail) = image.get("detail").filter(|d| !d.is_null()) {
        if detail != "auto" {
            return Err(untranslatable(format!("{at}.image_url.detail"), "Anthropic has no image detail levels"));
        }
    }
    let url = text_of(image.get("url").unwrap_or(&Value::Null), &format!("{at}.image_url.url"))?;
    if let Some(inline) = url.strip_prefix("data:") {
        let (media_type, data) = inline
            .split_once(";base64,")
            .ok_or_else(|| malformed(format!("{at}.image_url.url"), "an http(s) URL or a base64 data URL"))?;
        return Ok(json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}));
    }
    if url.starts_with("https://") || url.starts_with("http://") {
        return Ok(json!({"type": "image", "source": {"type": "url", "url": url}}));
    }
    Err(malformed(format!("{at}.image_url.url"), "an http(s) URL or a base64 data URL"))
}

fn chat_tool_call(call: &Value, at: &str) -> Result<Value, GatewayError> {
    if call.get("type").and_then(Value::as_str).is_some_and(|t| t != "function") {
        return Err(untranslatable(format!("{at}.type"), "only function tool calls translate"));
    }
    let id = text_of(call.get("id").unwrap_or(&Value::Null), &format!("{at}.id"))?;
    let function = object_of(call.get("function").unwrap_or(&Value::Null), &format!("{at}.function"))?;
    let name = text_of(function.get("name").unwrap_or(&Value::Null), &format!("{at}.function.name"))?;
    let arguments = function.get("arguments").and_then(Value::as_str).unwrap_or("");
    let input: Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments).map_err(|_| malformed(format!("{at}.function.arguments"), "a JSON object"))?
    };
    if !input.is_object() {
        return Err(malformed(format!("{at}.function.arguments"), "a JSON object"));
    }
    Ok(json!({"type": "tool_use", "id": id, "name": name, "input": input}))
}

fn chat_tool(tool: &Value, i: usize) -> Result<Value, GatewayError> {
    let at = format!("tools[{i}]");
    if tool.get("type").and_then(Value::as_str) != Some("function") {
        return Err(untranslatable(format!("{at}.type"), "only function tools translate"));
    }
    let function = object_of(tool.get("function").unwrap_or(&Value::Null), &format!("{at}.function"))?;
    let mut out = Object::new();
    out.insert(
        "name".into(),
        text_of(function.get("name").unwrap_or(&Value::Null), &format!("{at}.function.name"))?.into(),
    );
    for (key, value) in function {
        match key.as_str() {
            "name" => {}
            "description" if !value.is_null() => {
                out.insert("description".into(), text_of(value, &format!("{at}.function.description"))?.into());
            }
            "parameters" if !value.is_null() => {
                object_of(value, &format!("{at}.function.parameters"))?;
                out.insert("input_schema".into(), value.clone());
            }
            "strict" if value.as_bool() != Some(true) => {}
            _ if value.is_null() => {}
            k => return Err(untranslatable(format!("{at}.function.{k}"), "Anthropic tools have no such field")),
        }
    }
    out.entry("input_schema").or_insert_with(|| json!({"type": "object", "properties": {}}));
    Ok(Value::Object(out))
}

fn chat_tool_choice(choice: &Value) -> Result<Value, GatewayError> {
    match choice {
        Value::String(s) => match s.as_str() {
            "auto" => Ok(json!({"type": "auto"})),
            "none" => Ok(json!({"type": "none"})),
            "required" => Ok(json!({"type": "any"})),
            _ => Err(malformed("tool_choice", "'auto', 'none', 'required' or a function")),
        },
        Value::Object(o) if o.get("type").and_then(Value::as_str) == Some("function") => {
            let name = o.get("function").and_then(|f| f.get("name")).and_then(Value::as_str);
            let name = name.ok_or_else(|| malformed("tool_choice.function.name", "a string"))?;
            Ok(json!({"type": "tool", "name": name}))
        }
        _ => Err(untranslatable("tool_choice", "only 'auto', 'none', 'required' and function choices translate")),
    }
}

// --- Messages to Chat Completions -------------------------------------------------------------

fn messages_to_chat(request: Object) -> Result<Value, GatewayError> {
    if !request.contains_key("messages") {
        return Err(malformed("messages", "an array"));
    }
    let mut out = Object::new();
    let mut system: Option<Value> = None;
    let mut messages = Vec::new();
    let mut stream = false;
    for (field, value) in &request {
        match field.as_str() {
            "model" => {
                out.insert("model".into(), value.clone());
            }
            "system" => {
                system = match value {
                    Value::Null => None,
                    Value::String(s) => Some(json!({"role": "system", "content": s})),
                    Value::Array(_) => Some(json!({"role": "system", "content": anthropic_text(value, "system")?})),
                    _ => return Err(malformed("system", "a string or an array of text blocks")),
                };
            }
            "messages" => {
                for (i, message) in array_of(value, "messages")?.iter().enumerate() {
                    anthropic_message(message, i, &mut messages)?;
                }
            }
            "max_tokens" => {
                if let Some(cap) = cap_of(value, field)? {
                    out.insert("max_tokens".into(), cap.into());
                }
            }
            "temperature" | "top_p" if !value.is_null() => {
                value.as_f64().ok_or_else(|| malformed(field, "a number"))?;
                out.insert(field.clone(), value.clone());
            }
            "stop_sequences" if !value.is_null() => {
                let stops = array_of(value, field)?;
                if !stops.iter().all(Value::is_string) {
                    return Err(malformed(field, "an array of strings"));
                }
                out.insert("stop".into(), value.clone());
            }
            "stream" => stream = value.as_bool().unwrap_or(false),
            "tools" if !value.is_null() => {
                let tools = array_of(value, "tools")?;
                let mapped =
                    tools.iter().enumerate().map(|(i, t)| anthropic_tool(t, i)).collect::<Result<Vec<_>, _>>()?;
                out.insert("tools".into(), Value::Array(mapped));
            }
            "tool_choice" if !value.is_null() => anthropic_tool_choice(value, &mut out)?,
            "metadata" if !value.is_null() => {
                for (key, v) in object_of(value, "metadata")? {
                    match key.as_str() {
                        "user_id" if !v.is_null() => {
                            out.insert("user".into(), text_of(v, "metadata.user_id")?.into());
                        }
                        _ if v.is_null() => {}
                        k => return Err(untranslatable(format!("metadata.{k}"), "OpenAI has no such metadata")),
                    }
                }
            }
            "thinking" if value.is_null() || value.get("type").and_then(Value::as_str) == Some("disabled") => {}
            "service_tier" if value.is_null() || value == "auto" => {}
            _ if value.is_null() => {}
            f => return Err(untranslatable(f, "the Chat Completions API has no counterpart")),
        }
    }
    if let Some(system) = system {
        messages.insert(0, system);
    }
    out.insert("messages".into(), Value::Array(messages));
    if stream {
        out.insert("stream".into(), Value::Bool(true));
        // The ledger reads a stream's usage from its last chunk: always ask for it.
        out.insert("stream_options".into(), json!({"include_usage": true}));
    }
    Ok(Value::Object(out))
}

/// The text of a string or of text blocks (cache hints have no counterpart and no effect on the
/// answer, so they are let go), joined by newlines.
fn anthropic_text(content: &Value, at: &str) -> Result<String, GatewayError> {
    match content {
        Value::String(s) => Ok(s.clone()),
        Value::Array(blocks) => {
            let mut texts = Vec::with_capacity(blocks.len());
            for (j, block) in blocks.iter().enumerate() {
                if block.get("type").and_then(Value::as_str) != Some("text") {
                    return Err(untranslatable(format!("{at}[{j}].type"), "only text is allowed here"));
                }
                texts.push(text_of(&block["text"], &format!("{at}[{j}].text"))?);
            }
            Ok(texts.join("\n"))
        }
        Value::Null => Ok(String::new()),
        _ => Err(malformed(at, "a string or an array of content blocks")),
    }
}

fn anthropic_message(message: &Value, i: usize, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let at = format!("messages[{i}]");
    let message = object_of(message, &at)?;
    for key in message.keys() {
        if key != "role" && key != "content" {
            return Err(untranslatable(format!("{at}.{key}"), "OpenAI messages have no such field"));
        }
    }
    let role =
        message.get("role").and_then(Value::as_str).ok_or_else(|| malformed(format!("{at}.role"), "a string"))?;
    let content = message.get("content").unwrap_or(&Value::Null);
    let at = format!("{at}.content");
    match role {
        "user" => anthropic_user(content, &at, out),
        "assistant" => anthropic_assistant(content, &at, out),
        other => Err(malformed(format!("messages[{i}].role"), &format!("'user' or 'assistant', not '{other}'"))),
    }
}

fn anthropic_user(content: &Value, at: &str, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let Value::Array(blocks) = content else {
        out.push(json!({"role": "user", "content": anthropic_text(content, at)?}));
        return Ok(());
    };
    let mut parts = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let here = format!("{at}[{j}]");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                parts.push(json!({"type": "text", "text": text_of(&block["text"], &format!("{here}.text"))?}))
            }
            Some("image") => parts.push(anthropic_image(block, &here)?),
            Some("tool_result") => {
                // Tool results answer the previous assistant turn: they go first, as tool messages.
                let id = text_of(block.get("tool_use_id").unwrap_or(&Value::Null), &format!("{here}.tool_use_id"))?;
                let mut text =
                    anthropic_text(block.get("content").unwrap_or(&Value::Null), &format!("{here}.content"))?;
                if block.get("is_error").and_then(Value::as_bool) == Some(true) {
                    // OpenAI has no error flag on a tool message: the model reads it in the text.
                    text = format!("[tool error] {text}");
                }
                out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            }
            _ => return Err(untranslatable(format!("{here}.type"), "OpenAI takes text, images and tool results here")),
        }
    }
    if parts.is_empty() {
        return Ok(());
    }
    let content = match parts.as_slice() {
        [only] if only["type"] == "text" => only["text"].clone(),
        _ => Value::Array(parts),
    };
    out.push(json!({"role": "user", "content": content}));
    Ok(())
}

fn anthropic_image(block: &Value, at: &str) -> Result<Value, GatewayError> {
    let source = object_of(block.get("source").unwrap_or(&Value::Null), &format!("{at}.source"))?;
    let url = match source.get("type").and_then(Value::as_str) {
        Some("base64") => {
            let media = text_of(source.get("media_type").unwrap_or(&Value::Null), &format!("{at}.source.media_type"))?;
            let data = text_of(source.get("data").unwrap_or(&Value::Null), &format!("{at}.source.data"))?;
            format!("data:{media};base64,{data}")
        }
        Some("url") => text_of(source.get("url").unwrap_or(&Value::Null), &format!("{at}.source.url"))?,
        _ => return Err(untranslatable(format!("{at}.source.type"), "only base64 and URL images translate")),
    };
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

fn anthropic_assistant(content: &Value, at: &str, out: &mut Vec<Value>) -> Result<(), GatewayError> {
    let Value::Array(blocks) = content else {
        out.push(json!({"role": "assistant", "content": anthropic_text(content, at)?}));
        return Ok(());
    };
    let mut text = String::new();
    let mut calls = Vec::new();
    for (j, block) in blocks.iter().enumerate() {
        let here = format!("{at}[{j}]");
        match block.get("type").and_then(Value::as_str) {
            Some("text") => text.push_str(&text_of(&block["text"], &format!("{here}.text"))?),
            Some("tool_use") => {
                let id = text_of(block.get("id").unwrap_or(&Value::Null), &format!("{here}.id"))?;
                let name = text_of(block.get("name").unwrap_or(&Value::Null), &format!("{here}.name"))?;
                let input = block.get("input").cloned().unwrap_or_else(|| json!({}));
                let arguments = serde_json::to_string(&input).unwrap_or_else(|_| "{}".into());
                calls.push(json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}));
            }
            _ => return Err(untranslatable(format!("{here}.type"), "OpenAI takes text and tool calls here")),
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    out.push(message);
    Ok(())
}

fn anthropic_tool(tool: &Value, i: usize) -> Result<Value, GatewayError> {
    let at = format!("tools[{i}]");
    let tool = object_of(tool, &at)?;
    let mut function = Object::new();
    for (key, value) in tool {
        match key.as_str() {
            "type" if value.is_null() || value == "custom" => {}
            "type" => {
                return Err(untranslatable(
                    format!("{at}.type"),
                    "a server tool runs at Anthropic, not at this upstream",
                ))
            }
            "name" => {
                function.insert("name".into(), text_of(value, &format!("{at}.name"))?.into());
            }
            "description" if !value.is_null() => {
                function.insert("description".into(), text_of(value, &format!("{at}.description"))?.into());
            }
            "input_schema" => {
                object_of(value, &format!("{at}.input_schema"))?;
                function.insert("parameters".into(), value.clone());
            }
            // A prompt-cache hint: no counterpart, no effect on the answer.
            "cache_control" => {}
            _ if value.is_null() => {}
            k => return Err(untranslatable(format!("{at}.{k}"), "OpenAI tools have no such field")),
        }
    }
    if !function.contains_key("name") {
        return Err(malformed(format!("{at}.name"), "a string"));
    }
    Ok(json!({"type": "function", "function": function}))
}

fn anthropic_tool_choice(choice: &Value, out: &mut Object) -> Result<(), GatewayError> {
    let choice = object_of(choice, "tool_choice")?;
    let mapped = match choice.get("type").and_then(Value::as_str) {
        Some("auto") => json!("auto"),
        Some("any") => json!("required"),
        Some("none") => json!("none"),
        Some("tool") => {
            let name = text_of(choice.get("name").unwrap_or(&Value::Null), "tool_choice.name")?;
            json!({"type": "function", "function": {"name": name}})
        }
        _ => return Err(malformed("tool_choice.type", "'auto', 'any', 'tool' or 'none'")),
    };
    out.insert("tool_choice".into(), mapped);
    if choice.get("disable_parallel_tool_use").and_then(Value::as_bool) == Some(true) {
        out.insert("parallel_tool_calls".into(), Value::Bool(false));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn translate(t: Translation, body: Value) -> Result<Value, GatewayError> {
        let out = translate_request(t, &serde_json::to_vec(&body).unwrap())?;
        Ok(serde_json::from_slice(&out).unwrap())
    }

    #[test]
    fn a_chat_conversation_with_tools_becomes_anthropic_turns() {
        let out = translate(
            Translation::ChatToMessages,
            json!({
                "model": "claude", "max_completion_tokens": 50, "temperature": 0.5, "stop": "END",
                "stream": true, "stream_options": {"include_usage": true}, "user": "u-1",
                "parallel_tool_calls": false, "tool_choice": "required",
                "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}],
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": [{"type": "text", "text": "hi"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
                    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                        "function": {"name": "get", "arguments": "{\"q\":1}"}}]},
                    {"role": "tool", "tool_call_id": "call_1", "content": "42"},
                    {"role": "user", "content": "thanks"}
                ]
            }),
        )
        .unwrap();
        assert_eq!(out["max_tokens"], 50);
        assert_eq!(out["stop_sequences"], json!(["END"]));
        assert_eq!(out["system"], json!([{"type": "text", "text": "be brief"}]));
        assert_eq!(out["metadata"], json!({"user_id": "u-1"}));
        assert_eq!(out["tool_choice"], json!({"type": "any", "disable_parallel_tool_use": true}));
        assert_eq!(out["tools"][0], json!({"name": "get", "input_schema": {"type": "object"}}));
        let turns = out["messages"].as_array().unwrap();
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0]["content"][1]["source"]["media_type"], "image/png");
        assert_eq!(
            turns[1]["content"][0],
            json!({"type": "tool_use", "id": "call_1", "name": "get", "input": {"q": 1}})
        );
        assert_eq!(turns[2]["content"][0]["type"], "tool_result");
        assert_eq!(turns[2]["content"][1], json!({"type": "text", "text": "thanks"}));
        assert!(out.get("stream_options").is_none());
    }

    #[test]
    fn what_has_no_counterpart_is_refused_by_name() {
        let refused =
            |body: Value| translate(Translation::ChatToMessages, body).unwrap_err().param.unwrap().to_string();
        let base = |extra: Value| {
            let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "x"}]});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            body
        };
        assert_eq!(refused(base(json!({"n": 2}))), "n");
        assert_eq!(refused(base(json!({"logit_bias": {"1": 5}}))), "logit_bias");
        assert_eq!(refused(base(json!({"temperature": 1.5}))), "temperature");
        assert_eq!(refused(base(json!({"response_format": {"type": "json_object"}}))), "response_format");
        let late_system =
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": "y"}]});
        assert_eq!(refused(late_system), "messages[1].role");
        let audio = json!({"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio"}]}]});
        assert_eq!(refused(audio), "messages[0].content[0].type");
        // Defaults pass.
        assert!(translate(Translation::ChatToMessages, base(json!({"n": 1, "seed": null}))).is_ok());
    }

    #[test]
    fn an_anthropic_conversation_becomes_chat_messages() {
        let out = translate(
            Translation::MessagesToChat,
            json!({
                "model": "gpt", "max_tokens": 64, "stream": true, "stop_sequences": ["x"],
                "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
                "metadata": {"user_id": "u"},
                "tool_choice": {"type": "tool", "name": "get", "disable_parallel_tool_use": true},
                "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}],
                "messages": [
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": [{"type": "text", "text": "let me look"},
                        {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"q": 1}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"},
                        {"type": "text", "text": "and?"}]}
                ]
            }),
        )
        .unwrap();
        assert_eq!(out["stream_options"], json!({"include_usage": true}));
        assert_eq!(out["stop"], json!(["x"]));
        assert_eq!(out["user"], "u");
        assert_eq!(out["parallel_tool_calls"], false);
        assert_eq!(out["tool_choice"], json!({"type": "function", "function": {"name": "get"}}));
        let messages = out["messages"].as_array().unwrap();
        assert_eq!(messages[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(messages[2]["tool_calls"][0]["function"]["arguments"], "{\"q\":1}");
        assert_eq!(messages[3], json!({"role": "tool", "tool_call_id": "toolu_1", "content": "42"}));
        assert_eq!(messages[4], json!({"role": "user", "content": "and?"}));
    }

    #[test]
    fn anthropic_only_features_are_refused_by_name() {
        let refused = |extra: Value| {
            let mut body = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]});
            body.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            translate(Translation::MessagesToChat, body).unwrap_err().param.unwrap().to_string()
        };
        assert_eq!(refused(json!({"top_k": 5})), "top_k");
        assert_eq!(refused(json!({"thinking": {"type": "enabled", "budget_tokens": 1024}})), "thinking");
        assert_eq!(refused(json!({"tools": [{"type": "web_search_20250305", "name": "web_search"}]})), "tools[0].type");
        let doc = json!({"messages": [{"role": "user", "content": [{"type": "document"}]}]});
        assert_eq!(refused(doc), "messages[0].content[0].type");
    }
}
