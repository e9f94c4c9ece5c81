//! What is measured about one routed request, and the guard that turns it into exactly one usage
//! event: `finish` on a known end, `Drop` when the request future or the response body is dropped
//! (the client went away), whichever comes first.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::clock::unix_now;
use crate::config::{KeyEntry, Price, Priority, ProviderKind, RouteLeg};
use crate::endpoint::Endpoint;
use crate::error::{ErrorKind, Origin};
use crate::limits::Held;
use crate::metrics::{operation_index, GenAiSeries, LegSeries, PoolSeries};
use crate::routing::PoolState;
use crate::sse::TokenUsage;
use crate::stats::{Observation, Windows};
use crate::usage::{BeginRecord, Outcome, ProgressRecord, ReportedUsage, Ticket, UsageEvent, UsageSource};

use super::context::RequestCtx;
use super::forwarded::{Finished, Forwarded};
use super::shared::Shared;
use super::spans::{AttemptSpan, TraceCtx};

/// The upstream a request was sent to.
pub struct Leg {
    pub pool: Arc<str>,
    pub member: Arc<str>,
    pub upstream_model: Arc<str>,
    pub provider: ProviderKind,
    pub host: Arc<str>,
    pub port: u16,
    pub series: Arc<LegSeries>,
    pub genai: Arc<GenAiSeries>,
    pub pool_series: Arc<PoolSeries>,
    pub pool_state: Arc<PoolState>,
}

impl Leg {
    pub fn new(leg: &RouteLeg, member_index: usize) -> Self {
        Self {
            pool: leg.pool.id.clone(),
            member: leg.pool.members[member_index].id.clone(),
            upstream_model: leg.upstream_model.clone(),
            provider: leg.pool.members[member_index].kind,
            host: leg.pool.members[member_index].host.clone(),
            port: leg.pool.members[member_index].port,
            series: leg.series[member_index].clone(),
            genai: leg.genai[member_index].clone(),
            pool_series: leg.pool.series.clone(),
            pool_state: leg.pool.state.clone(),
        }
    }
}

pub struct Trace {
    pub request_id: Arc<str>,
    pub key: Arc<KeyEntry>,
    pub endpoint: Endpoint,
    pub model: Arc<str>,
    pub stream: bool,
    pub priority: Priority,
    pub arrived: Instant,
    pub arrived_unix: f64,
    pub prompt_estimate: u64,
    pub client_retry_count: Option<u32>,
    /// `x-sluicegate-tags` as a JSON object's text, and the end user the body named.
    pub tags: Option<Arc<str>>,
    pub end_user: Option<Arc<str>>,
    pub leg: Option<Leg>,
    pub attempts: u32,
    pub fallback: bool,
    pub queue_wait: Duration,
    /// Gateway time before the (last) upstream attempt was sent.
    pub overhead_before: Duration,
    pub connect: Option<Duration>,
    /// When upstream response headers arrived (the upstream accepted the request).
    pub headers_at: Option<Instant>,
    pub first_token_at: Option<Instant>,
    pub status: u16,
    pub relayed_tokens: u64,
    /// Prompt tokens the upstream reported before the response ended (Anthropic `message_start`).
    pub reported_prompt: Option<u64>,
    /// Final usage as the upstream reported it; `None` if the response did not end properly.
    pub usage: Option<TokenUsage>,
    pub error: Option<ErrorKind>,
    /// Limit charges, settled to the billed tokens when the event is emitted.
    pub held: Held,
    pub price: Option<Price>,
    pub route_windows: Arc<Windows>,
    /// Where the journal holds this request's begin record (and its latest progress record).
    pub journal: Option<Ticket>,
    /// The upstream's usage as the stream's tap has seen it so far.
    pub streamed_usage: Option<TokenUsage>,
    /// Content events the latest progress record counted, and when it was written.
    pub progress_relayed: u64,
    pub progress_at: Option<Instant>,
    /// The trace the request belongs to, and (with a tracer) its upstream attempts.
    pub trace_ctx: TraceCtx,
    pub admitted_at: Instant,
    pub attempt_spans: Vec<AttemptSpan>,
    pub output_cap: Option<u64>,
}

