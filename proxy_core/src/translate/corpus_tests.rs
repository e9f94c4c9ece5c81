//! The translation corpus (`corpus.json`): request/response pairs in both directions,
//! each checked field by field. A case may hold a request and the upstream request it becomes,
//! an upstream answer and the client answer, an upstream event stream and the client events, an
//! upstream error body and the client's, and requests refused with the field they name.

use super::{translate_error, translate_request, translate_whole, StreamTranslator, Translation};
use bytes::BytesMut;
use serde_json::Value;

const CORPUS: &str = include_str!("corpus.json");

/// Every path where `actual` differs from `expected`, with both values.
fn differences(path: &str, expected: &Value, actual: &Value, out: &mut Vec<String>) {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            for (key, ev) in e {
                let here = format!("{path}.{key}");
                match a.get(key) {
                    Some(av) => differences(&here, ev, av, out),
                    None => out.push(format!("{here}: missing (expected {ev})")),
                }
            }
            for key in a.keys().filter(|k| !e.contains_key(*k)) {
                out.push(format!("{path}.{key}: unexpected {}", a[key]));
            }
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                differences(&format!("{path}[{i}]"), ev, av, out);
            }
        }
        _ if expected != actual => out.push(format!("{path}: expected {expected}, got {actual}")),
        _ => {}
    }
}

fn check(case: &str, what: &str, expected: &Value, actual: &Value, failures: &mut Vec<String>) {
    let mut found = Vec::new();
    differences("", expected, actual, &mut found);
    failures.extend(found.into_iter().map(|d| format!("{case} / {what}: {d}")));
}

fn translation(case: &Value) -> Translation {
    match case["translation"].as_str() {
        Some("chat->messages") => Translation::ChatToMessages,
        Some("messages->chat") => Translation::MessagesToChat,
        other => panic!("unknown translation {other:?}"),
    }
}

/// The client events a stream of upstream events becomes (`data:` payloads, JSON where they are).
fn translated_stream(t: Translation, include_usage: bool, events: &[Value]) -> Vec<Value> {
    let mut translator = StreamTranslator::new(t, include_usage, 1);
    let mut out = BytesMut::new();
    for event in events {
        translator.event(event.as_str().expect("an upstream event is a string").as_bytes(), &mut out);
    }
    let text = String::from_utf8(out.to_vec()).expect("utf-8");
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|e| {
            let data = e.lines().find_map(|l| l.strip_prefix("data: ")).expect("a data line");
            serde_json::from_str(data).unwrap_or_else(|_| Value::String(data.to_string()))
        })
        .collect()
}

#[test]
fn every_mapping_of_the_corpus_holds_field_by_field() {
    let corpus: Vec<Value> = serde_json::from_str(CORPUS).expect("the corpus is JSON");
    assert!(corpus.len() >= 10);
    let mut failures = Vec::new();
    for case in &corpus {
        let name = case["name"].as_str().expect("a name");
        let t = translation(case);
        if let (Some(request), Some(expected)) = (case.get("request"), case.get("upstream_request")) {
            match translate_request(t, request.to_string().as_bytes()) {
                Ok(body) => check(name, "request", expected, &serde_json::from_slice(&body).unwrap(), &mut failures),
                Err(e) => failures.push(format!("{name} / request: refused: {}", e.message)),
            }
        }
        if let (Some(answer), Some(expected)) = (case.get("upstream_response"), case.get("response")) {
            match translate_whole(t, answer.to_string().as_bytes(), 1) {
                Ok(body) => check(name, "response", expected, &serde_json::from_slice(&body).unwrap(), &mut failures),
                Err(e) => failures.push(format!("{name} / response: {}", e.message)),
            }
        }
        if let (Some(Value::Array(events)), Some(expected)) = (case.get("upstream_stream"), case.get("stream")) {
            let include_usage = case["include_usage"].as_bool().unwrap_or(false);
            let actual = Value::Array(translated_stream(t, include_usage, events));
            check(name, "stream", expected, &actual, &mut failures);
        }
        if let (Some(body), Some(expected)) = (case.get("upstream_error"), case.get("error")) {
            let status = case["error_status"].as_u64().expect("error_status") as u16;
            let actual = translate_error(t, status, body.to_string().as_bytes());
            check(name, "error", expected, &serde_json::from_slice(&actual).unwrap(), &mut failures);
        }
        for refusal in case.get("refused").and_then(Value::as_array).into_iter().flatten() {
            let (request, field) = (&refusal[0], refusal[1].as_str().expect("a field"));
            match translate_request(t, request.to_string().as_bytes()) {
                Ok(_) => failures.push(format!("{name} / refused: '{field}' was translated")),
                Err(e) => {
                    let param = e.param.as_deref().unwrap_or("");
                    if param != field || e.status().as_u16() != 400 {
                        failures.push(format!("{name} / refused: expected '{field}', got {} '{param}'", e.status()));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}
