//! Request traces for an operator's OpenTelemetry collector. The request path records what it
//! already measured, decides at its end whether to keep the trace (`Sampler`), and hands the
//! finished spans to a bounded lock-free ring (the usage hand-off's `Ring`): one push, no lock,
//! no syscall; a full ring drops the trace and counts it. The exporter thread batches, encodes
//! OTLP protobuf (`otlp.rs`) and POSTs it over the gateway's own upstream client, so the
//! address guard applies: never a metadata service, never one of the gateway's listeners.

pub mod context;
mod export;
pub mod otlp;
pub mod span;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use http::Uri;

pub use context::{format_traceparent, new_span_id, new_trace_id, parse_traceparent, parse_tracestate, ParentContext};
pub use span::{Attributes, ClientTrace, Event, Sampler, Span, SpanKind, TraceRecord, Value};

use crate::metrics::FamilySnapshot;
use crate::upstream::AddressGuard;
use crate::usage::{PushError, Ring};

#[derive(Debug, Clone)]
pub struct TraceSettings {
    /// The collector's OTLP/HTTP traces URL, e.g. `http://127.0.0.1:4318/v1/traces`.
    pub endpoint: Uri,
    pub sampler: Sampler,
    /// Traces (one request's spans) waiting for the exporter at most.
    pub queue: usize,
    /// Traces per export request at most.
    pub batch: usize,
    /// How long a batch gathers before it is sent (unless it is full first).
    pub batch_delay: Duration,
    pub export_timeout: Duration,
    pub service_name: String,
    pub service_instance: String,
}

impl TraceSettings {
    /// Checks what a typo would make silently useless.
    pub fn validate(&self) -> Result<(), String> {
        match self.endpoint.scheme_str() {
            Some("http" | "https") => {}
            _ => return Err("the trace endpoint must be an http:// or https:// URL".into()),
        }
        if self.endpoint.host().is_none() {
            return Err("the trace endpoint needs a host".into());
        }
        if !(0.0..=1.0).contains(&self.sampler.ratio) {
            return Err("the trace sample ratio must be within 0 and 1".into());
        }
        if self.queue == 0 || self.batch == 0 || self.export_timeout.is_zero() {
            return Err("the trace queue, batch and export timeout must be positive".into());
        }
        Ok(())
    }
}

#[derive(Default)]
pub struct TraceCounters {
    pub spans_queued: AtomicU64,
    pub spans_dropped: AtomicU64,
    pub spans_exported: AtomicU64,
    pub spans_failed: AtomicU64,
    pub exports_failed: AtomicU64,
}

/// A finished request's trace as the request path hands it over: what it measured, owned. The
/// exporter thread turns it into spans (names, attributes, timestamps), so the request path
/// formats nothing.
pub trait PendingTrace: Send {
    /// How many spans it will make (for the counters).
    fn span_count(&self) -> usize;
    fn build(self: Box<Self>) -> TraceRecord;
}

pub struct Tracer {
    pub settings: TraceSettings,
    ring: Ring<Box<dyn PendingTrace>>,
    pub counters: TraceCounters,
    exporter: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// While the exporter backs off after a failed export: when it tries the collector again,
    /// in milliseconds after `epoch` (at least 1); 0 while exports work.
    retry_at_ms: AtomicU64,
    epoch: Instant,
}

impl Tracer {
    /// The tracer and its exporter thread.
    pub fn start(settings: TraceSettings, guard: Arc<AddressGuard>) -> Result<Arc<Tracer>, String> {
        settings.validate()?;
        let tracer = Arc::new(Tracer::new(settings));
        let exporter = export::Exporter::new(tracer.clone(), guard)?;
        let handle = std::thread::Builder::new()
            .name("sluicegate-otlp".into())
            .spawn(move || exporter.run())
            .map_err(|e| format!("cannot start the trace exporter: {e}"))?;
        *tracer.exporter.lock().unwrap_or_else(PoisonError::into_inner) = Some(handle);
        Ok(tracer)
    }

    /// The tracer without its exporter thread (`start` adds it).
    fn new(settings: TraceSettings) -> Tracer {
        Tracer {
            ring: Ring::new(settings.queue),
            settings,
            counters: TraceCounters::default(),
            exporter: Mutex::new(None),
            retry_at_ms: AtomicU64::new(0),
            epoch: Instant::now(),
        }
    }

    pub fn sampler(&self) -> &Sampler {
        &self.settings.sampler
    }

