//! Forwarding an admitted request: pools in the route's chain order, members by the picker,
//! and retries while nothing has reached the client yet. A retry happens only for what the pool's
//! policy names (connect failure, reset, timeout, a listed status), on another member when there
//! is one, after a full-jitter backoff (or the member's own `retry-after`), within the request's
//! deadline, and only while the pool's retry budget allows. When retries run out, the client gets
//! the last upstream answer as it was, or the gateway's error.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Response, Uri};
use smallvec::SmallVec;

use super::context::RequestCtx;
use super::relay::{RelayBody, RelayMode, Timers, Translating};
use super::respond::ProxyBody;
use super::spans::AttemptSpan;
use super::trace::{Leg, Trace, UsageGuard};
use crate::admission::{Entry, Permit};
use crate::config::{Member, Pool, ProviderKind, RouteLeg};
use crate::error::{ErrorKind, GatewayError};
use crate::header_names::{
    ANTHROPIC_VERSION, RETRY_AFTER_MS, X_REQUEST_ID, X_SLUICEGATE_FALLBACK, X_SLUICEGATE_UPSTREAM,
};
use crate::routing::{pick_member, Availability, MemberLease, RetryReason, Verdict};
use crate::sse::{SseTap, WholeBodyMeter};
use crate::translate::{translate_request, StreamTranslator, Translation};
use crate::upstream::headers::{client_response_headers, upstream_request_headers};
use crate::upstream::{ConnectTiming, UpstreamError, UpstreamIncoming};
use crate::usage::Outcome;

fn upstream_request(member: &Member, uri: &Uri, ctx: &RequestCtx, body: Bytes, attempt_span: u64) -> Request<Bytes> {
    let mut headers = upstream_request_headers(&ctx.client_headers, &member.pass_through, &member.headers);
    ctx.trace.write_upstream(&mut headers, attempt_span);
    if let Some((name, value)) = &member.credential {
        headers.insert(name.clone(), value.clone());
    }
    if member.kind == ProviderKind::Anthropic && !headers.contains_key(ANTHROPIC_VERSION) {
        headers.insert(ANTHROPIC_VERSION, HeaderValue::from_static("2023-06-01"));
    }
    if let Ok(id) = HeaderValue::from_str(&ctx.request_id) {
        headers.insert(X_REQUEST_ID, id);
    }
    let mut req = Request::new(body);
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri.clone();
    *req.headers_mut() = headers;
    req
}

fn transport_error(e: &UpstreamError) -> (GatewayError, RetryReason) {
    if let UpstreamError::Connect { timed_out, .. } = e {
        if *timed_out {
            let error = GatewayError::new(ErrorKind::UpstreamConnectTimeout, "connecting to the upstream timed out");
            return (error, RetryReason::Connect);
        }
        return (
            GatewayError::new(ErrorKind::UpstreamConnect, "could not connect to the upstream"),
            RetryReason::Connect,
        );
    }
    let error = GatewayError::new(ErrorKind::UpstreamProtocol, "the upstream closed the connection before answering");
    (error, RetryReason::Reset)
}

/// The upstream's own `retry-after-ms` or `retry-after` (seconds), if any.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let read =
        |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<f64>().ok());
    if let Some(ms) = read(RETRY_AFTER_MS).filter(|v| v.is_finite() && *v >= 0.0) {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    read(header::RETRY_AFTER).filter(|v| v.is_finite() && *v >= 0.0).map(Duration::from_secs_f64)
}

fn deadline_passed() -> GatewayError {
    GatewayError::new(ErrorKind::DeadlineExceeded, "the request's deadline passed before an upstream answered")
}

fn fail(guard: &mut UsageGuard, error: GatewayError, outcome: Outcome) -> GatewayError {
    if let Some(trace) = guard.trace() {
        trace.error = Some(error.kind);
        trace.status = error.status().as_u16();
    }
    guard.finish(outcome);
    error
}

fn outcome_of(kind: ErrorKind) -> Outcome {
    match kind {
        ErrorKind::UpstreamTimeout | ErrorKind::UpstreamConnectTimeout | ErrorKind::DeadlineExceeded => {
            Outcome::Timeout
        }
        _ => Outcome::UpstreamError,
    }
}

