//! Reading the few body fields the gateway needs (model, stream, output caps, n, the text to
//! estimate) without building a DOM, and rewriting the body by splicing byte ranges: the upstream
//! model name replaces the alias, `stream_options.include_usage` is switched on, and the output
//! cap the request was reserved for is written into every cap field (or added). Every other byte
//! goes upstream exactly as the client sent it.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::attribution;
use crate::endpoint::Endpoint;
use crate::error::GatewayError;
use crate::json_str::JsonStr;
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
                while let Some(JsonStr(key)) = map.next_key::<JsonStr<'de>>()? {
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
    /// The largest of the client's output caps (`max_tokens`, `max_completion_tokens`,
    /// `max_output_tokens`): an upstream may honour any of them, so the largest is what it may
    /// produce.
    pub max_tokens: Option<u64>,
    /// Where each cap field's value is, and the value.
    cap_fields: Vec<(Range<usize>, u64)>,
    /// Choices generated per request: `n`, or `best_of` when larger (all of them are billed).
    pub n: u64,
    pub prompt: TextMeasure,
    /// The end user the request names (OpenAI `user`, Anthropic `metadata.user_id`).
    pub end_user: Option<Arc<str>>,
    close_brace: usize,
}

/// The output-cap fields of the APIs we serve; an upstream may read any of them.
const CAP_FIELDS: &[&str] = &["max_tokens", "max_completion_tokens", "max_output_tokens"];
/// Request fields whose whole JSON is prompt text to the model (tool and output schemas).
const SCHEMA_FIELDS: &[&str] = &["tools", "functions", "response_format", "tool_choice"];

fn span(body: &[u8], raw: &RawValue) -> Range<usize> {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    start..start + raw.get().len()
}

fn field_error(field: &str, message: String) -> GatewayError {
    GatewayError::invalid(message).with_param(field.to_string())
}

/// A Responses API field that makes the upstream keep or read state between requests. The gateway
/// does not relay those: it spreads a route's requests over its upstreams, so the next request
/// may reach one that never saw the first; and its tenants share an upstream account, so an id
/// from one tenant would open another's stored conversation.
fn stored_state(field: &str) -> GatewayError {
    field_error(
        field,
        format!(
            "'{field}' needs state an upstream keeps between requests, which this gateway does not relay; \
             send the whole conversation in 'input' instead"
        ),
    )
}

/// Object keys (quoted, as they appear in JSON) that name something stored in an upstream
/// account: a file, a vector store. Tenants share the account, so the object may be another's.
const STORED_REFERENCES: &[&str] = &["\"file_id\"", "\"vector_store_ids\""];

/// The first stored-object key in a raw JSON value. A quoted name followed by `:` can only be
/// a key: inside a string, its quotes would be escaped.
fn stored_reference(raw: &str) -> Option<&'static str> {
    STORED_REFERENCES
        .iter()
        .copied()
        .find(|quoted| raw.match_indices(quoted).any(|(at, q)| raw[at + q.len()..].trim_start().starts_with(':')))
}

fn parse_field<'a, T: Deserialize<'a>>(field: &str, raw: &'a RawValue, what: &str) -> Result<T, GatewayError> {
    serde_json::from_str(raw.get()).map_err(|_| field_error(field, format!("'{field}' must be {what}")))
}

