//! A tool round trip against the simulator over HTTP, in both vocabularies, streamed and whole:
//! the call it makes, the usage and the record it reports, faults on a call's stream, and the
//! refusal of a result that names no call.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{json, Value};
use sluicegate_tools::sim::{SimArgs, Simulator};

fn record_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluicegate-tools-{name}-{}.jsonl", std::process::id()))
}

fn start(record: &std::path::Path) -> Simulator {
    let _ = std::fs::remove_file(record);
    let args = ["--port", "0", "--ttft-ms", "0", "--itl-ms", "0", "--record", record.to_str().unwrap()];
    Simulator::start(SimArgs::parse_from_args(&args.map(String::from)).unwrap()).unwrap()
}

/// The status and the body (de-chunked) of one HTTP/1.1 request.
fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let body = body.to_string();
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nConnection: close\r\n\
         Content-Length: {}\r\n{extra}\r\n{body}",
        body.len()
    );
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn.write_all(request.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let _ = conn.read_to_end(&mut seen);
    let seen = String::from_utf8(seen).unwrap();
    let (head, mut rest) = seen.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    if !head.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        return (status, rest.to_string());
    }
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || tail.len() < size {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    (status, out)
}

/// The `data:` of each event of a stream, `[DONE]` left out.
fn events(stream: &str) -> Vec<Value> {
    stream
        .split("\n\n")
        .filter_map(|event| event.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap_or_else(|e| panic!("{e}: {data}")))
        .collect()
}

fn records(path: &std::path::Path) -> Vec<Value> {
    let lines = std::fs::read_to_string(path).unwrap();
    let _ = std::fs::remove_file(path);
    lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

const CHAT: &str = "/v1/chat/completions";
const MESSAGES: &str = "/v1/messages";
const EXPECTED: &str = r#"{"city":"sim","unit":"celsius"}"#;

fn openai_tools() -> Value {
    json!([{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "f"]}},
        "required": ["city", "unit"],
    }}}])
}

fn anthropic_tools() -> Value {
    json!([{"name": "get_weather", "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "f"]}},
        "required": ["city", "unit"],
    }}])
}

#[test]
fn openai_round_trip_whole_and_streamed() {
    let record = record_path("tools-openai");
    let sim = start(&record);
    let user = json!({"role": "user", "content": "weather in Paris?"});
    let ask = json!({"model": "m", "messages": [user], "tools": openai_tools()});
    let (status, body) = post(sim.addr(), CHAT, &[("x-request-id", "whole")], &ask);
    assert_eq!(status, 200, "{body}");
    let whole: Value = serde_json::from_str(&body).unwrap();
    let choice = &whole["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], EXPECTED);
    assert!(call["id"].as_str().unwrap().starts_with("call_"));
    let whole_tokens = whole["usage"]["completion_tokens"].as_u64().unwrap();

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let (status, body) = post(sim.addr(), CHAT, &[("x-request-id", "stream")], &streamed);
    assert_eq!(status, 200, "{body}");
    assert!(body.ends_with("data: [DONE]\n\n"));
    let chunks = events(&body);
    let calls: Vec<&Value> = chunks.iter().filter_map(|c| c.pointer("/choices/0/delta/tool_calls/0")).collect();
    assert_eq!(calls[0]["function"]["name"], "get_weather");
    let arguments: String = calls.iter().filter_map(|c| c["function"]["arguments"].as_str()).collect();
    assert_eq!(arguments, EXPECTED);
    let usage = &chunks.last().unwrap()["usage"];
    // Each chunk carrying the call is one token, the same count as the whole answer's.
    assert_eq!(usage["completion_tokens"].as_u64(), Some(calls.len() as u64));
    assert_eq!(whole_tokens, calls.len() as u64);

    // The result goes back; the answer is its text.
    let assistant = choice["message"].clone();
    let result = json!({"role": "tool", "tool_call_id": call["id"], "content": "18C and rain"});
    let round = json!({"model": "m", "tools": openai_tools(), "messages": [user, assistant, result]});
    let (_, body) = post(sim.addr(), CHAT, &[("x-request-id", "result")], &round);
    let answer: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(answer["choices"][0]["message"]["content"], "tool result: 18C and rain");
    assert_eq!(answer["choices"][0]["finish_reason"], "stop");
    assert_eq!(answer["usage"]["completion_tokens"], 5, "tool, result:, 18C, and, rain");
    let mut round_stream = round.clone();
    round_stream["stream"] = json!(true);
    let (_, body) = post(sim.addr(), CHAT, &[], &round_stream);
    let text: String =
        events(&body).iter().filter_map(|c| c.pointer("/choices/0/delta/content").and_then(Value::as_str)).collect();
    assert_eq!(text, "tool result: 18C and rain");

    sim.stop(Duration::from_secs(1));
    let rows = records(&record);
    let by_id = |id: &str| rows.iter().find(|r| r["request_id"] == id).unwrap().clone();
    assert_eq!(by_id("whole")["completion_tokens"].as_u64(), Some(whole_tokens));
    assert_eq!(by_id("stream")["completion_tokens"].as_u64(), Some(whole_tokens));
    // The prompt counts the tools' JSON as sent.
    let tools_chars = openai_tools().to_string().chars().count() as u64;
    assert_eq!(by_id("whole")["prompt_tokens"].as_u64(), Some((17 + tools_chars).div_ceil(4)));
    assert_eq!(by_id("result")["outcome"], "complete");
}

#[test]
fn anthropic_round_trip_whole_and_streamed() {
    let record = record_path("tools-anthropic");
    let sim = start(&record);
    let user = json!({"role": "user", "content": "weather in Paris?"});
    let ask = json!({"model": "m", "max_tokens": 1024, "messages": [user], "tools": anthropic_tools()});
    let (status, body) = post(sim.addr(), MESSAGES, &[], &ask);
    assert_eq!(status, 200, "{body}");
    let whole: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(whole["stop_reason"], "tool_use");
    let block = &whole["content"][0];
    assert_eq!((block["type"].as_str(), block["name"].as_str()), (Some("tool_use"), Some("get_weather")));
    assert_eq!(block["input"], serde_json::from_str::<Value>(EXPECTED).unwrap());
    assert!(block["id"].as_str().unwrap().starts_with("toolu_"));

    let mut streamed = ask.clone();
    streamed["stream"] = json!(true);
    let (_, body) = post(sim.addr(), MESSAGES, &[], &streamed);
    let stream = events(&body);
    let kinds: Vec<&str> = stream.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"message_start"));
    assert_eq!(kinds.last(), Some(&"message_stop"));
    assert_eq!(stream[1]["content_block"]["type"], "tool_use");
    let pieces: Vec<&str> = stream.iter().filter_map(|e| e.pointer("/delta/partial_json")?.as_str()).collect();
    assert!(pieces.len() > 1);
    assert_eq!(pieces.concat(), EXPECTED);
    let message_delta = stream.iter().find(|e| e["type"] == "message_delta").unwrap();
    assert_eq!(message_delta["delta"]["stop_reason"], "tool_use");
    assert_eq!(message_delta["usage"]["output_tokens"].as_u64(), Some(pieces.len() as u64));
    assert_eq!(whole["usage"]["output_tokens"].as_u64(), Some(pieces.len() as u64));

    let assistant = json!({"role": "assistant", "content": [block]});
    let result = json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": block["id"], "content": [{"type": "text", "text": "18C"}]}]});
    let round = json!({"model": "m", "max_tokens": 1024, "tools": anthropic_tools(),
        "messages": [user, assistant, result], "stream": true});
    let (_, body) = post(sim.addr(), MESSAGES, &[], &round);
    let stream = events(&body);
    let text: String = stream.iter().filter_map(|e| e.pointer("/delta/text")?.as_str()).collect();
    assert_eq!(text, "tool result: 18C");
    assert!(stream.iter().any(|e| e.pointer("/delta/stop_reason") == Some(&json!("end_turn"))));
    sim.stop(Duration::from_secs(1));
    let _ = records(&record);
}

