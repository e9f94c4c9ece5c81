//! Forwarding an admitted request: pick a pool along the route's chain and a member in it, send,
//! and hand the response to the relay. An attempt that failed before the upstream could act on
//! the request (connect refused or timed out) moves on to another member, then to the next pool
//! of the chain; nothing is retried once the upstream answered.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;

use super::context::RequestCtx;
use super::headers::{client_response_headers, upstream_request_headers};
use super::relay::{RelayBody, RelayMode, Timers};
use super::respond::ProxyBody;
use super::trace::{Leg, Trace, UsageGuard};
use super::upstream::ConnectTiming;
use crate::admission::{Entry, Permit};
use crate::config::{Member, ProviderKind, RouteLeg};
use crate::endpoint::Endpoint;
use crate::error::{ErrorKind, GatewayError};
use crate::routing::pick_member;
use crate::sse::SseTap;
use crate::usage::Outcome;

pub fn serves(kind: ProviderKind, endpoint: Endpoint) -> bool {
    match kind {
        ProviderKind::Anthropic => endpoint == Endpoint::Messages,
        ProviderKind::Openai => endpoint != Endpoint::Messages,
    }
}

fn upstream_request(member: &Member, ctx: &RequestCtx, body: Bytes) -> Request<Full<Bytes>> {
    let mut headers = upstream_request_headers(&ctx.client_headers);
    if let Some((name, value)) = &member.credential {
        headers.insert(name.clone(), value.clone());
    }
    if member.kind == ProviderKind::Anthropic && !headers.contains_key("anthropic-version") {
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
    }
    if let Ok(id) = HeaderValue::from_str(&ctx.request_id) {
        headers.insert("x-request-id", id);
    }
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = member.uris[ctx.endpoint.index()].clone();
    *req.headers_mut() = headers;
    req
}

fn upstream_error(e: &hyper_util::client::legacy::Error) -> GatewayError {
    if e.is_connect() {
        let text = format!("{e:?}");
        if text.contains("timed out") || text.contains("TimedOut") {
            return GatewayError::new(
                ErrorKind::UpstreamConnectTimeout,
                "connecting to the upstream timed out",
            );
        }
        return GatewayError::new(
            ErrorKind::UpstreamConnect,
            "could not connect to the upstream",
        );
    }
    GatewayError::new(
        ErrorKind::UpstreamProtocol,
        "the upstream failed before answering",
    )
}

fn deadline_passed() -> GatewayError {
    GatewayError::new(
        ErrorKind::DeadlineExceeded,
        "the request's deadline passed before an upstream answered",
    )
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
        ErrorKind::UpstreamTimeout
        | ErrorKind::UpstreamConnectTimeout
        | ErrorKind::DeadlineExceeded => Outcome::Timeout,
        _ => Outcome::UpstreamError,
    }
}

/// Take a slot in a fallback pool: now, or after a bounded wait; `None` if it is refused.
async fn enter_fallback(ctx: &RequestCtx, leg: &RouteLeg) -> Option<Permit> {
    match leg.pool.gate.enter(
        ctx.priority,
        &ctx.key.tenant.id,
        ctx.deadline.map(tokio::time::Instant::from_std),
    ) {
        Ok(Entry::Admitted(permit)) => Some(permit),
        Ok(Entry::Queued(ticket)) => ticket.wait().await.ok(),
        Err(_) => None,
    }
}

