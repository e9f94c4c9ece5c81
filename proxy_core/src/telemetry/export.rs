//! The exporter thread: asleep on the ring until a trace arrives (woken by the one push that
//! finds it asleep), then lets a batch gather for `batch_delay`, encodes it and POSTs it to the
//! collector with its own small runtime, so nothing of it runs on the request path's threads.
//! A failed export is counted and its spans are dropped: traces are lossy by design, and a
//! collector that is down must cost the gateway as little as possible. So after a failure the
//! exporter backs off (`Backoff`): until the next attempt, the request path counts its traces
//! as failed instead of queueing them (`Tracer::submit`), what was queued already is dropped
//! without being built or encoded, and only one batch per period tries the collector.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{header, HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Limited};

use super::otlp;
use super::span::{TraceRecord, Value};
use super::Tracer;
use crate::upstream::{AddressGuard, ClientSettings, UpstreamClient};

/// How long the thread sleeps when nothing arrives (it is woken by the next push anyway).
const IDLE: Duration = Duration::from_secs(1);
/// A collector's answer is read (to keep the connection) up to this size.
const MAX_ANSWER: usize = 64 * 1024;
/// The wait after a first failed export, doubled after each further one up to `MAX_BACKOFF`.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// When the collector may be tried again after failed exports.
#[derive(Debug, Default)]
struct Backoff {
    /// The next attempt's earliest time and the wait that led to it; `None` while exports work.
    retry: Option<(Instant, Duration)>,
}

impl Backoff {
    fn may_try(&self, now: Instant) -> bool {
        self.retry.is_none_or(|(at, _)| now >= at)
    }

    fn failed(&mut self, now: Instant) {
        let wait = self.retry.map_or(FIRST_BACKOFF, |(_, last)| (last * 2).min(MAX_BACKOFF));
        // Jitter (up to a quarter) so that a fleet's replicas do not retry in step.
        let jitter = wait.mul_f64(fastrand::f64() / 4.0);
        self.retry = Some((now + wait + jitter, wait));
    }

    fn succeeded(&mut self) {
        self.retry = None;
    }

    fn retry_at(&self) -> Option<Instant> {
        self.retry.map(|(at, _)| at)
    }
}

pub struct Exporter {
    tracer: Arc<Tracer>,
    client: UpstreamClient,
    runtime: tokio::runtime::Runtime,
    resource: Vec<(&'static str, Value)>,
}

impl Exporter {
    pub fn new(tracer: Arc<Tracer>, guard: Arc<AddressGuard>) -> Result<Self, String> {
        let endpoint = &tracer.settings.endpoint;
        let https = endpoint.scheme_str() == Some("https");
        let settings = ClientSettings {
            connect_timeout: tracer.settings.export_timeout,
            http2_prior_knowledge: false,
            // The operator names the collector; it may sit on a private or link-local address,
            // never on a metadata service or one of the gateway's own listeners.
            allow_internal: true,
            port: endpoint.port_u16().unwrap_or(if https { 443 } else { 80 }),
        };
        let client = UpstreamClient::new(settings, guard).map_err(|e| format!("trace exporter TLS setup: {e}"))?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("trace exporter runtime: {e}"))?;
        let resource = vec![
            ("service.name", Value::from(tracer.settings.service_name.clone())),
            ("service.instance.id", Value::from(tracer.settings.service_instance.clone())),
            ("service.version", Value::Static(env!("CARGO_PKG_VERSION"))),
            ("telemetry.sdk.name", Value::Static("sluicegate")),
            ("telemetry.sdk.language", Value::Static("rust")),
        ];
        Ok(Self { tracer, client, runtime, resource })
    }

