//! Micro-benchmarks of the request path's pieces: key lookup, the request body's peek, the meter
//! of a whole answer, the usage event's JSON, a request's two journal records, the SSE tap (plain
//! and translating between APIs), a limiter check over 10k keys, and an admission lane push/pop.
//! Run with
//! `cargo bench -p proxy_core --features bench`.

use std::sync::Arc;

use bytes::Bytes;
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use sluicegate_core::admission::lanes::{Lanes, Waiter};
use sluicegate_core::auth::{self, hex_digest, KeyHasher};
use sluicegate_core::config::{self, Limits, Registry};
use sluicegate_core::endpoint::{Endpoint, Flavor};
use sluicegate_core::limits::{self, Estimate, LimitState, Scope};
use sluicegate_core::metrics::Metrics;
use sluicegate_core::proxy::peek::peek;
use sluicegate_core::sse::{SseTap, WholeBodyMeter};
use sluicegate_core::translate::{StreamTranslator, Translation};
use sluicegate_core::upstream::AddressGuard;
use sluicegate_core::usage::{BeginRecord, Outcome, UsageEvent, UsageSink, UsageSource};

const PEPPER: &str = "bench-pepper-0123456789abcdef";

fn key_lookup(c: &mut Criterion) {
    let hasher = KeyHasher::new(PEPPER.as_bytes()).expect("hmac");
    let secrets: Vec<String> = (0..10_000).map(|_| auth::generate().expect("random")).collect();
    let keys: Vec<serde_json::Value> = secrets
        .iter()
        .enumerate()
        .map(|(i, s)| serde_json::json!({"id": format!("k{i}"), "tenant_id": "t", "hash": hex_digest(&hasher.hash(s)), "prefix": auth::public_prefix(s)}))
        .collect();
    let payload = serde_json::json!({"auth": {"key_pepper": PEPPER}, "tenants": [{"id": "t"}], "keys": keys});
    let registry = Registry::new(Arc::new(Metrics::default()), AddressGuard::new());
    let snapshot = config::load(1, payload.to_string().as_bytes(), &registry).expect("config");
    let mut i = 0;
    c.bench_function("key lookup (format check + HMAC + map, 10k keys)", |b| {
        b.iter(|| {
            i = (i + 1) % secrets.len();
            let secret = &secrets[i];
            assert!(auth::well_formed(secret));
            let digest = snapshot.hasher.hash(secret);
            black_box(snapshot.keys.get(&digest).is_some_and(|k| auth::digest_eq(&k.hash, &digest)))
        })
    });
}

/// A chat request of a conversation: the fields the gateway acts on read, its prompt measured.
fn body_peek(c: &mut Criterion) {
    let messages: Vec<String> = (0..20)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            format!(r#"{{"role":"{role}","content":"turn {i} of a conversation, a sentence or two of its text"}}"#)
        })
        .collect();
    let body = Bytes::from(format!(
        r#"{{"model":"sim","messages":[{}],"max_tokens":256,"temperature":0.7,"stream":false,"user":"end-user-1"}}"#,
        messages.join(",")
    ));
    c.bench_function("request body peek (chat, 20 messages, 6 fields)", |b| {
        b.iter(|| black_box(peek(Endpoint::ChatCompletions, body.clone())))
    });
}

/// A whole (non-streaming) chat answer metered as it is relayed: the bench's instant answer, and
/// one with 4 KB of text.
fn whole_meter(c: &mut Criterion) {
    let answer = |text: &str| {
        format!(
            r#"{{"id":"chatcmpl-instant","object":"chat.completion","created":1764547200,"model":"sim-model","choices":[{{"index":0,"message":{{"role":"assistant","content":"{text}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":12,"completion_tokens":16,"total_tokens":28}}}}"#
        )
    };
    for (name, body) in [
        (
            "whole answer meter (a 300 B answer)",
            answer("A fixed answer from the instant upstream, sixteen tokens or so long."),
        ),
        ("whole answer meter (4 KB of text)", answer(&"A sentence of an answer, with a comma. ".repeat(100))),
    ] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let mut meter = WholeBodyMeter::new();
                meter.feed(black_box(body.as_bytes()));
                black_box((meter.usage(), meter.completion_estimate()))
            })
        });
    }
}

fn text(s: &str) -> Arc<str> {
    Arc::from(s)
}