impl Trace {
    /// A request reached routing after waiting `queue_wait` for admission.
    pub fn new(ctx: &mut RequestCtx, queue_wait: Duration) -> Trace {
        Trace {
            request_id: ctx.request_id.clone(),
            key: ctx.key.clone(),
            endpoint: ctx.endpoint,
            model: ctx.route.alias.clone(),
            stream: ctx.peeked.stream,
            priority: ctx.priority,
            arrived: ctx.arrived,
            arrived_unix: ctx.arrived_unix,
            prompt_estimate: ctx.peeked.prompt.tokens(),
            client_retry_count: ctx.client_retry_count(),
            tags: ctx.tags.clone(),
            end_user: ctx.peeked.end_user.clone(),
            leg: None,
            attempts: 0,
            fallback: false,
            queue_wait,
            overhead_before: Duration::ZERO,
            connect: None,
            headers_at: None,
            first_token_at: None,
            status: 0,
            relayed_tokens: 0,
            reported_prompt: None,
            usage: None,
            error: None,
            held: std::mem::take(&mut ctx.held),
            price: ctx.route.price,
            route_windows: ctx.route.windows.clone(),
            journal: None,
            streamed_usage: None,
            progress_relayed: 0,
            progress_at: None,
            trace_ctx: ctx.trace.clone(),
            admitted_at: Instant::now(),
            attempt_spans: Vec::new(),
            output_cap: ctx.output_cap,
        }
    }

    /// The last attempt's span, still being filled in.
    pub fn attempt_span(&mut self) -> Option<&mut AttemptSpan> {
        self.attempt_spans.last_mut()
    }

    pub fn set_leg(&mut self, leg: Leg, leg_index: usize) {
        self.leg = Some(leg);
        self.attempts += 1;
        self.fallback = leg_index > 0;
    }

    /// An attempt went out: the gateway's own time so far is its overhead.
    pub fn mark_sent(&mut self, at: Instant) {
        self.overhead_before = at.saturating_duration_since(self.arrived).saturating_sub(self.queue_wait);
    }

    /// Journal that the request is about to reach an upstream (once, before the first attempt),
    /// so a crash from here on still bills it.
    pub fn journal_begin(&mut self, shared: &Shared) {
        if self.journal.is_some() {
            return;
        }
        let (upstream_model, pool, upstream) = match &self.leg {
            Some(leg) => (Some(leg.upstream_model.clone()), Some(leg.pool.clone()), Some(leg.member.clone())),
            None => (None, None, None),
        };
        self.journal = shared.usage.begin(|seq| BeginRecord {
            seq,
            request_id: self.request_id.clone(),
            key_id: self.key.id.clone(),
            key_prefix: self.key.prefix.clone(),
            tenant_id: self.key.tenant.id.clone(),
            endpoint: self.endpoint.as_str().to_string(),
            model: self.model.clone(),
            upstream_model,
            pool,
            upstream,
            priority: self.priority.as_str().to_string(),
            stream: self.stream,
            prompt_estimate: self.prompt_estimate,
            started_at: self.arrived_unix,
            price_version: self.price.map(|p| p.version),
            prompt_cost_micros: self
                .price
                .map_or(0, |p| p.cost(&TokenUsage { prompt: self.prompt_estimate, ..TokenUsage::default() })),
            input_per_mtok: self.price.map(|p| p.input_per_mtok),
            output_per_mtok: self.price.map(|p| p.output_per_mtok),
            cached_input_per_mtok: self.price.map(|p| p.cached_input_per_mtok),
            cache_write_per_mtok: self.price.map(|p| p.cache_write_per_mtok),
            reasoning_per_mtok: self.price.map(|p| p.reasoning_per_mtok),
            client_retry_count: self.client_retry_count,
            tags: self.tags.clone(),
            end_user: self.end_user.clone(),
        });
    }