#[test]
fn faults_and_caps_apply_to_a_call() {
    let record = record_path("tools-faults");
    let sim = start(&record);
    let ask = json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}],
        "tools": openai_tools()});
    let (_, body) = post(sim.addr(), CHAT, &[("x-request-id", "cut"), ("x-sim-fault", "cut,after=2")], &ask);
    assert_eq!(body.matches("\"tool_calls\"").count(), 2, "{body}");
    assert!(!body.contains("[DONE]"));
    let (_, body) = post(sim.addr(), CHAT, &[("x-sim-fault", "malformed,after=1")], &ask);
    assert!(body.contains("unterminated"));

    // A call longer than the cap is cut at it.
    let mut capped = ask.clone();
    capped["stream"] = json!(false);
    capped["max_tokens"] = json!(2);
    let (_, body) = post(sim.addr(), CHAT, &[("x-sim-echo", "1")], &capped);
    let whole: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(whole["choices"][0]["finish_reason"], "length");
    assert_eq!(whole["usage"]["completion_tokens"], 2);
    assert!(whole["sim_request_body"].as_str().unwrap().contains("get_weather"), "x-sim-echo still applies");

    // `tool_choice: none` answers with text.
    let mut none = capped.clone();
    none["tool_choice"] = json!("none");
    let (_, body) = post(sim.addr(), CHAT, &[], &none);
    let whole: Value = serde_json::from_str(&body).unwrap();
    assert!(whole["choices"][0]["message"]["content"].is_string());
    sim.stop(Duration::from_secs(1));
    let rows = records(&record);
    let cut = rows.iter().find(|r| r["request_id"] == "cut").unwrap();
    assert_eq!((cut["outcome"].as_str(), cut["completion_tokens"].as_u64()), (Some("cut"), Some(2)));
}

#[test]
fn results_naming_no_call_are_refused_in_each_api_format() {
    let record = record_path("tools-refused");
    let sim = start(&record);
    let openai = json!({"model": "m", "messages": [{"role": "tool", "content": "x"}]});
    let (status, body) = post(sim.addr(), CHAT, &[], &openai);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 400);
    assert_eq!(error["error"]["type"], "invalid_request_error");
    assert!(error["error"]["message"].as_str().unwrap().contains("tool_call_id"));
    let anthropic = json!({"model": "m", "max_tokens": 10, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]});
    let (status, body) = post(sim.addr(), MESSAGES, &[], &anthropic);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status, 400);
    assert_eq!(
        (error["type"].as_str(), error["error"]["type"].as_str()),
        (Some("error"), Some("invalid_request_error"))
    );
    assert!(error["error"]["message"].as_str().unwrap().contains("tool_use_id"));
    sim.stop(Duration::from_secs(1));
    let rows = records(&record);
    assert!(rows.iter().all(|r| r["outcome"] == "bad_request" && r["status"] == 400));
}