/// A finished stream's usage event.
fn stream_event() -> UsageEvent {
    UsageEvent {
        seq: 123_456,
        request_id: text("req_019adbc0ffee4b1d9c3a5e7f01234567"),
        key_id: text("key_01HZX3Q4RSTUVWXYZ0123456"),
        key_prefix: text("sk-sg-AbCd"),
        tenant_id: text("tenant-acme"),
        endpoint: "chat_completions",
        model: text("gpt-4o-mini"),
        upstream_model: Some(text("Qwen/Qwen2.5-7B-Instruct")),
        pool: Some(text("vllm-main")),
        upstream: Some(text("vllm-a")),
        priority: "interactive",
        stream: true,
        status: 200,
        outcome: Outcome::Complete,
        error_code: None,
        prompt_tokens: 1234,
        completion_tokens: 567,
        cached_tokens: 1024,
        cache_write_tokens: 0,
        reasoning_tokens: 0,
        usage_source: UsageSource::Upstream,
        cost_micros: 4321,
        price_version: Some(7),
        queue_wait_ms: 0.0421,
        connect_ms: Some(0.412),
        ttft_ms: Some(182.5),
        tpot_ms: Some(21.37),
        duration_ms: 12345.678,
        started_at: 1_796_000_000.123_456,
        attempts: 1,
        fallback: false,
        client_retry_count: Some(0),
        tags: Some(text(r#"{"team":"search","env":"prod"}"#)),
        end_user: Some(text("user-8812")),
    }
}

/// A finished request's usage event as the sink writes it (JSON, for the journal and the ledger).
fn usage_event(c: &mut Criterion) {
    let event = stream_event();
    c.bench_function("usage event to JSON (a stream's event)", |b| b.iter(|| black_box(black_box(&event).to_json())));
}

/// What a request costs the journal on its own thread: the begin record, then the usage event
/// (each encoded and appended), as a journaled sink does with its syncer and a drainer running.
fn journal_records(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("sg-bench-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let sink = Arc::new(UsageSink::with_journal(1 << 20, &dir, std::time::Duration::from_millis(10)).unwrap());
    let syncer = std::thread::spawn({
        let sink = sink.clone();
        move || sink.run_syncer()
    });
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drainer = std::thread::spawn({
        let (sink, stop) = (sink.clone(), stop.clone());
        move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let batch = sink.drain(1024, std::time::Duration::from_millis(5));
                if !batch.is_empty() {
                    let _ = sink.ack(u64::MAX);
                }
            }
        }
    });
    let event = stream_event();
    let begin = |seq| BeginRecord {
        seq,
        request_id: event.request_id.clone(),
        key_id: event.key_id.clone(),
        key_prefix: event.key_prefix.clone(),
        tenant_id: event.tenant_id.clone(),
        endpoint: "chat_completions".into(),
        model: event.model.clone(),
        upstream_model: event.upstream_model.clone(),
        pool: event.pool.clone(),
        upstream: event.upstream.clone(),
        priority: "interactive".into(),
        stream: true,
        prompt_estimate: 1234,
        started_at: event.started_at,
        price_version: Some(7),
        prompt_cost_micros: 1234,
        input_per_mtok: Some(150_000),
        output_per_mtok: Some(600_000),
        cached_input_per_mtok: Some(75_000),
        cache_write_per_mtok: None,
        reasoning_per_mtok: None,
        client_retry_count: Some(0),
        tags: event.tags.clone(),
        end_user: event.end_user.clone(),
    };
    c.bench_function("journal a request (begin record + usage event)", |b| {
        b.iter(|| {
            let ticket = sink.begin(begin);
            black_box(sink.record(event.clone(), ticket, false))
        })
    });
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    sink.stop_syncer();
    let _ = (syncer.join(), drainer.join());
    let _ = std::fs::remove_dir_all(&dir);
}

fn sse_tap(c: &mut Criterion) {
    let chunk = Bytes::from_static(
        b"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1796000000,\"model\":\"sim\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" sluice\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    );
    let mut tap = SseTap::new(Flavor::OpenAi, true);
    c.bench_function("sse tap (one OpenAI chunk)", |b| b.iter(|| black_box(tap.feed(chunk.clone()))));
}

/// The tap with translation: one upstream chunk read for usage and written in the client's API.
fn translated_tap(c: &mut Criterion) {
    let anthropic = Bytes::from_static(
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" sluice\"}}\n\n",
    );
    let translator = StreamTranslator::new(Translation::ChatToMessages, false, 1_796_000_000);
    let mut tap = SseTap::translating(Flavor::Anthropic, translator);
    c.bench_function("sse tap translating (one Anthropic delta to a chat chunk)", |b| {
        b.iter(|| black_box(tap.feed(anthropic.clone())))
    });
    let openai = Bytes::from_static(
        b"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1796000000,\"model\":\"sim\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" sluice\"},\"finish_reason\":null}],\"usage\":null}\n\n",
    );
    let translator = StreamTranslator::new(Translation::MessagesToChat, false, 1_796_000_000);
    let mut tap = SseTap::translating(Flavor::OpenAi, translator);
    c.bench_function("sse tap translating (one chat chunk to an Anthropic delta)", |b| {
        b.iter(|| black_box(tap.feed(openai.clone())))
    });
}

fn bucket_check(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().expect("runtime");
    let _guard = runtime.enter();
    let states: Vec<Arc<LimitState>> = (0..10_000).map(|_| Arc::new(LimitState::default())).collect();
    let limits = Limits { rpm: Some(1_000_000_000), tpm: Some(1_000_000_000), ..Limits::default() };
    let mut i = 0;
    c.bench_function("limiter check: RPM + TPM charge over 10k keys", |b| {
        b.iter(|| {
            i = (i + 1) % states.len();
            let scopes = [Scope { name: "key", id: "k", limits: &limits, state: &states[i], quota: None }];
            let estimate = Estimate { tokens: 500, cost_micros: 0, now: 0 };
            black_box(limits::admit_request(&scopes).and_then(|mut held| {
                limits::admit_tokens(&mut held, &scopes, estimate)?;
                Ok(held)
            }))
            .is_ok()
        })
    });
}

fn lane_push_pop(c: &mut Criterion) {
    let mut lanes = Lanes::default();
    let tenant: Arc<str> = Arc::from("t");
    let mut id = 0;
    c.bench_function("admission lane push + pop", |b| {
        b.iter(|| {
            id += 1;
            let (tx, _rx) = tokio::sync::oneshot::channel();
            lanes.push(0, Waiter { id, tenant: tenant.clone(), tx });
            black_box(lanes.pop_next([8, 1]).is_some())
        })
    });
}

criterion_group!(
    benches,
    key_lookup,
    body_peek,
    whole_meter,
    usage_event,
    journal_records,
    sse_tap,
    translated_tap,
    bucket_check,
    lane_push_pop
);
criterion_main!(benches);
