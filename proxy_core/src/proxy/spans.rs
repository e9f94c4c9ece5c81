//! A request's trace: its context (continued from the client's `traceparent` or started here),
//! the `traceparent` each upstream attempt gets, and the spans built from what the request
//! already measured once it ended (the server span, a queue-wait span, one client span per
//! upstream attempt with its connect span, the first token as an event). Built only for traces
//! the sampler keeps; the request path pays one push onto the tracer's ring for them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderMap, HeaderValue};

use super::shared::Shared;
use crate::config::ProviderKind;
use crate::endpoint::Endpoint;
use crate::error::{ErrorKind, GatewayError};
use crate::header_names::{TRACEPARENT, TRACESTATE};
use crate::telemetry::{
    format_traceparent, new_span_id, new_trace_id, parse_traceparent, parse_tracestate, Attributes, ClientTrace, Event,
    ParentContext, PendingTrace, Span, SpanKind, TraceRecord, Value,
};

/// The trace a request belongs to.
#[derive(Debug, Clone, Default)]
pub struct TraceCtx {
    /// The client's context, validated (`None`: absent or refused).
    pub parent: Option<ParentContext>,
    pub tracestate: Option<HeaderValue>,
    /// With a tracer: the trace id (the client's, or new), this request's server span, and the
    /// head sampling decision (the `sampled` flag sent upstream). Zero without a tracer.
    pub trace_id: u128,
    pub span_id: u64,
    pub head_sampled: bool,
}

impl TraceCtx {
    pub fn from_headers(shared: &Shared, headers: &HeaderMap) -> TraceCtx {
        let parent = parse_traceparent(headers);
        let tracestate = parent.and_then(|_| parse_tracestate(headers));
        let Some(tracer) = &shared.tracer else {
            return TraceCtx { parent, tracestate, ..TraceCtx::default() };
        };
        let trace_id = parent.map_or_else(new_trace_id, |p| p.trace_id);
        let client = parent.map(|p| ClientTrace { sampled: p.sampled });
        let head_sampled = tracer.sampler().head(trace_id, client);
        TraceCtx { parent, tracestate, trace_id, span_id: new_span_id(), head_sampled }
    }

    /// The trace headers an upstream attempt gets: the gateway's own `traceparent` naming the
    /// attempt's span, or without a tracer the client's (as validated), and the client's
    /// `tracestate` beside it.
    pub fn write_upstream(&self, headers: &mut HeaderMap, attempt_span: u64) {
        let value = if self.trace_id != 0 {
            format_traceparent(self.trace_id, attempt_span, self.head_sampled)
        } else if let Some(p) = self.parent {
            format_traceparent(p.trace_id, p.span_id, p.sampled)
        } else {
            return;
        };
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(TRACEPARENT, value);
            if let Some(state) = &self.tracestate {
                headers.insert(TRACESTATE, state.clone());
            }
        }
    }
}

/// One upstream attempt, as the trace keeps it.
pub struct AttemptSpan {
    pub span_id: u64,
    pub number: u32,
    pub pool: Arc<str>,
    pub member: Arc<str>,
    pub upstream_model: Arc<str>,
    pub provider: ProviderKind,
    pub host: Arc<str>,
    pub port: u16,
    pub sent: Instant,
    /// `None`: the attempt whose answer was relayed; it ends with the request.
    pub ended: Option<Instant>,
    pub status: u16,
    pub error: Option<ErrorKind>,
    pub connect: Option<Duration>,
}

/// What the server span says of the request, whatever the request reached.
pub struct Summary<'a> {
    pub ctx: &'a TraceCtx,
    pub endpoint: Endpoint,
    pub model: &'a Arc<str>,
    pub tenant_id: &'a Arc<str>,
    pub key_id: &'a Arc<str>,
    pub request_id: &'a Arc<str>,
    pub arrived: Instant,
    pub arrived_unix: f64,
    pub ended: Instant,
    pub status: u16,
    pub error: Option<ErrorKind>,
    pub outcome: &'static str,
}

/// Unix nanoseconds of `at`, from the request's arrival on both clocks (no clock read here).
pub fn nanos(arrived: Instant, arrived_unix: f64, at: Instant) -> u64 {
    let base = (arrived_unix * 1e9) as u64;
    match at.checked_duration_since(arrived) {
        Some(after) => base.saturating_add(after.as_nanos() as u64),
        None => base.saturating_sub(arrived.duration_since(at).as_nanos() as u64),
    }
}

impl Summary<'_> {
    fn at(&self, at: Instant) -> u64 {
        nanos(self.arrived, self.arrived_unix, at)
    }

    /// The server span, without the attributes only a forwarded request has.
    pub fn server_span(&self) -> Span {
        let error = self.error.map(ErrorKind::code).or_else(|| (self.status >= 500).then_some("http_5xx"));
        let mut attributes: Attributes = vec![
            ("gen_ai.operation.name", self.endpoint.operation().into()),
            ("gen_ai.request.model", self.model.into()),
            ("http.request.method", "POST".into()),
            ("http.route", self.endpoint.path().into()),
            ("url.path", self.endpoint.path().into()),
            ("http.response.status_code", i64::from(self.status).into()),
            ("sluicegate.request_id", self.request_id.into()),
            ("sluicegate.tenant.id", self.tenant_id.into()),
            ("sluicegate.key.id", self.key_id.into()),
            ("sluicegate.outcome", self.outcome.into()),
        ];
        if let Some(kind) = error {
            attributes.push(("error.type", kind.into()));
        }
        Span {
            span_id: self.ctx.span_id,
            parent_span_id: self.ctx.parent.map_or(0, |p| p.span_id),
            name: format!("{} {}", self.endpoint.operation(), self.model),
            kind: SpanKind::Server,
            start_unix_nanos: self.at(self.arrived),
            end_unix_nanos: self.at(self.ended),
            attributes,
            events: Vec::new(),
            error,
        }
    }

    pub fn record(&self, spans: Vec<Span>) -> TraceRecord {
        TraceRecord {
            trace_id: self.ctx.trace_id,
            trace_state: self.ctx.tracestate.as_ref().and_then(|v| v.to_str().ok()).map(Arc::from),
            spans,
        }
    }
}

