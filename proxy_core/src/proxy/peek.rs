//! Reading the few body fields the gateway needs (model, stream, max tokens, n, the text to
//! estimate) without building a DOM, and rewriting the body by splicing byte ranges: the upstream
//! model name replaces the alias and `stream_options.include_usage` is switched on. Every other
//! byte goes upstream exactly as the client sent it.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::endpoint::Endpoint;
use crate::error::GatewayError;
use crate::tokens::{measure_json, TextMeasure};

/// Body fields that could redirect the request or smuggle credentials; refused outright.
const FORBIDDEN_FIELDS: &[&str] = &[
    "api_base",
    "base_url",
    "api_key",
    "api_version",
    "azure_endpoint",
    "custom_llm_provider",
    "extra_headers",
    "proxy",
];

struct TopLevel<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'de> Deserialize<'de> for TopLevel<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = TopLevel<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8));
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let value: &'de RawValue = map.next_value()?;
                    fields.push((key, value));
                }
                Ok(TopLevel(fields))
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// The fields of a request body the gateway acts on, with the body itself (owned, so an admitted
/// request can outlive the handler that parsed it).
#[derive(Debug, Clone)]
pub struct Peeked {
    body: Bytes,
    pub model: String,
    model_span: Range<usize>,
    pub stream: bool,
    /// The client itself asked for the usage chunk of a stream.
    pub client_include_usage: bool,
    stream_options: Option<Range<usize>>,
    pub max_tokens: Option<u64>,
    pub n: u64,
    pub prompt: TextMeasure,
    close_brace: usize,
}

fn span(body: &[u8], raw: &RawValue) -> Range<usize> {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    start..start + raw.get().len()
}

fn field_error(field: &str, message: String) -> GatewayError {
    GatewayError::invalid(message).with_param(field.to_string())
}

fn parse_field<'a, T: Deserialize<'a>>(field: &str, raw: &'a RawValue, what: &str) -> Result<T, GatewayError> {
    serde_json::from_str(raw.get()).map_err(|_| field_error(field, format!("'{field}' must be {what}")))
}

pub fn peek(endpoint: Endpoint, body: Bytes) -> Result<Peeked, GatewayError> {
    let top_body = body.clone();
    let body: &[u8] = &top_body;
    if body.is_empty() {
        return Err(GatewayError::invalid("request body is empty; expected a JSON object"));
    }
    let top: TopLevel<'_> = serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid(format!("request body is not a valid JSON object: {e}")))?;
    let mut peeked = Peeked {
        body: top_body.clone(),
        model: String::new(),
        model_span: 0..0,
        stream: false,
        client_include_usage: false,
        stream_options: None,
        max_tokens: None,
        n: 1,
        prompt: TextMeasure::default(),
        close_brace: body
            .iter()
            .rposition(|b| *b == b'}')
            .ok_or_else(|| GatewayError::invalid("request body is not a JSON object"))?,
    };
    let mut seen_model = false;
    for (i, (key, raw)) in top.0.iter().enumerate() {
        if top.0[..i].iter().any(|(k, _)| k == key) {
            return Err(field_error(key, format!("duplicate field '{key}'")));
        }
        if FORBIDDEN_FIELDS.contains(&key.as_ref()) {
            return Err(field_error(key, format!("field '{key}' is not allowed: upstreams are chosen by the gateway")));
        }
        match key.as_ref() {
            "model" => {
                let model: Cow<'_, str> = parse_field("model", raw, "a string")?;
                if model.is_empty() {
                    return Err(field_error("model", "'model' must not be empty".into()));
                }
                peeked.model = model.into_owned();
                peeked.model_span = span(body, raw);
                seen_model = true;
            }
            "stream" => {
                let stream: Option<bool> = parse_field("stream", raw, "a boolean")?;
                peeked.stream = stream.unwrap_or(false);
            }
            "stream_options" => {
                #[derive(Deserialize)]
                struct StreamOptions {
                    include_usage: Option<bool>,
                }
                let opts: Option<StreamOptions> = parse_field("stream_options", raw, "an object")?;
                peeked.client_include_usage = opts.and_then(|o| o.include_usage).unwrap_or(false);
                peeked.stream_options = Some(span(body, raw));
            }
            "max_tokens" | "max_completion_tokens" | "max_output_tokens" => {
                let value: Option<u64> = parse_field(key, raw, "a non-negative integer")?;
                if let Some(v) = value {
                    peeked.max_tokens = Some(peeked.max_tokens.map_or(v, |m| m.min(v)));
                }
            }
            "n" => {
                let n: Option<u64> = parse_field("n", raw, "a positive integer")?;
                match n {
                    Some(0) => return Err(field_error("n", "'n' must be a positive integer".into())),
                    Some(v) => peeked.n = v,
                    None => {}
                }
            }
            "messages" | "prompt" | "input" | "system" => {
                let wanted = match endpoint {
                    Endpoint::ChatCompletions => key == "messages",
                    Endpoint::Messages => key == "messages" || key == "system",
                    Endpoint::Completions => key == "prompt",
                    Endpoint::Embeddings => key == "input",
                    Endpoint::Models => false,
                };
                if wanted {
                    let first = raw.get().as_bytes().first().copied();
                    let shape_ok = match key.as_ref() {
                        "messages" => first == Some(b'['),
                        _ => matches!(first, Some(b'[' | b'"')),
                    };
                    if !shape_ok {
                        let what = if key == "messages" { "an array" } else { "text or an array" };
                        return Err(field_error(key, format!("'{key}' must be {what}")));
                    }
                    let m = measure_json(raw.get()).map_err(|_| {
                        field_error(key, format!("'{key}' must be text, a list of messages, or token ids"))
                    })?;
                    peeked.prompt.add(m);
                }
            }
            _ => {}
        }
    }
    if !seen_model {
        return Err(field_error("model", "you must provide a 'model' parameter".into()));
    }
    if peeked.stream && !endpoint.can_stream() {
        return Err(field_error("stream", format!("streaming is not supported on {}", endpoint.as_str())));
    }
    Ok(peeked)
}

