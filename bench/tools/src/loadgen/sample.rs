//! What one request measured, and how it was read off the wire.

use std::time::Instant;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;

use super::sse::{usage_of_body, Grammar, StreamReader};

#[derive(Debug, Clone, Default)]
pub struct Sample {
    pub status: u16,
    pub ok: bool,
    pub timed_out: bool,
    /// Transport failure before or during the response (refused, reset).
    pub error: Option<&'static str>,
    pub stream: bool,
    pub priority: Option<std::sync::Arc<str>>,
    pub headers_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub tpot_ms: Option<f64>,
    pub total_ms: f64,
    /// Inter-token gaps in microseconds (0 when two tokens arrived in one chunk).
    pub gaps_us: Vec<u32>,
    /// Content events (tokens) received, or the reported completion tokens of a whole answer.
    pub output_tokens: u64,
    pub prompt_tokens: u64,
    /// SSE events, body chunks, and chunks that carried more than one event.
    pub events: u64,
    pub chunks: u64,
    pub multi_event_chunks: u64,
    pub retry_after: bool,
}

fn ms(from: Instant, to: Instant) -> f64 {
    to.saturating_duration_since(from).as_secs_f64() * 1000.0
}

/// Read a streamed body event by event, stamping each token as it arrives.
pub async fn read_stream(sample: &mut Sample, body: Incoming, grammar: Grammar, start: Instant) {
    let mut body = body;
    let mut reader = StreamReader::new(grammar);
    let mut first: Option<Instant> = None;
    let mut last: Option<Instant> = None;
    loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else {
                    continue;
                };
                let now = Instant::now();
                let fed = reader.feed(&data);
                let (new_events, new_tokens) = (fed.events, fed.content_events);
                sample.chunks += 1;
                if new_events > 1 {
                    sample.multi_event_chunks += 1;
                }
                for i in 0..new_tokens {
                    match last {
                        None => first = Some(now),
                        Some(prev) => {
                            let gap = if i == 0 { now.saturating_duration_since(prev).as_micros() } else { 0 };
                            sample.gaps_us.push(gap.min(u128::from(u32::MAX)) as u32);
                        }
                    }
                    last = Some(now);
                }
            }
            Some(Err(_)) => {
                sample.error = Some("body");
                break;
            }
            None => break,
        }
    }
    let end = Instant::now();
    sample.total_ms = ms(start, end);
    sample.events = reader.events;
    sample.output_tokens = reader.content_events;
    if let Some(usage) = reader.usage {
        sample.prompt_tokens = usage.prompt;
    }
    if let Some(first) = first {
        sample.ttft_ms = Some(ms(start, first));
        if sample.output_tokens > 1 {
            sample.tpot_ms = Some(ms(first, end) / (sample.output_tokens - 1) as f64);
        }
    }
    if reader.upstream_error || (!reader.terminated && sample.error.is_none()) {
        sample.error = Some("stream_error");
    }
}

/// Read a whole body; tokens from its usage.
pub async fn read_whole(sample: &mut Sample, body: Incoming, start: Instant) {
    let bytes: Bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            sample.error = Some("body");
            Bytes::new()
        }
    };
    sample.total_ms = ms(start, Instant::now());
    if let Some(usage) = usage_of_body(&bytes) {
        sample.output_tokens = usage.completion;
        sample.prompt_tokens = usage.prompt;
    }
}