/// Forward from the `first_leg` of the route's chain, holding `permit` for that leg's pool.
pub async fn forward(
    mut ctx: RequestCtx,
    first_leg: usize,
    permit: Permit,
    queue_wait: Duration,
) -> Result<Response<ProxyBody>, GatewayError> {
    let trace = Trace::new(&mut ctx, queue_wait);
    let mut guard = UsageGuard::new(ctx.shared.clone(), trace);
    let route = ctx.route.clone();
    let want_usage = ctx.want_usage();
    let mut permit = Some(permit);
    let mut last_error: Option<GatewayError> = None;
    for (leg_index, leg) in route.chain.iter().enumerate().skip(first_leg) {
        if !serves(leg.pool.kind, ctx.endpoint) {
            continue;
        }
        let slot = match permit.take() {
            Some(p) => p,
            None => match enter_fallback(&ctx, leg).await {
                Some(p) => p,
                None => continue,
            },
        };
        let members = &leg.pool.members;
        let mut tried: Vec<usize> = Vec::new();
        while let Some(mi) = pick_member(members, &tried) {
            tried.push(mi);
            let member = &members[mi];
            if let Some(trace) = guard.trace() {
                trace.set_leg(Leg::new(leg, mi), leg_index);
            }
            let body = match ctx.peeked.rewrite(&leg.model_json, want_usage) {
                Ok(body) => body,
                Err(e) => return Err(fail(&mut guard, e, Outcome::UpstreamError)),
            };
            let request = upstream_request(member, &ctx, body);
            let inflight = member.state.enter();
            let sent_at = Instant::now();
            if let Some(trace) = guard.trace() {
                trace.mark_sent(sent_at);
            }
            let timeouts = &leg.pool.timeouts;
            // A stream must start within `first_byte`; a whole answer only arrives when it is
            // complete, so it gets the overall deadline. Both are capped by the client's.
            let mut wait = if ctx.peeked.stream {
                timeouts.first_byte
            } else {
                timeouts.total
            };
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
            let response = match tokio::time::timeout(wait, member.client.request(request)).await {
                Err(_) if capped => {
                    return Err(fail(&mut guard, deadline_passed(), Outcome::Timeout))
                }
                Err(_) => {
                    let e = GatewayError::new(
                        ErrorKind::UpstreamTimeout,
                        format!("the upstream did not answer within {} ms", wait.as_millis()),
                    );
                    return Err(fail(&mut guard, e, Outcome::Timeout));
                }
                Ok(Err(e)) => {
                    let error = upstream_error(&e);
                    tracing::debug!(request_id = %ctx.request_id, upstream = %member.id, error = ?e, "upstream attempt failed");
                    if error.kind.retry_safe() {
                        last_error = Some(error);
                        continue;
                    }
                    return Err(fail(&mut guard, error, Outcome::UpstreamError));
                }
                Ok(Ok(response)) => response,
            };
            let attempt = Attempt {
                leg,
                member_index: mi,
                leg_index,
                sent_at,
                permit: slot,
                inflight,
            };
            return Ok(relay(response, &ctx, attempt, guard));
        }
    }
    let error = last_error.unwrap_or_else(|| {
        GatewayError::new(
            ErrorKind::NoHealthyUpstream,
            "no upstream can take this request now",
        )
        .with_retry_after(Duration::from_secs(1))
    });
    let outcome = outcome_of(error.kind);
    Err(fail(&mut guard, error, outcome))
}

struct Attempt<'a> {
    leg: &'a RouteLeg,
    member_index: usize,
    leg_index: usize,
    sent_at: Instant,
    permit: Permit,
    inflight: crate::routing::InflightGuard,
}

fn relay(
    response: Response<Incoming>,
    ctx: &RequestCtx,
    attempt: Attempt<'_>,
    mut guard: UsageGuard,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    let status = parts.status;
    let connect = parts
        .extensions
        .get::<ConnectTiming>()
        .filter(|t| t.finished >= attempt.sent_at)
        .map(|t| t.took);
    if let Some(trace) = guard.trace() {
        trace.mark_headers(status.as_u16(), connect);
    }
    client_response_headers(&mut parts.headers);
    let is_sse = status.is_success()
        && parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    let leg = attempt.leg;
    let timeouts = &leg.pool.timeouts;
    let flavor = ctx.endpoint.flavor();
    let mode = if is_sse {
        let hide_usage = ctx.want_usage() && !ctx.peeked.client_include_usage;
        if hide_usage {
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        RelayMode::Stream {
            tap: SseTap::new(flavor, hide_usage),
            flavor,
        }
    } else {
        RelayMode::Whole {
            kept: Vec::new(),
            kept_len: 0,
            parse_usage: status.is_success(),
        }
    };
    let timers = Timers {
        idle: timeouts.idle,
        first_token: is_sse.then(|| attempt.sent_at + timeouts.first_byte),
        total: (!is_sse).then(|| attempt.sent_at + timeouts.total),
        client_deadline: ctx.deadline,
    };
    let member = &leg.pool.members[attempt.member_index];
    if let Ok(v) = HeaderValue::from_str(&format!("{}/{}", leg.pool.id, member.id)) {
        parts.headers.insert("x-sluicegate-upstream", v);
    }
    if attempt.leg_index > 0 {
        parts
            .headers
            .insert("x-sluicegate-fallback", HeaderValue::from_static("1"));
    }
    parts.extensions = http::Extensions::new();
    parts.version = ctx.client_version;
    let body = RelayBody::new(
        body,
        mode,
        timers,
        guard,
        (attempt.permit, attempt.inflight),
    );
    Response::from_parts(parts, ProxyBody::Relay(body))
}