/// Take a slot in a fallback pool: now, or after a bounded wait; `None` if it is refused.
async fn enter_fallback(ctx: &RequestCtx, leg: &RouteLeg) -> Option<Permit> {
    match leg.pool.gate.enter(ctx.priority, &ctx.key.tenant.id, ctx.deadline.map(tokio::time::Instant::from_std)) {
        Ok(Entry::Admitted(permit)) => Some(permit),
        Ok(Entry::Queued(ticket)) => ticket.wait().await.ok(),
        Err(_) => None,
    }
}

/// An upstream answer kept while a retry is tried: relayed if the retries run out.
struct Kept {
    response: Response<UpstreamIncoming>,
    lease: MemberLease,
    member_index: usize,
    sent_at: Instant,
}

/// What the last failed attempt left: an answer to relay, or an error.
enum Last {
    Nothing,
    Answer(Box<Kept>),
    Error(GatewayError),
}

/// When a member of `pool` that is only cooling down (429) will be back, if within `limit`.
fn cooldown_ends_within(pool: &Pool, limit: Duration) -> Option<Duration> {
    pool.members
        .iter()
        .filter(|m| m.state.availability() == Availability::CoolingDown)
        .filter_map(|m| m.state.out_for())
        .filter(|d| *d <= limit)
        .min()
}

/// How long until some member of the route is back, for a `retry-after` on 503.
fn soonest_back(legs: &[RouteLeg]) -> Duration {
    legs.iter()
        .flat_map(|leg| leg.pool.members.iter())
        .filter_map(|m| m.state.out_for())
        .min()
        .unwrap_or(Duration::from_secs(1))
        .max(Duration::from_secs(1))
}

