//! Reading a request body the way a model server does: the model, whether to stream (and
//! include the usage chunk), the output cap, the choices asked for, the prompt's length and what
//! to answer (text or a tool call, `tools.rs`). A body a model server would refuse gets a message
//! saying which field is wrong.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_json::Value;

use super::prompt::prompt_tokens;
use super::tools::{self, Reply};
use crate::endpoint::Endpoint;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRequest {
    pub model: String,
    pub stream: bool,
    /// `stream_options.include_usage`: the stream ends with a usage chunk.
    pub include_usage: bool,
    /// The largest of `max_tokens`, `max_completion_tokens` and `max_output_tokens`: a server
    /// that honours the larger one is the case the gateway must be safe against.
    pub output_cap: Option<u64>,
    /// Choices asked for (`n`, or `best_of` when larger); checked, though the simulator answers
    /// with one.
    pub n: u64,
    pub prompt_tokens: u64,
    pub reply: Reply,
}

#[derive(Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
}

/// The fields read; every other field is left alone, as a model server leaves fields it does not
/// know. Each `Option` also takes an explicit `null`.
#[derive(Deserialize)]
struct Body {
    model: Option<String>,
    stream: Option<bool>,
    stream_options: Option<StreamOptions>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    max_output_tokens: Option<u64>,
    n: Option<u64>,
    best_of: Option<u64>,
    messages: Option<Value>,
    system: Option<Value>,
    prompt: Option<Value>,
    input: Option<Value>,
    instructions: Option<Value>,
    /// Raw: their JSON text counts as prompt as it was sent.
    #[serde(default, deserialize_with = "raw")]
    tools: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "raw")]
    tool_choice: Option<Box<RawValue>>,
}

/// A field's JSON text, `null` included (the gateway counts that too).
fn raw<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(deserializer).map(Some)
}

/// A tool field as sent (its text counts as prompt) and parsed (it decides the reply).
struct ToolField<'a> {
    raw: &'a str,
    value: Value,
}

/// The tool field `name` on an endpoint that takes tools (chat, messages, responses); others
/// leave it alone, as a model server leaves fields it does not know.
fn tool_field<'a>(
    endpoint: Endpoint,
    name: &str,
    raw: &'a Option<Box<RawValue>>,
) -> Result<Option<ToolField<'a>>, String> {
    let takes_tools = matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::Responses);
    let Some(raw) = raw.as_deref().filter(|_| takes_tools) else { return Ok(None) };
    let value = serde_json::from_str(raw.get()).map_err(|e| format!("'{name}' is invalid: {e}"))?;
    Ok(Some(ToolField { raw: raw.get(), value }))
}

/// The prompt's fields for `endpoint`, each checked for its shape.
fn text_fields(endpoint: Endpoint, body: &Body) -> Result<Vec<&Value>, String> {
    let wanted: &[(&str, &Option<Value>)] = match endpoint {
        Endpoint::ChatCompletions => &[("messages", &body.messages)],
        Endpoint::Messages => &[("system", &body.system), ("messages", &body.messages)],
        Endpoint::Completions => &[("prompt", &body.prompt)],
        Endpoint::Embeddings => &[("input", &body.input)],
        Endpoint::Responses => &[("instructions", &body.instructions), ("input", &body.input)],
        Endpoint::Models => &[],
    };
    let mut fields = Vec::new();
    for (name, value) in wanted {
        let Some(value) = value else { continue };
        let ok = match (*name, value) {
            ("messages", Value::Array(_)) => true,
            ("messages", _) => return Err("'messages' must be an array".into()),
            (_, Value::String(_) | Value::Array(_)) => true,
            _ => false,
        };
        if !ok {
            return Err(format!("'{name}' must be text or an array"));
        }
        fields.push(value);
    }
    Ok(fields)
}

