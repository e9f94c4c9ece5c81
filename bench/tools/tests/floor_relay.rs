//! The floor relay (`bench.floor`'s yardstick) relays a request to its upstream and the answer
//! back, on both of its schedulers, over one keep-alive connection; an upstream that is away is
//! a 502, not a hang.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluicegate_tools::sim::{SimArgs, Simulator};

struct Relay(Child);

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The relay in front of `upstream`, and the address it listens on (from its first line).
fn start_relay(upstream: &str, extra: &[&str]) -> (Relay, SocketAddr) {
    let child = Command::new(env!("CARGO_BIN_EXE_floor_relay"))
        .args(["127.0.0.1:0", upstream])
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut relay = Relay(child);
    let mut line = String::new();
    BufReader::new(relay.0.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let addr = line.trim().strip_prefix("listening on http://").unwrap_or_else(|| panic!("{line:?}"));
    let addr = addr.parse().unwrap();
    (relay, addr)
}

/// One request on `conn`; the answer's status line and body (the answer has a length).
fn exchange(conn: &mut TcpStream, body: &str) -> (String, String) {
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: relay\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nx-sim-ttft-ms: 0\r\nx-sim-itl-ms: 0\r\n\r\n",
        body.len()
    );
    conn.write_all(format!("{head}{body}").as_bytes()).unwrap();
    let mut reader = BufReader::new(conn);
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap();
            }
        }
    }
    let mut answer = vec![0; length];
    reader.read_exact(&mut answer).unwrap();
    (status.trim().to_string(), String::from_utf8(answer).unwrap())
}

#[test]
fn requests_are_relayed_both_ways_on_either_scheduler() {
    let sim = Simulator::start(SimArgs::parse_from_args(&["--port".into(), "0".into()]).unwrap()).unwrap();
    let body = r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"abcdefgh"}]}"#;
    for extra in [&[][..], &["--current-thread"][..]] {
        let (_relay, addr) = start_relay(&sim.addr().to_string(), extra);
        let mut conn = TcpStream::connect(addr).unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        for _ in 0..3 {
            let (status, answer) = exchange(&mut conn, body);
            assert_eq!(status, "HTTP/1.1 200 OK", "{extra:?}: {answer}");
            let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
            assert_eq!(answer["object"], "chat.completion", "{answer}");
        }
    }
    sim.stop(Duration::from_secs(1));
}

#[test]
fn an_upstream_that_is_away_is_a_bad_gateway() {
    // A port nothing listens on: bound, then released.
    let away = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (_relay, addr) = start_relay(&away.to_string(), &[]);
    let mut conn = TcpStream::connect(addr).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let (status, _) = exchange(&mut conn, "{}");
    assert_eq!(status, "HTTP/1.1 502 Bad Gateway");
}

#[test]
fn bad_arguments_are_refused_with_the_usage() {
    let out = Command::new(env!("CARGO_BIN_EXE_floor_relay")).args(["127.0.0.1:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("usage: floor-relay"));
}