    /// Hand a finished trace to the exporter: one push onto the ring; when it is full the trace
    /// is dropped and counted, the request never waits. While the exporter backs off after a
    /// failed export the trace is counted as lost and dropped here, never boxed: its batch would
    /// be dropped unbuilt anyway, and a collector that is down then costs the request path no
    /// allocation and no free on the exporter's thread.
    pub fn submit<T: PendingTrace + 'static>(&self, trace: T, now: Instant) {
        let spans = trace.span_count() as u64;
        if self.backing_off(now) {
            self.counters.spans_failed.fetch_add(spans, Ordering::Relaxed);
            return;
        }
        match self.ring.push(Box::new(trace)) {
            Ok(()) => self.counters.spans_queued.fetch_add(spans, Ordering::Relaxed),
            Err(PushError::Full(_) | PushError::Closed(_)) => {
                self.counters.spans_dropped.fetch_add(spans, Ordering::Relaxed)
            }
        };
    }

    fn millis(&self, at: Instant) -> u64 {
        at.saturating_duration_since(self.epoch).as_millis() as u64
    }

    fn backing_off(&self, now: Instant) -> bool {
        let at = self.retry_at_ms.load(Ordering::Relaxed);
        at != 0 && self.millis(now) < at
    }

    /// The exporter's next attempt after a failure (`None`: exports work); once it has passed,
    /// traces are queued again, so that the next batch finds out whether the collector is back.
    fn set_retry_at(&self, at: Option<Instant>) {
        self.retry_at_ms.store(at.map_or(0, |at| self.millis(at).max(1)), Ordering::Relaxed);
    }

    /// Stop taking traces, send what is queued (within one export timeout) and join the thread.
    pub fn stop(&self) {
        self.ring.close();
        if let Some(handle) = self.exporter.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = handle.join();
        }
    }

    pub fn families(&self) -> Vec<FamilySnapshot> {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        vec![
            FamilySnapshot::counter(
                "sluicegate_trace_spans_queued_total",
                "Spans handed to the trace exporter.",
                load(&c.spans_queued),
            ),
            FamilySnapshot::counter(
                "sluicegate_trace_spans_dropped_total",
                "Spans dropped because the trace export queue was full (requests never wait for it).",
                load(&c.spans_dropped),
            ),
            FamilySnapshot::counter(
                "sluicegate_trace_spans_exported_total",
                "Spans the collector accepted.",
                load(&c.spans_exported),
            ),
            FamilySnapshot::counter(
                "sluicegate_trace_spans_export_failed_total",
                "Spans lost because their export request failed (collector down, refused, timed out), or dropped while the exporter backs off after such a failure.",
                load(&c.spans_failed),
            ),
            FamilySnapshot::counter(
                "sluicegate_trace_export_failures_total",
                "Export requests to the collector that failed.",
                load(&c.exports_failed),
            ),
            FamilySnapshot::gauge(
                "sluicegate_trace_queue_depth",
                "Traces waiting for the exporter.",
                self.ring.len() as f64,
            ),
        ]
    }

    fn ring(&self) -> &Ring<Box<dyn PendingTrace>> {
        &self.ring
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        self.ring.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fake(usize);

    impl PendingTrace for Fake {
        fn span_count(&self) -> usize {
            self.0
        }

        fn build(self: Box<Self>) -> TraceRecord {
            TraceRecord { trace_id: 1, trace_state: None, spans: Vec::new() }
        }
    }

    fn tracer() -> Tracer {
        Tracer::new(TraceSettings {
            endpoint: Uri::from_static("http://127.0.0.1:9/v1/traces"),
            sampler: Sampler { ratio: 1.0, slow: Duration::from_secs(1), parent_based: false },
            queue: 4,
            batch: 4,
            batch_delay: Duration::from_millis(10),
            export_timeout: Duration::from_secs(1),
            service_name: "test".into(),
            service_instance: "test-1".into(),
        })
    }

    #[test]
    fn while_the_exporter_backs_off_traces_are_counted_as_lost_not_queued() {
        let t = tracer();
        let now = Instant::now();
        t.submit(Fake(3), now);
        assert_eq!(t.counters.spans_queued.load(Ordering::Relaxed), 3);
        assert_eq!(t.ring.len(), 1);

        t.set_retry_at(Some(now + Duration::from_secs(2)));
        t.submit(Fake(2), now + Duration::from_secs(1));
        assert_eq!(t.counters.spans_failed.load(Ordering::Relaxed), 2);
        assert_eq!(t.counters.spans_queued.load(Ordering::Relaxed), 3);
        assert_eq!(t.ring.len(), 1);

        // Past the next attempt: queued again, so that the next batch tries the collector.
        t.submit(Fake(1), now + Duration::from_secs(3));
        assert_eq!(t.counters.spans_queued.load(Ordering::Relaxed), 4);
        t.set_retry_at(None);
        t.submit(Fake(1), now + Duration::from_secs(1));
        assert_eq!(t.counters.spans_queued.load(Ordering::Relaxed), 5);
        assert_eq!(t.ring.len(), 3);
    }

    #[test]
    fn a_retry_at_the_tracers_first_millisecond_still_reads_as_backing_off() {
        let t = tracer();
        t.set_retry_at(Some(t.epoch));
        assert_ne!(t.retry_at_ms.load(Ordering::Relaxed), 0);
    }
}