/// Forward from the `first_leg` of the route's chain, holding `permit` for that leg's pool.
// Not an `async fn`, on purpose (the body's first comment says why).
#[allow(clippy::manual_async_fn)]
pub fn forward(
    mut ctx: RequestCtx,
    first_leg: usize,
    permit: Permit,
    queue_wait: Duration,
) -> impl Future<Output = Result<Response<ProxyBody>, GatewayError>> {
    // An `async move` block, not an `async fn`: an async fn keeps its arguments twice in its
    // future (as passed, and as bound in its body), and the request's context is 672 bytes;
    // every byte of a future is copied each time it moves into its parent's.
    async move {
        let trace = Trace::new(&mut ctx, queue_wait);
        let mut guard = UsageGuard::new(ctx.shared.clone(), trace);
        let route = ctx.route.clone();
        let want_usage = ctx.want_usage();
        let mut permit = Some(permit);
        let mut attempts: u32 = 0;
        let mut last = Last::Nothing;
        let mut deposited = false;
        for (leg_index, leg) in route.chain.iter().enumerate().skip(first_leg) {
            let pool = &leg.pool;
            if !pool.serves(ctx.endpoint) || pool.state.drilled() {
                permit = None;
                continue;
            }
            let slot = match permit.take() {
                Some(p) => p,
                None => match enter_fallback(&ctx, leg).await {
                    Some(p) => p,
                    None => continue,
                },
            };
            let policy = &pool.retry;
            if !deposited {
                pool.state.budget.deposit(policy.budget_min_per_second, policy.budget_ratio);
                deposited = true;
            }
            let mut tried: SmallVec<[usize; 4]> = SmallVec::new();
            // A member's own retry-after, honoured when the retry goes back to that member.
            let mut wait_hint: Option<(usize, Duration)> = None;
            loop {
                if attempts >= policy.max_attempts {
                    break;
                }
                let picked = pick_member(&pool.members, &tried).or_else(|| pick_member(&pool.members, &[]));
                let mi = match picked {
                    Some(mi) => mi,
                    None => {
                        // Only cooling members left: wait for the soonest if the policy allows it.
                        let left = ctx.deadline.map_or(Duration::MAX, |d| d.saturating_duration_since(Instant::now()));
                        match cooldown_ends_within(pool, policy.max_retry_after.min(left)) {
                            Some(wait) => {
                                tokio::time::sleep(wait).await;
                                continue;
                            }
                            None => break,
                        }
                    }
                };
                // The lease first: it also owns the probe the picker may have claimed, and gives it
                // back (verdict neutral) if this attempt is not sent after all.
                let mut lease = MemberLease::new(pool.clone(), mi);
                if attempts > 0 {
                    if !pool.state.budget.try_withdraw(policy.budget_min_per_second, policy.budget_ratio) {
                        pool.state.budget_exhausted.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    let mut backoff = policy.backoff(attempts);
                    if let Some((_, hint)) = wait_hint.take().filter(|(hinted, _)| *hinted == mi) {
                        backoff = backoff.max(hint);
                    }
                    if ctx.deadline.is_some_and(|d| Instant::now() + backoff >= d) {
                        break;
                    }
                    tokio::time::sleep(backoff).await;
                }
                attempts += 1;
                tried.push(mi);
                pool.series.attempts.fetch_add(1, Ordering::Relaxed);
                let member = &pool.members[mi];
                if let Some(trace) = guard.trace() {
                    trace.set_leg(Leg::new(leg, mi), leg_index);
                }
                let translation = pool.translation(ctx.endpoint);
                let body = match upstream_body(&ctx, leg, want_usage, translation) {
                    Ok(body) => body,
                    Err(e) => return Err(fail(&mut guard, e, Outcome::UpstreamError)),
                };
                let traced = ctx.shared.tracer.is_some();
                let attempt_span = if traced { crate::telemetry::new_span_id() } else { 0 };
                let upstream_endpoint = translation.map_or(ctx.endpoint, Translation::upstream_endpoint);
                let uri = &leg.uris[mi][upstream_endpoint.index()];
                let request = upstream_request(member, uri, &ctx, body, attempt_span);
                let sent_at = Instant::now();
                if let Some(trace) = guard.trace() {
                    trace.journal_begin(&ctx.shared);
                    trace.mark_sent(sent_at);
                    if traced {
                        trace.attempt_spans.push(AttemptSpan {
                            span_id: attempt_span,
                            number: attempts,
                            pool: pool.id.clone(),
                            member: member.id.clone(),
                            upstream_model: leg.upstream_model.clone(),
                            provider: member.kind,
                            host: member.host.clone(),
                            port: member.port,
                            sent: sent_at,
                            ended: None,
                            status: 0,
                            error: None,
                            connect: None,
                        });
                    }
                }
                // A stream must start within `first_byte`; a whole answer only arrives when it is
                // complete, so it gets the overall deadline. Both are capped by the client's.
                let timeouts = &pool.timeouts;
                let mut wait = if ctx.peeked.stream { timeouts.first_byte } else { timeouts.total };
                let mut capped = false;
                if let Some(deadline) = ctx.deadline {
                    let left = deadline.saturating_duration_since(sent_at);
                    if left.is_zero() {
                        return Err(fail(&mut guard, deadline_passed(), Outcome::Timeout));
                    }
                    if left < wait {
                        wait = left;
                        capped = true;
                    }
                }
                let (error, reason) = match tokio::time::timeout(wait, member.client.request(request)).await {
                    Err(_) if capped => {
                        lease.set_verdict(Verdict::Failure);
                        return Err(fail(&mut guard, deadline_passed(), Outcome::Timeout));
                    }
                    Err(_) => {
                        let message = format!("the upstream did not answer within {} ms", wait.as_millis());
                        (GatewayError::new(ErrorKind::UpstreamTimeout, message), RetryReason::Timeout)
                    }
                    Ok(Err(e)) => {
                        tracing::debug!(request_id = %ctx.request_id, upstream = %member.id, error = ?e, "upstream attempt failed");
                        transport_error(&e)
                    }
                    Ok(Ok(response)) => {
                        let status = response.status().as_u16();
                        member.state.record_ttfb(sent_at.elapsed());
                        if let Some(span) = guard.trace().and_then(Trace::attempt_span) {
                            span.status = status;
                            span.connect = connect_time(&response, sent_at);
                        }
                        let reason = match status {
                            401 | 403 => {
                                // The upstream refused the operator's credential (or account): the
                                // tenant gets the gateway's own error, never the upstream's words.
                                lease.set_verdict(if status == 401 { Verdict::Failure } else { Verdict::Neutral });
                                tracing::warn!(
                                    request_id = %ctx.request_id, pool = %pool.id, upstream = %member.id, status,
                                    "the upstream refused the member's credential"
                                );
                                let error = GatewayError::new(
                                    ErrorKind::UpstreamAuth,
                                    format!("the upstream refused the gateway's credentials (HTTP {status})"),
                                );
                                return Err(fail(&mut guard, error, Outcome::UpstreamError));
                            }
                            429 => {
                                let after = retry_after(response.headers()).unwrap_or(Duration::from_secs(1));
                                member.state.cool_down(after);
                                wait_hint = Some((mi, after)).filter(|(_, a)| *a <= policy.max_retry_after);
                                Some(RetryReason::Status429)
                            }
                            500..=599 => {
                                lease.set_verdict(Verdict::Failure);
                                Some(RetryReason::Status5xx)
                            }
                            _ => {
                                lease.set_verdict(if status < 400 { Verdict::Success } else { Verdict::Neutral });
                                None
                            }
                        };
                        match reason {
                            Some(reason) if policy.retries(reason, status) => {
                                pool.series.retries[reason.index()].fetch_add(1, Ordering::Relaxed);
                                if let Some(span) = guard.trace().and_then(Trace::attempt_span) {
                                    span.ended = Some(Instant::now());
                                }
                                last = Last::Answer(Box::new(Kept { response, lease, member_index: mi, sent_at }));
                                continue;
                            }
                            _ => {
                                let attempt =
                                    Attempt { leg, member_index: mi, leg_index, sent_at, permit: slot, lease };
                                return Ok(relay(response, &ctx, attempt, guard));
                            }
                        }
                    }
                };
                lease.set_verdict(Verdict::Failure);
                if let Some(span) = guard.trace().and_then(Trace::attempt_span) {
                    span.ended = Some(Instant::now());
                    span.error = Some(error.kind);
                }
                if !policy.retries(reason, 0) {
                    let outcome = outcome_of(error.kind);
                    return Err(fail(&mut guard, error, outcome));
                }
                pool.series.retries[reason.index()].fetch_add(1, Ordering::Relaxed);
                last = Last::Error(error);
            }
            // Leaving this pool: an answer kept from it needs its slot, so relay it now if no other
            // pool is left to try; otherwise let the next pool have its go.
            if let Last::Answer(kept) = last {
                if !route.chain[leg_index + 1..].iter().any(|l| l.pool.serves(ctx.endpoint) && !l.pool.state.drilled())
                {
                    let Kept { response, lease, member_index, sent_at } = *kept;
                    let attempt = Attempt { leg, member_index, leg_index, sent_at, permit: slot, lease };
                    return Ok(relay(response, &ctx, attempt, guard));
                }
                last =
                    Last::Error(GatewayError::new(ErrorKind::NoHealthyUpstream, "the upstream answered with an error"));
            }
        }
        let error = match last {
            Last::Error(e) => e,
            _ => GatewayError::new(ErrorKind::NoHealthyUpstream, "no upstream can take this request now")
                .with_retry_after(soonest_back(&route.chain)),
        };
        let error = if error.retry_after.is_none() && error.status().as_u16() == 503 {
            error.with_retry_after(soonest_back(&route.chain))
        } else {
            error
        };
        let outcome = outcome_of(error.kind);
        Err(fail(&mut guard, error, outcome))
    }
}

/// The body sent to a leg's pool: the client's, with the leg's model, the gateway's cap and usage
/// request, translated when the pool speaks the other API.
fn upstream_body(
    ctx: &RequestCtx,
    leg: &RouteLeg,
    want_usage: bool,
    translation: Option<Translation>,
) -> Result<Bytes, GatewayError> {
    let body = ctx.peeked.rewrite(&leg.model_json, want_usage, ctx.cap_edit())?;
    match translation {
        Some(t) => translate_request(t, &body),
        None => Ok(body),
    }
}

/// How long the attempt's connection took to open, if the attempt opened it.
fn connect_time(response: &Response<UpstreamIncoming>, sent_at: Instant) -> Option<Duration> {
    response.extensions().get::<ConnectTiming>().filter(|t| t.finished >= sent_at).map(|t| t.took)
}

/// How an answer from a pool of the other API is relayed: a stream through the translating tap,
/// anything else held whole and translated at its end (its length changes, so it goes chunked).
fn translated_mode(
    translation: Translation,
    parts: &mut http::response::Parts,
    is_sse: bool,
    ctx: &RequestCtx,
    member: &Member,
) -> RelayMode {
    parts.headers.remove(header::CONTENT_LENGTH);
    if is_sse {
        let translator =
            StreamTranslator::new(translation, ctx.peeked.client_include_usage, crate::clock::unix_now() as u64);
        let tap = SseTap::translating(translation.upstream_flavor(), translator);
        return RelayMode::Stream { tap, flavor: ctx.endpoint.flavor() };
    }
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let status = parts.status;
    RelayMode::Translated(Box::new(Translating {
        translation,
        kept: Vec::new(),
        error_status: (!status.is_success()).then_some(status.as_u16()),
        meter: WholeBodyMeter::default(),
        secret: member.secret.clone(),
    }))
}

struct Attempt<'a> {
    leg: &'a RouteLeg,
    member_index: usize,
    leg_index: usize,
    sent_at: Instant,
    permit: Permit,
    lease: MemberLease,
}

