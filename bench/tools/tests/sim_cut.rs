//! A cut stream puts on the wire every token the simulator records as sent. With no gap between
//! tokens their deadlines have all passed when the stream is polled, so the frames and the cut
//! arrive in one turn of hyper's write loop: the case where failing the body lost the frames
//! still in hyper's write buffer (as CPU load makes happen with any gap).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use sluicegate_tools::sim::{SimArgs, Simulator};

fn record_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluicegate-tools-{name}-{}.jsonl", std::process::id()))
}

/// Send one streamed chat request over HTTP/1.1 and read until the server closes.
fn cut_stream(addr: std::net::SocketAddr, request_id: &str, after: u32) -> String {
    let body = r#"{"model":"m","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"abcdefgh"}]}"#;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nx-request-id: {request_id}\r\nx-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\n\
         x-sim-fault: cut,after={after}\r\n\r\n",
        body.len()
    );
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn.write_all(format!("{head}{body}").as_bytes()).unwrap();
    let mut seen = Vec::new();
    // A reset (the failure this guards against loses data) ends the read as an error.
    let _ = conn.read_to_end(&mut seen);
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn every_token_recorded_before_a_cut_reaches_the_client() {
    let record = record_path("cut");
    let _ = std::fs::remove_file(&record);
    let args = ["--port", "0", "--record", record.to_str().unwrap()].map(String::from);
    let sim = Simulator::start(SimArgs::parse_from_args(&args).unwrap()).unwrap();
    let rounds = 20;
    for round in 0..rounds {
        let after = 1 + round % 5;
        let seen = cut_stream(sim.addr(), &format!("cut-{round}"), after);
        assert!(seen.starts_with("HTTP/1.1 200"), "{seen}");
        let tokens = seen.matches("\"content\":\" ").count();
        assert_eq!(tokens, after as usize, "round {round}: the client saw\n{seen}");
        assert!(!seen.contains("[DONE]") && !seen.ends_with("0\r\n\r\n"), "a cut hides no clean end:\n{seen}");
    }
    sim.stop(Duration::from_secs(1));
    let lines = std::fs::read_to_string(&record).unwrap();
    let _ = std::fs::remove_file(&record);
    let rows: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(rows.len(), rounds as usize);
    for row in rows {
        let round: u32 = row["request_id"].as_str().unwrap()["cut-".len()..].parse().unwrap();
        assert_eq!(row["outcome"], "cut");
        assert_eq!(row["completion_tokens"], u64::from(1 + round % 5), "{row}");
    }
}