    pub fn run(self) {
        let ring = self.tracer.ring();
        let settings = &self.tracer.settings;
        let mut backoff = Backoff::default();
        loop {
            if ring.is_empty() {
                if ring.is_closed() {
                    return;
                }
                ring.wait(IDLE);
                continue;
            }
            // Let the batch gather, unless it is full already or the tracer is stopping.
            let until = Instant::now() + settings.batch_delay;
            while ring.len() < settings.batch && !ring.is_closed() {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                std::thread::sleep(left.min(Duration::from_millis(20)));
            }
            if !backoff.may_try(Instant::now()) {
                // The collector failed a moment ago: drop this batch unbuilt.
                let mut spans = 0;
                for _ in 0..settings.batch {
                    let Some(pending) = ring.pop() else { break };
                    spans += pending.span_count() as u64;
                }
                self.tracer.counters.spans_failed.fetch_add(spans, Ordering::Relaxed);
                continue;
            }
            let mut batch: Vec<TraceRecord> = Vec::with_capacity(settings.batch.min(ring.len()));
            while batch.len() < settings.batch {
                match ring.pop() {
                    Some(pending) => batch.push(pending.build()),
                    None => break,
                }
            }
            if !batch.is_empty() {
                if self.send(&batch) {
                    backoff.succeeded();
                } else {
                    backoff.failed(Instant::now());
                }
                // The request path stops queueing traces until the next attempt (`submit`).
                self.tracer.set_retry_at(backoff.retry_at());
            }
            if ring.is_closed() {
                // Stopping: one batch was sent; what is left is dropped (and counted) rather
                // than hold the stop for an export timeout per batch.
                let mut left = 0;
                while let Some(pending) = ring.pop() {
                    left += pending.span_count() as u64;
                }
                self.tracer.counters.spans_dropped.fetch_add(left, Ordering::Relaxed);
                return;
            }
        }
    }

    /// Whether the collector took the batch.
    fn send(&self, batch: &[TraceRecord]) -> bool {
        let spans: u64 = batch.iter().map(|r| r.spans.len() as u64).sum();
        let body = otlp::encode(&self.resource, batch);
        let counters = &self.tracer.counters;
        match self.post(&self.tracer.settings.endpoint, body) {
            Ok(()) => {
                counters.spans_exported.fetch_add(spans, Ordering::Relaxed);
                true
            }
            Err(why) => {
                // Once per failure is too loud when the collector is down for long; debug.
                tracing::debug!(error = %why, spans, "trace export failed; spans dropped");
                counters.exports_failed.fetch_add(1, Ordering::Relaxed);
                counters.spans_failed.fetch_add(spans, Ordering::Relaxed);
                false
            }
        }
    }

    fn post(&self, endpoint: &Uri, body: Vec<u8>) -> Result<(), String> {
        let mut request = Request::new(Bytes::from(body));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = endpoint.clone();
        let headers = request.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-protobuf"));
        headers.insert(header::USER_AGENT, HeaderValue::from_static(concat!("sluicegate/", env!("CARGO_PKG_VERSION"))));
        let timeout = self.tracer.settings.export_timeout;
        self.runtime.block_on(async {
            let answer = tokio::time::timeout(timeout, async {
                let response = self.client.request(request).await.map_err(|e| format!("{e:?}"))?;
                let status = response.status();
                let _ = Limited::new(response.into_body(), MAX_ANSWER).collect().await;
                if status.is_success() {
                    Ok(())
                } else {
                    Err(format!("the collector answered {status}"))
                }
            })
            .await;
            answer.unwrap_or_else(|_| Err(format!("no answer within {} ms", timeout.as_millis())))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_exports_back_off_doubling_with_jitter_and_a_success_resets() {
        let start = Instant::now();
        let mut backoff = Backoff::default();
        assert!(backoff.may_try(start));
        backoff.failed(start);
        assert!(!backoff.may_try(start + FIRST_BACKOFF / 2));
        assert!(backoff.may_try(start + FIRST_BACKOFF * 5 / 4));
        let mut last = FIRST_BACKOFF;
        for _ in 0..10 {
            backoff.failed(start);
            let (at, wait) = backoff.retry.expect("backing off");
            assert_eq!(wait, (last * 2).min(MAX_BACKOFF));
            assert!(at >= start + wait && at <= start + wait + wait / 4);
            last = wait;
        }
        assert_eq!(last, MAX_BACKOFF);
        backoff.succeeded();
        assert!(backoff.may_try(start));
    }
}