    /// A stream is about to relay its next frame: journal what went to the client before it,
    /// once `progress_every_events` content events and one journal commit interval have passed
    /// since the last record (whichever comes later), so that a crash under-bills a stream by
    /// at most that much. The frame being relayed is not counted: the client may not get it.
    pub fn journal_progress(&mut self, shared: &Shared, now: Instant) {
        let relayed = self.relayed_tokens;
        let every = shared.settings.progress_every_events;
        if every == 0 || relayed < self.progress_relayed + every {
            return;
        }
        if self.progress_at.is_some_and(|at| now.saturating_duration_since(at) < shared.usage.sync_interval()) {
            return;
        }
        let Some(ticket) = self.journal.as_mut() else {
            return;
        };
        let record = ProgressRecord {
            request_id: self.request_id.clone(),
            relayed,
            reported_prompt: self.reported_prompt,
            usage: self.streamed_usage.map(ReportedUsage::from),
        };
        shared.usage.progress(ticket, &record);
        self.progress_relayed = relayed;
        self.progress_at = Some(now);
    }

    pub fn mark_headers(&mut self, status: u16, connect: Option<Duration>) {
        self.status = status;
        self.headers_at = Some(Instant::now());
        self.connect = connect;
    }
}

pub struct UsageGuard {
    trace: Option<Box<Trace>>,
    shared: Arc<Shared>,
}

impl UsageGuard {
    pub fn new(shared: Arc<Shared>, trace: Trace) -> Self {
        Self { trace: Some(Box::new(trace)), shared }
    }

    /// The live trace; `None` only after `finish`.
    pub fn trace(&mut self) -> Option<&mut Trace> {
        self.trace.as_deref_mut()
    }

    /// See `Trace::journal_progress`.
    pub fn journal_progress(&mut self, now: Instant) {
        if let Some(trace) = self.trace.as_deref_mut() {
            trace.journal_progress(&self.shared, now);
        }
    }

    pub fn finish(&mut self, outcome: Outcome) {
        if let Some(trace) = self.trace.take() {
            emit(&self.shared, *trace, outcome);
        }
    }
}