fn relay(
    response: Response<UpstreamIncoming>,
    ctx: &RequestCtx,
    attempt: Attempt<'_>,
    mut guard: UsageGuard,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    let status = parts.status;
    let connect = parts.extensions.get::<ConnectTiming>().filter(|t| t.finished >= attempt.sent_at).map(|t| t.took);
    if let Some(trace) = guard.trace() {
        trace.mark_headers(status.as_u16(), connect);
    }
    parts.headers = client_response_headers(std::mem::take(&mut parts.headers));
    let is_sse = status.is_success()
        && parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    let leg = attempt.leg;
    let timeouts = &leg.pool.timeouts;
    let flavor = ctx.endpoint.flavor();
    let translation = leg.pool.translation(ctx.endpoint);
    let mode = if let Some(translation) = translation {
        translated_mode(translation, &mut parts, is_sse, ctx, &leg.pool.members[attempt.member_index])
    } else if is_sse {
        let hide_usage = ctx.want_usage() && !ctx.peeked.client_include_usage;
        if hide_usage {
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        RelayMode::Stream { tap: SseTap::new(flavor, hide_usage), flavor }
    } else if status.is_success() {
        RelayMode::Whole { meter: Some(Box::default()) }
    } else {
        match &leg.pool.members[attempt.member_index].secret {
            Some(secret) => {
                // Scrubbing may change the length.
                parts.headers.remove(header::CONTENT_LENGTH);
                RelayMode::Scrubbed { kept: Vec::new(), secret: secret.clone() }
            }
            None => RelayMode::Whole { meter: None },
        }
    };
    let timers = Timers {
        idle: timeouts.idle,
        first_token: is_sse.then(|| attempt.sent_at + timeouts.first_byte),
        total: (!is_sse).then(|| attempt.sent_at + timeouts.total),
        client_deadline: ctx.deadline,
    };
    let member = &leg.pool.members[attempt.member_index];
    if ctx.shared.settings.expose_upstream {
        if let Ok(v) = HeaderValue::from_str(&format!("{}/{}", leg.pool.id, member.id)) {
            parts.headers.insert(X_SLUICEGATE_UPSTREAM, v);
        }
    }
    if attempt.leg_index > 0 {
        parts.headers.insert(X_SLUICEGATE_FALLBACK, HeaderValue::from_static("1"));
    }
    parts.extensions = http::Extensions::new();
    parts.version = ctx.client_version;
    let body = RelayBody::new(body, mode, timers, guard, (attempt.lease, attempt.permit));
    Response::from_parts(parts, ProxyBody::Relay(body))
}