/// An attempt's client span (and its connect span, when it opened a connection).
pub fn attempt_spans(summary: &Summary<'_>, operation: &'static str, a: &AttemptSpan, out: &mut Vec<Span>) {
    let end = a.ended.unwrap_or(summary.ended);
    let mut attributes: Attributes = vec![
        ("gen_ai.operation.name", operation.into()),
        ("gen_ai.request.model", (&a.upstream_model).into()),
        ("gen_ai.provider.name", a.provider.as_str().into()),
        ("gen_ai.system", a.provider.as_str().into()),
        ("server.address", (&a.host).into()),
        ("server.port", i64::from(a.port).into()),
        ("sluicegate.pool", (&a.pool).into()),
        ("sluicegate.upstream", (&a.member).into()),
        ("sluicegate.attempt", i64::from(a.number).into()),
    ];
    if a.status != 0 {
        attributes.push(("http.response.status_code", i64::from(a.status).into()));
    }
    let by_status = match a.status {
        429 => Some("http_429"),
        500..=599 => Some("http_5xx"),
        _ => None,
    };
    let error = a.error.map(ErrorKind::code).or(by_status);
    if let Some(kind) = error {
        attributes.push(("error.type", kind.into()));
    }
    if let Some(connect) = a.connect {
        attributes.push(("sluicegate.connect_ms", (connect.as_secs_f64() * 1000.0).into()));
        out.push(Span {
            span_id: new_span_id(),
            parent_span_id: a.span_id,
            name: "connect".into(),
            kind: SpanKind::Internal,
            start_unix_nanos: summary.at(a.sent),
            end_unix_nanos: summary.at(a.sent + connect),
            attributes: vec![("server.address", (&a.host).into()), ("server.port", i64::from(a.port).into())],
            events: Vec::new(),
            error: None,
        });
    }
    out.push(Span {
        span_id: a.span_id,
        parent_span_id: summary.ctx.span_id,
        name: format!("{operation} {}", a.upstream_model),
        kind: SpanKind::Client,
        start_unix_nanos: summary.at(a.sent),
        end_unix_nanos: summary.at(end),
        attributes,
        events: Vec::new(),
        error,
    });
}

/// The wait for a pool slot, ending when the request was admitted.
pub fn queue_span(summary: &Summary<'_>, admitted: Instant, waited: Duration, pool: Option<&Arc<str>>) -> Span {
    let mut attributes: Attributes = vec![("sluicegate.queue_wait_ms", (waited.as_secs_f64() * 1000.0).into())];
    if let Some(pool) = pool {
        attributes.push(("sluicegate.pool", pool.into()));
    }
    Span {
        span_id: new_span_id(),
        parent_span_id: summary.ctx.span_id,
        name: "queue wait".into(),
        kind: SpanKind::Internal,
        start_unix_nanos: summary.at(admitted.checked_sub(waited).unwrap_or(admitted)),
        end_unix_nanos: summary.at(admitted),
        attributes,
        events: Vec::new(),
        error: None,
    }
}

pub fn first_token_event(summary: &Summary<'_>, at: Instant) -> Event {
    let ttft = at.saturating_duration_since(summary.arrived).as_secs_f64();
    Event {
        name: "gen_ai.first_token",
        at_unix_nanos: summary.at(at),
        attributes: vec![("gen_ai.server.time_to_first_token", Value::Double(ttft))],
    }
}

/// A request refused after it reached routing (limits, the usage backlog, admission): its
/// server span alone, always kept (refusals are errors).
#[allow(clippy::too_many_arguments)]
pub fn refused(
    shared: &Shared,
    ctx: &TraceCtx,
    endpoint: Endpoint,
    model: &Arc<str>,
    key: &crate::config::KeyEntry,
    request_id: &Arc<str>,
    arrived: (Instant, f64),
    error: &GatewayError,
) {
    let Some(tracer) = &shared.tracer else {
        return;
    };
    let ended = Instant::now();
    tracer.submit(
        Refused {
            ctx: ctx.clone(),
            endpoint,
            model: model.clone(),
            tenant_id: key.tenant.id.clone(),
            key_id: key.id.clone(),
            request_id: request_id.clone(),
            arrived,
            ended,
            status: error.status().as_u16(),
            kind: error.kind,
        },
        ended,
    );
}

struct Refused {
    ctx: TraceCtx,
    endpoint: Endpoint,
    model: Arc<str>,
    tenant_id: Arc<str>,
    key_id: Arc<str>,
    request_id: Arc<str>,
    arrived: (Instant, f64),
    ended: Instant,
    status: u16,
    kind: ErrorKind,
}

impl PendingTrace for Refused {
    fn span_count(&self) -> usize {
        1
    }

    fn build(self: Box<Self>) -> TraceRecord {
        let summary = Summary {
            ctx: &self.ctx,
            endpoint: self.endpoint,
            model: &self.model,
            tenant_id: &self.tenant_id,
            key_id: &self.key_id,
            request_id: &self.request_id,
            arrived: self.arrived.0,
            arrived_unix: self.arrived.1,
            ended: self.ended,
            status: self.status,
            error: Some(self.kind),
            outcome: "refused",
        };
        let mut span = summary.server_span();
        span.attributes.push(("sluicegate.refusal.reason", self.kind.reason().into()));
        summary.record(vec![span])
    }
}
