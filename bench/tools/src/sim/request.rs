//! Reading a request body the way a model server does: the model, whether to stream (and
//! include the usage chunk), the output cap, the choices asked for and the prompt's length. A
//! body a model server would refuse gets a message saying which field is wrong.

use serde::Deserialize;
use serde_json::Value;

use super::prompt::prompt_tokens;
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
    let prompt_tokens = prompt_tokens(text_fields(endpoint, &body)?);
    Ok(ModelRequest {
        model,
        stream,
        include_usage: body.stream_options.and_then(|o| o.include_usage).unwrap_or(false),
        output_cap,
        n: body.n.unwrap_or(1).max(body.best_of.unwrap_or(1)),
        prompt_tokens,
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
                prompt_tokens: 2
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
            "messages":[{"role":"user","content":"abcd"}],
            "tools":[{"type":"function","function":{"name":"lookup","description":"a long description"}}]}"#;
        let tokens = |endpoint| read(endpoint, body).unwrap().prompt_tokens;
        assert_eq!(tokens(Endpoint::ChatCompletions), 1, "tools are not counted");
        assert_eq!(tokens(Endpoint::Messages), 3);
        assert_eq!(tokens(Endpoint::Completions), 1);
        assert_eq!(tokens(Endpoint::Embeddings), 2);
        let responses = br#"{"model":"m","instructions":"abcdabcd","prompt":{"id":"pmpt_1"},
            "input":[{"role":"user","content":[{"type":"input_text","text":"abcd"}]}]}"#;
        assert_eq!(read(Endpoint::Responses, responses).unwrap().prompt_tokens, 3);
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