impl Peeked {
    /// The body to send upstream: the model replaced by `model_json` (a JSON string literal) and,
    /// when `want_usage`, `stream_options.include_usage` set to true.
    pub fn rewrite(&self, model_json: &[u8], want_usage: bool) -> Result<Bytes, GatewayError> {
        let mut edits: Vec<(Range<usize>, Cow<'_, [u8]>)> = vec![(self.model_span.clone(), Cow::Borrowed(model_json))];
        if want_usage && !self.client_include_usage {
            match &self.stream_options {
                Some(range) => {
                    let mut map: serde_json::Map<String, serde_json::Value> =
                        serde_json::from_slice::<Option<_>>(&self.body[range.clone()])
                            .ok()
                            .flatten()
                            .unwrap_or_default();
                    map.insert("include_usage".into(), serde_json::Value::Bool(true));
                    let bytes = serde_json::to_vec(&map)
                        .map_err(|e| GatewayError::new(crate::error::ErrorKind::Internal, e.to_string()))?;
                    edits.push((range.clone(), Cow::Owned(bytes)));
                }
                None => edits.push((
                    self.close_brace..self.close_brace,
                    Cow::Borrowed(b",\"stream_options\":{\"include_usage\":true}"),
                )),
            }
        }
        edits.sort_by_key(|(range, _)| range.start);
        let extra: usize = edits.iter().map(|(_, b)| b.len()).sum();
        let mut out = Vec::with_capacity(self.body.len() + extra);
        let mut at = 0;
        for (range, replacement) in &edits {
            out.extend_from_slice(&self.body[at..range.start]);
            out.extend_from_slice(replacement);
            at = range.end;
        }
        out.extend_from_slice(&self.body[at..]);
        Ok(Bytes::from(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(body: &str, want_usage: bool) -> String {
        let p = peek(Endpoint::ChatCompletions, Bytes::from(body.to_string())).unwrap();
        String::from_utf8(p.rewrite(b"\"up-model\"", want_usage).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn model_is_spliced_and_the_rest_is_untouched() {
        let body = r#"{ "messages": [{"role":"user","content":"hello"}], "model" : "alias",  "x": 1 }"#;
        assert_eq!(
            rewrite(body, false),
            r#"{ "messages": [{"role":"user","content":"hello"}], "model" : "up-model",  "x": 1 }"#
        );
        let p = peek(Endpoint::ChatCompletions, Bytes::from(body)).unwrap();
        assert_eq!(p.model, "alias");
        assert_eq!(p.prompt.tokens(), 2);
    }

    #[test]
    fn include_usage_is_added_merged_or_left_alone() {
        let added = rewrite(r#"{"model":"a","stream":true}"#, true);
        assert_eq!(added, r#"{"model":"up-model","stream":true,"stream_options":{"include_usage":true}}"#);
        let merged = rewrite(r#"{"model":"a","stream":true,"stream_options":{"x":1}}"#, true);
        let v: serde_json::Value = serde_json::from_str(&merged).unwrap();
        assert_eq!(v["stream_options"], serde_json::json!({"x":1,"include_usage":true}));
        let nulled = rewrite(r#"{"model":"a","stream_options":null}"#, true);
        assert!(nulled.contains(r#""stream_options":{"include_usage":true}"#));
        let asked = r#"{"model":"up-model","stream_options":{"include_usage":true}}"#;
        assert_eq!(rewrite(r#"{"model":"a","stream_options":{"include_usage":true}}"#, true), asked);
    }

    #[test]
    fn bad_bodies_name_the_field() {
        let cases: &[(&str, Option<&str>)] = &[
            ("", None),
            ("[1,2]", None),
            ("{\"model\":", None),
            ("{}", Some("model")),
            ("{\"model\":5}", Some("model")),
            ("{\"model\":\"\"}", Some("model")),
            ("{\"model\":\"a\",\"stream\":\"yes\"}", Some("stream")),
            ("{\"model\":\"a\",\"max_tokens\":-1}", Some("max_tokens")),
            ("{\"model\":\"a\",\"n\":0}", Some("n")),
            ("{\"model\":\"a\",\"messages\":{\"a\":1}}", Some("messages")),
            ("{\"model\":\"a\",\"model\":\"b\"}", Some("model")),
            ("{\"model\":\"a\",\"api_base\":\"http://evil\"}", Some("api_base")),
        ];
        for (body, param) in cases {
            let e = peek(Endpoint::ChatCompletions, Bytes::from(*body)).unwrap_err();
            assert_eq!(e.kind, crate::error::ErrorKind::InvalidRequest, "{body}");
            if let Some(p) = param {
                assert_eq!(e.param.as_deref(), Some(*p), "{body}");
            }
        }
        assert!(peek(Endpoint::ChatCompletions, Bytes::from_static(b"{\"model\":\"a\\ud800\"}")).is_err());
        assert!(peek(Endpoint::Embeddings, Bytes::from_static(b"{\"model\":\"a\",\"stream\":true}")).is_err());
    }
}