/// The body's fields, or a message naming the field at fault.
fn parse(bytes: &[u8]) -> Result<Body, String> {
    // serde would also take the fields in order from an array.
    if bytes.trim_ascii_start().first() != Some(&b'{') {
        return Err("request body is not a valid JSON object".into());
    }
    let mut json = serde_json::Deserializer::from_slice(bytes);
    let body: Body = serde_path_to_error::deserialize(&mut json).map_err(|e| {
        let field = e.path().to_string();
        if field == "." || !e.inner().is_data() {
            format!("request body is not a valid JSON object: {}", e.inner())
        } else {
            format!("'{field}' is invalid: {}", e.inner())
        }
    })?;
    json.end().map_err(|e| format!("request body is not a valid JSON object: {e}"))?;
    Ok(body)
}

pub fn read(endpoint: Endpoint, bytes: &[u8]) -> Result<ModelRequest, String> {
    let body = parse(bytes)?;
    let model = match body.model.as_deref() {
        None => return Err("you must provide a 'model' parameter".into()),
        Some("") => return Err("'model' must not be empty".into()),
        Some(model) => model.to_string(),
    };
    let stream = body.stream.unwrap_or(false);
    if stream && !endpoint.can_stream() {
        return Err(format!("streaming is not supported on {}", endpoint.as_str()));
    }
    for (name, value) in [("n", body.n), ("best_of", body.best_of)] {
        if value == Some(0) {
            return Err(format!("'{name}' must be a positive integer"));
        }
    }
    let output_cap = [body.max_tokens, body.max_completion_tokens, body.max_output_tokens].into_iter().flatten().max();
    let offered = tool_field(endpoint, "tools", &body.tools)?;
    let choice = tool_field(endpoint, "tool_choice", &body.tool_choice)?;
    let schemas: Vec<&str> = [&offered, &choice].into_iter().flatten().map(|f| f.raw).collect();
    let prompt_tokens = prompt_tokens(text_fields(endpoint, &body)?, &schemas);
    let (offered, choice) = (offered.as_ref().map(|f| &f.value), choice.as_ref().map(|f| &f.value));
    let reply = tools::reply(endpoint, body.messages.as_ref(), offered, choice)?;
    Ok(ModelRequest {
        model,
        stream,
        include_usage: body.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
        output_cap,
        n: body.n.unwrap_or(1).max(body.best_of.unwrap_or(1)),
        prompt_tokens,
        reply,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chat(body: &str) -> Result<ModelRequest, String> {
        read(Endpoint::ChatCompletions, body.as_bytes())
    }

    #[test]
    fn the_fields_a_model_server_acts_on() {
        let r = chat(
            r#"{"model":"m","stream":true,"stream_options":{"include_usage":true},"n":2,"best_of":3,
                "messages":[{"role":"user","content":"12345678"}],"temperature":0.2}"#,
        )
        .unwrap();
        assert_eq!(
            r,
            ModelRequest {
                model: "m".into(),
                stream: true,
                include_usage: true,
                output_cap: None,
                n: 3,
                prompt_tokens: 2,
                reply: Reply::Vocab,
            }
        );
        let plain = chat(r#"{"model":"m","stream":null,"stream_options":null,"max_tokens":null}"#).unwrap();
        assert!(!plain.stream && !plain.include_usage && plain.output_cap.is_none() && plain.n == 1);
    }

    #[test]
    fn the_largest_output_cap_is_the_one_honoured() {
        let r = chat(r#"{"model":"m","max_tokens":1,"max_completion_tokens":60000,"max_output_tokens":7}"#).unwrap();
        assert_eq!(r.output_cap, Some(60000));
    }

    #[test]
    fn each_endpoint_reads_its_own_text_and_nothing_else() {
        let body = br#"{"model":"m","system":"abcdabcd","prompt":"abcd","input":["ab","cd","ef"],
            "messages":[{"role":"user","content":"abcd"}],"tools":null}"#;
        let tokens = |endpoint| read(endpoint, body).unwrap().prompt_tokens;
        // `null` as sent: 4 characters, as the gateway counts it.
        assert_eq!(tokens(Endpoint::ChatCompletions), 2);
        assert_eq!(tokens(Endpoint::Messages), 4);
        assert_eq!(tokens(Endpoint::Completions), 1, "tools are no field of a completion");
        assert_eq!(tokens(Endpoint::Embeddings), 2);
        let responses = br#"{"model":"m","instructions":"abcdabcd","prompt":{"id":"pmpt_1"},
            "input":[{"role":"user","content":[{"type":"input_text","text":"abcd"}]}]}"#;
        assert_eq!(read(Endpoint::Responses, responses).unwrap().prompt_tokens, 3);
    }

    #[test]
    fn tool_fields_count_as_sent_and_decide_the_reply() {
        // 4 characters of content, 89 of `tools` (spaces included), 10 of `tool_choice`: 26 tokens.
        let tools = r#"[{"type": "function", "function": {"name": "lookup", "parameters": {"required": ["q"]}}}]"#;
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"abcd"}}],"tools": {tools},"tool_choice":"required"}}"#
        );
        let asked = chat(&body).unwrap();
        assert_eq!(tools.chars().count(), 89);
        assert_eq!(asked.prompt_tokens, 26);
        let Reply::Call(call) = asked.reply else { panic!("{:?}", asked.reply) };
        assert_eq!((call.name.as_str(), call.arguments.as_str()), ("lookup", r#"{"q":"sim"}"#));
        let refused = chat(r#"{"model":"m","messages":[{"role":"tool","content":"x"}]}"#).unwrap_err();
        assert!(refused.contains("tool_call_id"), "{refused}");
        let anthropic =
            br#"{"model":"m","messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}"#;
        assert!(read(Endpoint::Messages, anthropic).unwrap_err().contains("tool_use_id"));
    }

    #[test]
    fn bad_bodies_are_refused_naming_the_field() {
        let cases = [
            ("", "not a valid JSON object"),
            ("[1,2]", "not a valid JSON object"),
            ("{\"model\":", "not a valid JSON object"),
            ("{}", "'model'"),
            ("{\"model\":5}", "'model' is invalid"),
            ("{\"model\":\"\"}", "'model' must not be empty"),
            ("{\"model\":\"a\",\"model\":\"b\"}", "duplicate field"),
            ("{\"model\":\"a\",\"stream\":\"yes\"}", "'stream' is invalid"),
            ("{\"model\":\"a\",\"max_tokens\":-1}", "'max_tokens' is invalid"),
            ("{\"model\":\"a\",\"stream_options\":{\"include_usage\":1}}", "'stream_options.include_usage'"),
            ("{\"model\":\"a\"} x", "not a valid JSON object"),
            ("{\"model\":\"a\",\"n\":0}", "'n' must be a positive integer"),
            ("{\"model\":\"a\",\"best_of\":0}", "'best_of'"),
            ("{\"model\":\"a\",\"messages\":{\"a\":1}}", "'messages' must be an array"),
            ("{\"model\":\"a\",\"tools\":{\"a\":1}}", "'tools' must be an array"),
            ("{\"model\":\"a\",\"tools\":[1,}", "not a valid JSON object"),
            ("{\"model\":\"a\\ud800\"}", "not a valid JSON object"),
        ];
        for (body, expected) in cases {
            let message = chat(body).unwrap_err();
            assert!(message.contains(expected), "{body}: {message}");
        }
        let completion = read(Endpoint::Completions, br#"{"model":"a","prompt":{"text":"x"}}"#).unwrap_err();
        assert!(completion.contains("'prompt' must be text or an array"), "{completion}");
        let streamed = read(Endpoint::Embeddings, br#"{"model":"a","stream":true}"#).unwrap_err();
        assert!(streamed.contains("streaming is not supported"), "{streamed}");
    }
}