impl Drop for UsageGuard {
    fn drop(&mut self) {
        self.finish(Outcome::ClientCancelled);
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn emit(shared: &Shared, mut t: Trace, outcome: Outcome) {
    let now = Instant::now();
    if t.status == 0 {
        // No response reached the client; 499 is nginx's "client closed request".
        t.status = match outcome {
            Outcome::ClientCancelled | Outcome::Interrupted => 499,
            Outcome::Timeout => 504,
            Outcome::UpstreamError | Outcome::Complete => 502,
        };
    }
    let duration = now.saturating_duration_since(t.arrived);
    let accepted = t.headers_at.is_some() && (200..300).contains(&t.status);
    // Billing policy (ARCHITECTURE.md): upstream counts when the upstream reported them; otherwise
    // the prompt estimate plus the tokens actually relayed, once the upstream accepted the request.
    let (usage, source) = match (t.usage, accepted) {
        (Some(u), _) => (u, UsageSource::Upstream),
        (None, true) => (
            TokenUsage {
                prompt: t.reported_prompt.unwrap_or(t.prompt_estimate),
                completion: t.relayed_tokens,
                ..TokenUsage::default()
            },
            UsageSource::Estimated,
        ),
        (None, false) => (TokenUsage::default(), UsageSource::Estimated),
    };
    let ttft = t.first_token_at.map(|at| at.saturating_duration_since(t.arrived));
    let output_tokens = if t.stream { usage.completion.max(t.relayed_tokens) } else { usage.completion };
    let tpot = match ttft {
        Some(ttft) if output_tokens > 1 => Some(duration.saturating_sub(ttft).div_f64((output_tokens - 1) as f64)),
        _ => None,
    };

    let cost_micros = t.price.map_or(0, |p| p.cost(&usage));
    t.held.settle(usage.prompt + usage.completion, cost_micros);
    if let Some(leg) = &t.leg {
        let s = &leg.series;
        s.count_request(t.endpoint, t.status);
        s.duration.observe_duration(duration);
        if let Some(v) = ttft {
            s.ttft.observe_duration(v);
        }
        if let Some(v) = tpot {
            s.tpot.observe_duration(v);
        }
        if let Some(v) = t.connect {
            s.connect.observe_duration(v);
        }
        if outcome == Outcome::Timeout {
            s.timeouts.fetch_add(1, Ordering::Relaxed);
        }
        s.input_tokens.fetch_add(usage.prompt, Ordering::Relaxed);
        s.output_tokens.fetch_add(usage.completion, Ordering::Relaxed);
        leg.pool_series.queue_wait[t.priority.index()].observe_duration(t.queue_wait);
        leg.pool_series.overhead.observe_duration(t.overhead_before);
        let op = &leg.genai.ops[operation_index(t.endpoint)];
        op.duration[error_type(outcome, t.status)].observe_duration(duration);
        if let Some(v) = ttft {
            op.ttft.observe_duration(v);
        }
        if let Some(v) = tpot {
            op.tpot.observe_duration(v);
        }
        if accepted {
            op.input_tokens.observe(usage.prompt as f64);
            op.output_tokens.observe(usage.completion as f64);
        }
    }
    t.key.tenant.series.count(t.status, usage.prompt, usage.completion, cost_micros);

    let observation = Observation {
        error: outcome != Outcome::Complete || t.status >= 500,
        timeout: outcome == Outcome::Timeout,
        client_retry: t.client_retry_count.is_some_and(|n| n > 0),
        output_tokens: usage.completion,
        ttft_ms: ttft.map(ms),
        tpot_ms: tpot.map(ms),
        total_ms: ms(duration),
        queue_wait_ms: ms(t.queue_wait),
    };
    let now_unix = unix_now() as u64;
    t.route_windows.record(now_unix, &observation);
    if let Some(leg) = &t.leg {
        leg.pool_state.windows.record(now_unix, &observation);
    }
    if let Some(tracer) = &shared.tracer {
        let fault = (observation.error || t.error.is_some()) && !t.error.is_some_and(is_refusal);
        if tracer.sampler().keep(t.trace_ctx.head_sampled, fault, duration) {
            let finished = Finished { outcome, usage, source, cost_micros, ttft, now };
            tracer.submit(Forwarded::take(&mut t, finished), now);
        }
    }
    let (upstream_model, pool, upstream) = match t.leg {
        Some(leg) => (Some(leg.upstream_model), Some(leg.pool), Some(leg.member)),
        None => (None, None, None),
    };
    shared.metrics.global.usage_events.fetch_add(1, Ordering::Relaxed);
    let ticket = t.journal.take();
    let line = shared.usage.record(
        UsageEvent {
            seq: 0,
            request_id: t.request_id,
            key_id: t.key.id.clone(),
            key_prefix: t.key.prefix.clone(),
            tenant_id: t.key.tenant.id.clone(),
            endpoint: t.endpoint.as_str(),
            model: t.model,
            upstream_model,
            pool,
            upstream,
            priority: t.priority.as_str(),
            stream: t.stream,
            status: t.status,
            outcome,
            error_code: t.error.map(ErrorKind::code),
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
            cached_tokens: usage.cached,
            cache_write_tokens: usage.cache_write,
            reasoning_tokens: usage.reasoning,
            usage_source: source,
            cost_micros,
            price_version: t.price.map(|p| p.version),
            queue_wait_ms: ms(t.queue_wait),
            connect_ms: t.connect.map(ms),
            ttft_ms: ttft.map(ms),
            tpot_ms: tpot.map(ms),
            duration_ms: ms(duration),
            started_at: t.arrived_unix,
            attempts: t.attempts,
            fallback: t.fallback,
            client_retry_count: t.client_retry_count,
            tags: t.tags,
            end_user: t.end_user,
        },
        ticket,
        shared.access_log.is_some(),
    );
    if let (Some(log), Some(line)) = (&shared.access_log, line) {
        log.write(line);
    }
}

/// The `error.type` of `gen_ai.server.request.duration` (an index of `metrics::ERROR_TYPES`).
fn error_type(outcome: Outcome, status: u16) -> usize {
    match outcome {
        Outcome::Timeout => 1,
        Outcome::UpstreamError => 2,
        Outcome::ClientCancelled | Outcome::Interrupted => 3,
        Outcome::Complete if status >= 500 => 5,
        Outcome::Complete if status >= 400 => 4,
        Outcome::Complete => 0,
    }
}

/// A 4xx the client caused and can cause at will (a bad body or key, a rate limit, a quota):
/// traced under the sample ratio only. The gateway's own 5xx (a full queue included: it is the
/// overload the operator must see) and every upstream fault are always kept.
fn is_refusal(kind: ErrorKind) -> bool {
    kind.origin() == Origin::Downstream
}