pub fn peek(endpoint: Endpoint, body: Bytes) -> Result<Peeked, GatewayError> {
    // Moved into the result at the end, not cloned: the first clone of a body read into a `Vec`
    // allocates the count they share.
    let whole = body;
    let body: &[u8] = &whole;
    if body.is_empty() {
        return Err(GatewayError::invalid("request body is empty; expected a JSON object"));
    }
    let top: TopLevel<'_> = serde_json::from_slice(body)
        .map_err(|e| GatewayError::invalid(format!("request body is not a valid JSON object: {e}")))?;
    let mut peeked = Peeked {
        body: Bytes::new(),
        model: String::new(),
        model_span: 0..0,
        stream: false,
        client_include_usage: false,
        stream_options: None,
        max_tokens: None,
        cap_fields: Vec::new(),
        n: 1,
        prompt: TextMeasure::default(),
        end_user: None,
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
        if endpoint == Endpoint::Responses && matches!(key.as_ref(), "input" | "tools") {
            if let Some(quoted) = stored_reference(raw.get()) {
                let name = quoted.trim_matches('"');
                return Err(field_error(
                    key,
                    format!(
                        "'{key}' names an object stored in the upstream account ('{name}'), which this gateway \
                         does not relay: the account is shared, so it may not be yours; send the content itself"
                    ),
                ));
            }
        }
        match key.as_ref() {
            "model" => {
                let JsonStr(model) = parse_field("model", raw, "a string")?;
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
                let opts: Option<StreamOptions> =
                    parse_field("stream_options", raw, "an object whose 'include_usage' is a boolean")?;
                peeked.client_include_usage = opts.and_then(|o| o.include_usage).unwrap_or(false);
                peeked.stream_options = Some(span(body, raw));
            }
            k if CAP_FIELDS.contains(&k) => {
                let value: Option<u64> = parse_field(key, raw, "a non-negative integer")?;
                if let Some(v) = value {
                    peeked.max_tokens = Some(peeked.max_tokens.map_or(v, |m| m.max(v)));
                    peeked.cap_fields.push((span(body, raw), v));
                }
            }
            "n" | "best_of" => {
                let n: Option<u64> = parse_field(key, raw, "a positive integer")?;
                match n {
                    Some(0) => return Err(field_error(key, format!("'{key}' must be a positive integer"))),
                    Some(v) => peeked.n = peeked.n.max(v),
                    None => {}
                }
            }
            "user" if endpoint != Endpoint::Messages => {
                let user: Option<JsonStr<'_>> = parse_field("user", raw, "a string")?;
                peeked.end_user = user.map(|JsonStr(u)| attribution::end_user("user", &u)).transpose()?;
            }
            "metadata" if endpoint == Endpoint::Messages => {
                #[derive(Deserialize)]
                struct Metadata<'a> {
                    #[serde(borrow)]
                    user_id: Option<Cow<'a, str>>,
                }
                let metadata: Option<Metadata<'_>> =
                    parse_field("metadata", raw, "an object whose 'user_id' is a string")?;
                if let Some(id) = metadata.and_then(|m| m.user_id) {
                    peeked.end_user = Some(attribution::end_user("metadata.user_id", &id)?);
                }
            }
            // `null` is the same as leaving the field out.
            "previous_response_id" | "conversation" if endpoint == Endpoint::Responses && raw.get() != "null" => {
                return Err(stored_state(key));
            }
            "background" if endpoint == Endpoint::Responses => {
                let background: Option<bool> = parse_field(key, raw, "a boolean")?;
                if background == Some(true) {
                    return Err(stored_state(key));
                }
            }
            // The Responses API's output schema (`text.format`) reaches the model as prompt text.
            "text" if endpoint == Endpoint::Responses => {
                peeked.prompt.add(TextMeasure { chars: raw.get().chars().count() as u64, token_ids: 0 });
            }
            k if SCHEMA_FIELDS.contains(&k) => {
                // Tool and schema definitions reach the model as prompt text: count their JSON.
                peeked.prompt.add(TextMeasure { chars: raw.get().chars().count() as u64, token_ids: 0 });
            }
            "messages" | "prompt" | "input" | "system" | "instructions" => {
                let wanted = match endpoint {
                    Endpoint::ChatCompletions => key == "messages",
                    Endpoint::Messages => key == "messages" || key == "system",
                    Endpoint::Completions => key == "prompt",
                    Endpoint::Embeddings => key == "input",
                    Endpoint::Responses => key == "input" || key == "instructions",
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
    peeked.body = whole;
    Ok(peeked)
}

impl Peeked {
    /// The body as the client sent it.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// The body to send upstream: the model replaced by `model_json` (a JSON string literal);
    /// when `want_usage`, `stream_options.include_usage` set to true; with a `cap`, every cap
    /// field above it lowered to it, or `cap_field` added when the client sent none.
    pub fn rewrite(
        &self,
        model_json: &[u8],
        want_usage: bool,
        cap: Option<(u64, &'static str)>,
    ) -> Result<Bytes, GatewayError> {
        let mut edits: Vec<(Range<usize>, Cow<'_, [u8]>)> = vec![(self.model_span.clone(), Cow::Borrowed(model_json))];
        if let Some((cap, cap_field)) = cap {
            if self.cap_fields.is_empty() {
                let added = format!(",\"{cap_field}\":{cap}");
                edits.push((self.close_brace..self.close_brace, Cow::Owned(added.into_bytes())));
            }
            for (range, value) in &self.cap_fields {
                if *value > cap {
                    edits.push((range.clone(), Cow::Owned(cap.to_string().into_bytes())));
                }
            }
        }
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
        // Exactly the length it will have: a `Vec` whose capacity is its length becomes `Bytes`
        // without an allocation of its own.
        let added: usize = edits.iter().map(|(_, b)| b.len()).sum();
        let removed: usize = edits.iter().map(|(range, _)| range.len()).sum();
        let mut out = Vec::with_capacity((self.body.len() + added).saturating_sub(removed));
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
        String::from_utf8(p.rewrite(b"\"up-model\"", want_usage, None).unwrap().to_vec()).unwrap()
    }

    #[test]
    fn responses_read_input_and_instructions_and_cap_max_output_tokens() {
        let body = r#"{"model":"a","instructions":"abcdefgh","input":[{"role":"user","content":[{"type":"input_text","text":"abcd"}]}],
            "stream":true,"text":{"format":{"type":"text"}},"messages":"ignored here","previous_response_id":null}"#;
        let p = peek(Endpoint::Responses, Bytes::from(body)).unwrap();
        assert!(p.stream);
        // 12 characters of text, and the output schema's JSON.
        let schema = r#"{"format":{"type":"text"}}"#.chars().count() as u64;
        assert_eq!(p.prompt, TextMeasure { chars: 12 + schema, token_ids: 0 });
        let capped = p.rewrite(b"\"up\"", false, Some((64, "max_output_tokens"))).unwrap();
        let sent: serde_json::Value = serde_json::from_slice(&capped).unwrap();
        assert_eq!((sent["model"].as_str(), sent["max_output_tokens"].as_u64()), (Some("up"), Some(64)));
        let asked =
            peek(Endpoint::Responses, Bytes::from_static(br#"{"model":"a","max_output_tokens":100000}"#)).unwrap();
        assert_eq!(asked.max_tokens, Some(100000));
        let lowered = asked.rewrite(b"\"up\"", false, Some((50, "max_output_tokens"))).unwrap();
        assert_eq!(&lowered[..], br#"{"model":"up","max_output_tokens":50}"#);
    }

    #[test]
    fn responses_that_need_upstream_state_are_refused_naming_the_field() {
        for (body, field) in [
            (r#"{"model":"a","previous_response_id":"resp_1"}"#, "previous_response_id"),
            (r#"{"model":"a","conversation":{"id":"conv_1"}}"#, "conversation"),
            (r#"{"model":"a","conversation":"conv_1"}"#, "conversation"),
            (r#"{"model":"a","background":true}"#, "background"),
        ] {
            let e = peek(Endpoint::Responses, Bytes::from(body)).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(field), "{body}");
            assert!(e.message.contains("'input'"), "{}", e.message);
        }
        let e = peek(Endpoint::Responses, Bytes::from_static(br#"{"model":"a","background":"yes"}"#)).unwrap_err();
        assert_eq!(e.param.as_deref(), Some("background"));
        assert!(
            peek(Endpoint::Responses, Bytes::from_static(br#"{"model":"a","background":false,"store":false}"#)).is_ok()
        );
        for (body, field) in [
            (
                r#"{"model":"a","input":[{"role":"user","content":[{"type":"input_file","file_id" : "file-1"}]}]}"#,
                "input",
            ),
            (r#"{"model":"a","tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}"#, "tools"),
        ] {
            let e = peek(Endpoint::Responses, Bytes::from(body)).unwrap_err();
            assert_eq!(e.param.as_deref(), Some(field), "{body}");
            assert!(e.message.contains("stored in the upstream account"), "{}", e.message);
        }
        // The names as text are text.
        let quoted = r#"{"model":"a","input":"say \"file_id\": and \"vector_store_ids\"","tools":["file_id"]}"#;
        assert!(peek(Endpoint::Responses, Bytes::from(quoted)).is_ok());
        // On chat the names mean nothing to the gateway.
        assert!(
            peek(Endpoint::ChatCompletions, Bytes::from_static(br#"{"model":"a","previous_response_id":"x"}"#)).is_ok()
        );
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
        // An object of the wrong shape inside: the message says what the object must hold.
        let nested = [
            (Endpoint::ChatCompletions, r#"{"model":"a","stream_options":{"include_usage":"yes"}}"#, "'include_usage'"),
            (Endpoint::Messages, r#"{"model":"a","max_tokens":5,"metadata":{"user_id":5}}"#, "'user_id'"),
        ];
        for (endpoint, body, names) in nested {
            let e = peek(endpoint, Bytes::from(body)).unwrap_err();
            assert!(e.message.contains(names), "{body}: {}", e.message);
        }
    }

    #[test]
    fn the_end_user_is_read_in_each_vocabulary_and_bounded() {
        let user = |endpoint, body: &str| peek(endpoint, Bytes::from(body.to_string())).map(|p| p.end_user);
        let openai = user(Endpoint::ChatCompletions, r#"{"model":"a","user":"u-1"}"#).unwrap();
        assert_eq!(openai.as_deref(), Some("u-1"));
        let anthropic = user(Endpoint::Messages, r#"{"model":"a","metadata":{"user_id":"u-\u00e9"}}"#).unwrap();
        assert_eq!(anthropic.as_deref(), Some("u-é"));
        // Each API's own field only: OpenAI's `metadata` is something else.
        assert_eq!(user(Endpoint::ChatCompletions, r#"{"model":"a","metadata":{"user_id":"x"}}"#).unwrap(), None);
        assert_eq!(user(Endpoint::Messages, r#"{"model":"a","user":"x"}"#).unwrap(), None);
        let long = format!(r#"{{"model":"a","user":"{}"}}"#, "u".repeat(attribution::MAX_END_USER + 1));
        let refused = user(Endpoint::ChatCompletions, &long).unwrap_err();
        assert_eq!(refused.param.as_deref(), Some("user"));
        let refused = user(Endpoint::Messages, r#"{"model":"a","metadata":{"user_id":7}}"#).unwrap_err();
        assert_eq!(refused.param.as_deref(), Some("metadata"));
        assert!(user(Endpoint::ChatCompletions, r#"{"model":"a","user":["x"]}"#).is_err());
    }

    #[test]
    fn the_largest_cap_is_reserved_and_every_cap_is_lowered_to_what_was_reserved() {
        let body = r#"{"model":"a","max_tokens":1,"max_completion_tokens":60000}"#;
        let p = peek(Endpoint::ChatCompletions, Bytes::from(body)).unwrap();
        assert_eq!(p.max_tokens, Some(60000));
        let out = p.rewrite(b"\"m\"", false, Some((50, "max_tokens"))).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["max_tokens"], 1);
        assert_eq!(v["max_completion_tokens"], 50);
        let none = peek(Endpoint::Messages, Bytes::from_static(br#"{"model":"a","messages":[]}"#)).unwrap();
        let out = none.rewrite(b"\"m\"", true, Some((4096, "max_tokens"))).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["max_tokens"], 4096);
    }

    #[test]
    fn best_of_and_tool_schemas_count() {
        let p = peek(Endpoint::Completions, Bytes::from_static(br#"{"model":"a","prompt":"x","n":2,"best_of":5}"#))
            .unwrap();
        assert_eq!(p.n, 5);
        let tools = r#"{"model":"a","messages":[],"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]}"#;
        let with = peek(Endpoint::ChatCompletions, Bytes::from(tools)).unwrap();
        assert!(with.prompt.tokens() > 20, "{}", with.prompt.tokens());
    }

    mod properties {
        use proptest::prelude::*;
        use serde_json::{json, Map, Value};

        use super::super::*;

        fn scalar() -> impl Strategy<Value = Value> {
            prop_oneof![
                Just(Value::Null),
                any::<bool>().prop_map(Value::Bool),
                any::<i64>().prop_map(|n| json!(n)),
                "[a-z \"\\\\\u{e9}]{0,8}".prop_map(Value::String),
            ]
        }

        fn extra() -> impl Strategy<Value = Value> {
            scalar().prop_recursive(3, 16, 4, |inner| {
                prop_oneof![
                    prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                    prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                        .prop_map(|m| Value::Object(m.into_iter().collect())),
                ]
            })
        }

        fn request() -> impl Strategy<Value = Map<String, Value>> {
            (
                "[a-z0-9/-]{1,12}",
                prop::option::of(0u64..200_000),
                prop::option::of(0u64..200_000),
                prop::option::of(any::<bool>()),
                prop::option::of(prop::option::of(prop::collection::btree_map("[a-z_]{1,8}", scalar(), 0..3))),
                prop::collection::btree_map("[a-z]{3,9}", extra(), 0..4),
            )
                .prop_map(|(model, max_tokens, max_completion, stream, options, extras)| {
                    let mut m = Map::new();
                    for (k, v) in extras {
                        if !FORBIDDEN_FIELDS.contains(&k.as_str())
                            && !["model", "stream", "messages", "best_of"].contains(&k.as_str())
                        {
                            m.insert(k, v);
                        }
                    }
                    m.insert("model".into(), json!(model));
                    m.insert("messages".into(), json!([{"role": "user", "content": "hi"}]));
                    if let Some(v) = max_tokens {
                        m.insert("max_tokens".into(), json!(v));
                    }
                    if let Some(v) = max_completion {
                        m.insert("max_completion_tokens".into(), json!(v));
                    }
                    if let Some(v) = stream {
                        m.insert("stream".into(), json!(v));
                    }
                    if let Some(o) = options {
                        m.insert(
                            "stream_options".into(),
                            o.map_or(Value::Null, |o| Value::Object(o.into_iter().collect())),
                        );
                    }
                    m.remove("n");
                    m.remove("max_output_tokens");
                    m
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(crate::test_cases(256)))]

            /// The rewritten body parses as the same JSON with only the intended fields changed.
            #[test]
            fn the_splice_changes_only_what_it_means_to(
                req in request(),
                pretty in any::<bool>(),
                want_usage in any::<bool>(),
                cap in prop::option::of(1u64..100_000),
            ) {
                let text = if pretty { serde_json::to_string_pretty(&req) } else { serde_json::to_string(&req) };
                let body = Bytes::from(text.unwrap());
                let peeked = peek(Endpoint::ChatCompletions, body).unwrap();
                let out = peeked.rewrite(b"\"upstream-model\"", want_usage, cap.map(|c| (c, "max_tokens"))).unwrap();
                let got: Map<String, Value> = serde_json::from_slice(&out).unwrap();

                let mut want = req.clone();
                want.insert("model".into(), json!("upstream-model"));
                if want_usage && !peeked.client_include_usage {
                    let mut opts = match want.get("stream_options") {
                        Some(Value::Object(o)) => o.clone(),
                        _ => Map::new(),
                    };
                    opts.insert("include_usage".into(), json!(true));
                    want.insert("stream_options".into(), Value::Object(opts));
                }
                if let Some(cap) = cap {
                    let mut any = false;
                    for field in ["max_tokens", "max_completion_tokens"] {
                        if let Some(v) = want.get(field).and_then(Value::as_u64) {
                            any = true;
                            want.insert(field.into(), json!(v.min(cap)));
                        }
                    }
                    if !any {
                        want.insert("max_tokens".into(), json!(cap));
                    }
                }
                prop_assert_eq!(got, want);
            }

            /// Arbitrary bytes never panic the peek or the splice, and what the splice makes parses.
            #[test]
            fn arbitrary_bodies_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300), cap in 0u64..10) {
                if let Ok(peeked) = peek(Endpoint::ChatCompletions, Bytes::from(bytes)) {
                    let out = peeked.rewrite(b"\"m\"", true, Some((cap, "max_tokens"))).unwrap();
                    prop_assert!(serde_json::from_slice::<Value>(&out).is_ok());
                }
            }
        }
    }
}
