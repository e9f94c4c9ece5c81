//! The spans of a request that was forwarded, from what its `Trace` measured: taken at its end
//! (reference counts and moves only, on the request path) and built into spans by the exporter
//! thread (`PendingTrace::build`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::spans::{self, AttemptSpan, Summary, TraceCtx};
use super::trace::Trace;
use crate::config::{Priority, ProviderKind};
use crate::endpoint::Endpoint;
use crate::error::ErrorKind;
use crate::sse::TokenUsage;
use crate::usage::{Outcome, UsageSource};

/// What the end of a request decided, for its spans.
pub struct Finished {
    pub outcome: Outcome,
    pub usage: TokenUsage,
    pub source: UsageSource,
    pub cost_micros: u64,
    pub ttft: Option<Duration>,
    pub now: Instant,
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Complete => "complete",
        Outcome::ClientCancelled => "client_cancelled",
        Outcome::UpstreamError => "upstream_error",
        Outcome::Timeout => "timeout",
        Outcome::Interrupted => "interrupted",
    }
}

/// The upstream a forwarded request ended on, for its server span.
struct LegInfo {
    upstream_model: Arc<str>,
    provider: ProviderKind,
    host: Arc<str>,
    port: u16,
    pool: Arc<str>,
    member: Arc<str>,
}

/// What a forwarded request's spans are made of, taken from its `Trace` at the end (reference
/// counts and moves only); the exporter thread builds the spans.
pub struct Forwarded {
    ctx: TraceCtx,
    endpoint: Endpoint,
    model: Arc<str>,
    tenant_id: Arc<str>,
    key_id: Arc<str>,
    request_id: Arc<str>,
    arrived: Instant,
    arrived_unix: f64,
    status: u16,
    error: Option<ErrorKind>,
    leg: Option<LegInfo>,
    first_token_at: Option<Instant>,
    stream: bool,
    priority: Priority,
    attempts: u32,
    fallback: bool,
    queue_wait: Duration,
    admitted_at: Instant,
    attempt_spans: Vec<AttemptSpan>,
    output_cap: Option<u64>,
    finished: Finished,
}

impl Forwarded {
    pub fn take(t: &mut Trace, finished: Finished) -> Self {
        Self {
            ctx: std::mem::take(&mut t.trace_ctx),
            endpoint: t.endpoint,
            model: t.model.clone(),
            tenant_id: t.key.tenant.id.clone(),
            key_id: t.key.id.clone(),
            request_id: t.request_id.clone(),
            arrived: t.arrived,
            arrived_unix: t.arrived_unix,
            status: t.status,
            error: t.error,
            leg: t.leg.as_ref().map(|leg| LegInfo {
                upstream_model: leg.upstream_model.clone(),
                provider: leg.provider,
                host: leg.host.clone(),
                port: leg.port,
                pool: leg.pool.clone(),
                member: leg.member.clone(),
            }),
            first_token_at: t.first_token_at,
            stream: t.stream,
            priority: t.priority,
            attempts: t.attempts,
            fallback: t.fallback,
            queue_wait: t.queue_wait,
            admitted_at: t.admitted_at,
            attempt_spans: std::mem::take(&mut t.attempt_spans),
            output_cap: t.output_cap,
            finished,
        }
    }
}

impl crate::telemetry::PendingTrace for Forwarded {
    fn span_count(&self) -> usize {
        let connects = self.attempt_spans.iter().filter(|a| a.connect.is_some()).count();
        1 + usize::from(!self.queue_wait.is_zero()) + self.attempt_spans.len() + connects
    }

    /// The server span with the GenAI attributes, the queue wait, each attempt (and its
    /// connect), the first token.
    fn build(self: Box<Self>) -> crate::telemetry::TraceRecord {
        let t = &*self;
        let f = &t.finished;
        let summary = Summary {
            ctx: &t.ctx,
            endpoint: t.endpoint,
            model: &t.model,
            tenant_id: &t.tenant_id,
            key_id: &t.key_id,
            request_id: &t.request_id,
            arrived: t.arrived,
            arrived_unix: t.arrived_unix,
            ended: f.now,
            status: t.status,
            error: t.error.or(match f.outcome {
                Outcome::Timeout => Some(ErrorKind::UpstreamTimeout),
                _ => None,
            }),
            outcome: outcome_name(f.outcome),
        };
        let mut server = summary.server_span();
        if f.outcome != Outcome::Complete && server.error.is_none() {
            server.error = Some(outcome_name(f.outcome));
            server.attributes.push(("error.type", outcome_name(f.outcome).into()));
        }
        let a = &mut server.attributes;
        a.push(("gen_ai.usage.input_tokens", f.usage.prompt.into()));
        a.push(("gen_ai.usage.output_tokens", f.usage.completion.into()));
        if let Some(cap) = t.output_cap {
            a.push(("gen_ai.request.max_tokens", cap.into()));
        }
        if let Some(leg) = &t.leg {
            a.push(("gen_ai.response.model", (&leg.upstream_model).into()));
            a.push(("gen_ai.provider.name", leg.provider.as_str().into()));
            a.push(("gen_ai.system", leg.provider.as_str().into()));
            a.push(("server.address", (&leg.host).into()));
            a.push(("server.port", i64::from(leg.port).into()));
            a.push(("sluicegate.pool", (&leg.pool).into()));
            a.push(("sluicegate.upstream", (&leg.member).into()));
        }
        if let Some(ttft) = f.ttft {
            a.push(("gen_ai.server.time_to_first_token", ttft.as_secs_f64().into()));
        }
        a.push(("sluicegate.stream", t.stream.into()));
        a.push(("sluicegate.priority", t.priority.as_str().into()));
        a.push(("sluicegate.attempts", i64::from(t.attempts).into()));
        a.push(("sluicegate.fallback", t.fallback.into()));
        let source = if f.source == UsageSource::Upstream { "upstream" } else { "estimated" };
        a.push(("sluicegate.usage_source", source.into()));
        a.push(("sluicegate.cost_micros", f.cost_micros.into()));
        if let Some(at) = t.first_token_at {
            server.events.push(spans::first_token_event(&summary, at));
        }
        let mut out = Vec::with_capacity(2 + 2 * t.attempt_spans.len());
        out.push(server);
        if !t.queue_wait.is_zero() {
            let pool = t.attempt_spans.first().map(|s| &s.pool);
            out.push(spans::queue_span(&summary, t.admitted_at, t.queue_wait, pool));
        }
        for attempt in &t.attempt_spans {
            spans::attempt_spans(&summary, t.endpoint.operation(), attempt, &mut out);
        }
        summary.record(out)
    }
}
