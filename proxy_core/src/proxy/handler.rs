//! The request pipeline: route the path, authenticate, read and peek at the body, apply policy,
//! pick an upstream, forward, and relay the answer. Each step is a function of its own; this file
//! only composes them.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode, Version};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use super::auth::authenticate;
use super::headers::upstream_request_headers;
use super::peek::{peek, Peeked};
use super::relay::{RelayBody, RelayMode};
use super::respond::{self, ProxyBody};
use super::shared::Shared;
use super::trace::{Leg, Trace, UsageGuard};
use crate::clock::unix_now;
use crate::config::{KeyEntry, Member, Priority, ProviderKind, Route, RouteLeg, Snapshot};
use crate::endpoint::{Endpoint, Flavor};
use crate::error::{ErrorKind, GatewayError};
use crate::proxy::headers::client_response_headers;
use crate::proxy::upstream::ConnectTiming;
use crate::routing::pick_member;
use crate::sse::SseTap;
use crate::usage::Outcome;

fn new_request_id() -> String {
    format!(
        "req_{:012x}{:016x}",
        (unix_now() * 1000.0) as u64 & 0xffff_ffff_ffff,
        fastrand::u64(..)
    )
}

pub async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<ProxyBody>, Infallible> {
    let arrived = Instant::now();
    let request_id: Arc<str> = Arc::from(new_request_id());
    let endpoint = Endpoint::from_path(req.uri().path());
    let flavor = endpoint.map_or(Flavor::OpenAi, Endpoint::flavor);
    let version = req.version();
    let cors = req.headers().contains_key(header::ORIGIN);
    let result = match endpoint {
        Some(endpoint) => process(&shared, endpoint, req, &request_id, arrived).await,
        None => {
            let path: String = req.uri().path().chars().take(200).collect();
            Err(GatewayError::new(
                ErrorKind::RouteNotFound,
                format!("unknown path {path}"),
            ))
        }
    };
    let mut response = result.unwrap_or_else(|e| {
        shared.metrics.global.reject(e.kind);
        respond::error(flavor, &e)
    });
    *response.version_mut() = version;
    let headers = response.headers_mut();
    if let Ok(id) = HeaderValue::from_str(&request_id) {
        headers.insert("x-request-id", id.clone());
        headers.insert("request-id", id);
    }
    if cors {
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_ORIGIN,
            HeaderValue::from_static("*"),
        );
        headers.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("x-request-id, request-id, retry-after, retry-after-ms, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens, x-should-retry, x-sluicegate-upstream, x-sluicegate-fallback"),
        );
    }
    Ok(response)
}

/// CORS preflight: browsers send the SDKs' `x-stainless-*` headers, so reflect what is asked.
fn preflight(req: &Request<Incoming>) -> Response<ProxyBody> {
    let mut response = respond::json(StatusCode::NO_CONTENT, Vec::new());
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    if let Some(asked) = req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
    }
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    response
}

/// RFC 9112 6.1: a request with both Content-Length and Transfer-Encoding is a smuggling shape;
/// refuse it and close the connection.
fn check_framing(headers: &HeaderMap) -> Result<(), GatewayError> {
    let lengths = headers.get_all(header::CONTENT_LENGTH).iter().count();
    if headers.contains_key(header::TRANSFER_ENCODING) && lengths > 0 {
        return Err(
            GatewayError::invalid("both Content-Length and Transfer-Encoding are set").closing(),
        );
    }
    if lengths > 1 {
        return Err(GatewayError::invalid("Content-Length appears more than once").closing());
    }
    Ok(())
}

async fn read_body(body: Incoming, headers: &HeaderMap, cap: usize) -> Result<Bytes, GatewayError> {
    let too_large = || {
        GatewayError::new(
            ErrorKind::PayloadTooLarge,
            format!("the request body is larger than {cap} bytes"),
        )
        .closing()
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > cap as u64) {
        return Err(too_large());
    }
    match Limited::new(body, cap).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(too_large()),
        Err(e) => Err(GatewayError::invalid(format!(
            "could not read the request body: {e}"
        ))),
    }
}

fn models_list(snapshot: &Snapshot, key: &KeyEntry) -> Response<ProxyBody> {
    let data: Vec<serde_json::Value> = snapshot
        .route_aliases
        .iter()
        .filter(|alias| key.allows_model(alias))
        .map(|alias| serde_json::json!({"id": alias, "object": "model", "created": 0, "owned_by": "sluicegate"}))
        .collect();
    let body = serde_json::to_vec(&serde_json::json!({"object": "list", "data": data}))
        .unwrap_or_default();
    respond::json(StatusCode::OK, body)
}

async fn process(
    shared: &Arc<Shared>,
    endpoint: Endpoint,
    req: Request<Incoming>,
    request_id: &Arc<str>,
    arrived: Instant,
) -> Result<Response<ProxyBody>, GatewayError> {
    if req.method() == Method::OPTIONS {
        return Ok(preflight(&req));
    }
    if req.method() != endpoint.method() {
        return Err(GatewayError::new(
            ErrorKind::MethodNotAllowed,
            format!(
                "{} is not allowed here; use {}",
                req.method(),
                endpoint.method()
            ),
        ));
    }
    check_framing(req.headers())?;
    if shared.is_draining() {
        return Err(
            GatewayError::new(ErrorKind::ShuttingDown, "the gateway is shutting down")
                .with_retry_after(std::time::Duration::from_secs(1)),
        );
    }
    let snapshot = shared.config.load_full().ok_or_else(|| {
        GatewayError::new(
            ErrorKind::NotConfigured,
            "the gateway has no configuration yet",
        )
    })?;
    let unix = unix_now();
    let key = authenticate(&snapshot, req.headers(), unix)?;
    if endpoint == Endpoint::Models {
        return Ok(models_list(&snapshot, &key));
    }

    let (parts, body) = req.into_parts();
    let body = read_body(body, &parts.headers, shared.settings.max_body_bytes).await?;
    let peeked = peek(endpoint, &body)?;
    let route = snapshot.routes.get(peeked.model.as_ref()).ok_or_else(|| {
        GatewayError::new(
            ErrorKind::ModelNotFound,
            format!(
                "The model '{}' does not exist or you do not have access to it.",
                peeked.model
            ),
        )
        .with_param("model")
    })?;
    if !key.allows_model(&route.alias) {
        return Err(GatewayError::new(
            ErrorKind::ModelNotAllowed,
            format!("this key may not use the model '{}'", route.alias),
        )
        .with_param("model"));
    }
    if !shared.usage.has_room() {
        return Err(GatewayError::new(
            ErrorKind::UsageBacklog,
            "usage accounting is behind; billable requests are paused until it catches up",
        )
        .with_retry_after(std::time::Duration::from_secs(5)));
    }

    let priority = requested_priority(&parts.headers, key.priority);
    let trace = Trace {
        request_id: request_id.clone(),
        key: key.clone(),
        endpoint,
        model: route.alias.clone(),
        stream: peeked.stream,
        priority,
        arrived,
        arrived_unix: unix,
        prompt_estimate: peeked.prompt.tokens(),
        client_retry_count: parts
            .headers
            .get("x-stainless-retry-count")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok()),
        leg: None,
        attempts: 0,
        fallback: false,
        queue_wait: std::time::Duration::ZERO,
        overhead_before: std::time::Duration::ZERO,
        connect: None,
        headers_at: None,
        first_token_at: None,
        status: 0,
        relayed_tokens: 0,
        reported_prompt: None,
        usage: None,
        error: None,
    };
    let guard = UsageGuard::new(shared.clone(), trace);
    forward(
        endpoint,
        route,
        &peeked,
        &parts.headers,
        request_id,
        parts.version,
        guard,
    )
    .await
}

/// The key's priority class, lowered (never raised) by `x-sluicegate-priority`.
fn requested_priority(headers: &HeaderMap, key_priority: Priority) -> Priority {
    headers
        .get("x-sluicegate-priority")
        .and_then(|v| v.to_str().ok())
        .and_then(Priority::parse)
        .map_or(key_priority, |asked| asked.max(key_priority))
}

fn serves(kind: ProviderKind, endpoint: Endpoint) -> bool {
    match kind {
        ProviderKind::Anthropic => endpoint == Endpoint::Messages,
        ProviderKind::Openai => endpoint != Endpoint::Messages,
    }
}

fn upstream_request(
    member: &Member,
    endpoint: Endpoint,
    client_headers: &HeaderMap,
    body: Bytes,
    request_id: &str,
) -> Request<Full<Bytes>> {
    let mut headers = upstream_request_headers(client_headers);
    if let Some((name, value)) = &member.credential {
        headers.insert(name.clone(), value.clone());
    }
    if member.kind == ProviderKind::Anthropic && !headers.contains_key("anthropic-version") {
        headers.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
    }
    if let Ok(id) = HeaderValue::from_str(request_id) {
        headers.insert("x-request-id", id);
    }
    let mut req = Request::new(Full::new(body));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = member.uris[endpoint.index()].clone();
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

fn set_leg(guard: &mut UsageGuard, leg: &RouteLeg, member_index: usize, leg_index: usize) {
    if let Some(trace) = guard.trace() {
        let member = &leg.pool.members[member_index];
        trace.leg = Some(Leg {
            pool: leg.pool.id.clone(),
            member: member.id.clone(),
            upstream_model: leg.upstream_model.clone(),
            series: leg.series[member_index].clone(),
            pool_series: leg.pool.series.clone(),
        });
        trace.attempts += 1;
        trace.fallback = leg_index > 0;
    }
}

fn fail(guard: &mut UsageGuard, error: GatewayError, outcome: Outcome) -> GatewayError {
    if let Some(trace) = guard.trace() {
        trace.error = Some(error.kind);
        trace.status = error.status().as_u16();
    }
    guard.finish(outcome);
    error
}

async fn forward(
    endpoint: Endpoint,
    route: &Route,
    peeked: &Peeked<'_>,
    client_headers: &HeaderMap,
    request_id: &Arc<str>,
    client_version: Version,
    mut guard: UsageGuard,
) -> Result<Response<ProxyBody>, GatewayError> {
    let want_usage =
        peeked.stream && matches!(endpoint, Endpoint::ChatCompletions | Endpoint::Completions);
    let mut last_error: Option<GatewayError> = None;
    let mut served_here = false;
    for (leg_index, leg) in route.chain.iter().enumerate() {
        let members = &leg.pool.members;
        if !serves(leg.pool.kind, endpoint) {
            continue;
        }
        served_here = true;
        let mut tried: Vec<usize> = Vec::new();
        while let Some(mi) = pick_member(members, &tried) {
            tried.push(mi);
            let member = &members[mi];
            set_leg(&mut guard, leg, mi, leg_index);
            let body = match peeked.rewrite(&leg.model_json, want_usage) {
                Ok(body) => body,
                Err(e) => return Err(fail(&mut guard, e, Outcome::UpstreamError)),
            };
            let request = upstream_request(member, endpoint, client_headers, body, request_id);
            let inflight = member.state.enter();
            let sent_at = Instant::now();
            if let Some(trace) = guard.trace() {
                trace.overhead_before = sent_at
                    .saturating_duration_since(trace.arrived)
                    .saturating_sub(trace.queue_wait);
            }
            let timeouts = &leg.pool.timeouts;
            // A stream must start within `first_byte`; a whole answer only arrives when it is
            // complete, so it gets the overall deadline.
            let header_timeout = if peeked.stream {
                timeouts.first_byte
            } else {
                timeouts.total
            };
            let response = match tokio::time::timeout(
                header_timeout,
                member.client.request(request),
            )
            .await
            {
                Err(_) => {
                    let e = GatewayError::new(
                        ErrorKind::UpstreamTimeout,
                        format!(
                            "the upstream did not answer within {} ms",
                            header_timeout.as_millis()
                        ),
                    );
                    return Err(fail(&mut guard, e, Outcome::Timeout));
                }
                Ok(Err(e)) => {
                    let error = upstream_error(&e);
                    tracing::debug!(request_id = %request_id, upstream = %member.id, error = ?e, "upstream attempt failed");
                    if error.kind.retry_safe() {
                        last_error = Some(error);
                        continue;
                    }
                    return Err(fail(&mut guard, error, Outcome::UpstreamError));
                }
                Ok(Ok(response)) => response,
            };
            return Ok(relay(
                response,
                endpoint,
                peeked,
                want_usage,
                leg,
                mi,
                leg_index,
                sent_at,
                client_version,
                guard,
                inflight,
            ));
        }
    }
    let error = match (last_error, served_here) {
        (Some(e), _) => e,
        (None, true) => GatewayError::new(
            ErrorKind::NoHealthyUpstream,
            "no upstream can take this request now",
        )
        .with_retry_after(std::time::Duration::from_secs(1)),
        (None, false) => GatewayError::invalid(format!(
            "the model '{}' is not served on {}",
            route.alias,
            endpoint.as_str()
        ))
        .with_param("model"),
    };
    let outcome = if error.kind == ErrorKind::UpstreamConnectTimeout {
        Outcome::Timeout
    } else {
        Outcome::UpstreamError
    };
    Err(fail(&mut guard, error, outcome))
}

#[allow(clippy::too_many_arguments)]
fn relay(
    response: Response<Incoming>,
    endpoint: Endpoint,
    peeked: &Peeked<'_>,
    want_usage: bool,
    leg: &RouteLeg,
    member_index: usize,
    leg_index: usize,
    sent_at: Instant,
    client_version: Version,
    mut guard: UsageGuard,
    inflight: crate::routing::InflightGuard,
) -> Response<ProxyBody> {
    let (mut parts, body) = response.into_parts();
    let now = Instant::now();
    let status = parts.status;
    if let Some(trace) = guard.trace() {
        trace.status = status.as_u16();
        trace.headers_at = Some(now);
        trace.connect = parts
            .extensions
            .get::<ConnectTiming>()
            .filter(|t| t.finished >= sent_at)
            .map(|t| t.took);
    }
    client_response_headers(&mut parts.headers);
    let is_sse = status.is_success()
        && parts
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    let timeouts = &leg.pool.timeouts;
    let (mode, deadline) = if is_sse {
        let hide_usage = want_usage && !peeked.client_include_usage;
        if hide_usage {
            parts.headers.remove(header::CONTENT_LENGTH);
        }
        let tap = SseTap::new(endpoint.flavor(), hide_usage);
        (
            RelayMode::Stream {
                tap,
                flavor: endpoint.flavor(),
            },
            sent_at + timeouts.first_byte,
        )
    } else {
        (
            RelayMode::Whole {
                kept: Vec::new(),
                kept_len: 0,
                parse_usage: status.is_success(),
            },
            sent_at + timeouts.total,
        )
    };
    let member = &leg.pool.members[member_index];
    if let Ok(v) = HeaderValue::from_str(&format!("{}/{}", leg.pool.id, member.id)) {
        parts.headers.insert("x-sluicegate-upstream", v);
    }
    if leg_index > 0 {
        parts
            .headers
            .insert("x-sluicegate-fallback", HeaderValue::from_static("1"));
    }
    parts.extensions = http::Extensions::new();
    parts.version = client_version;
    let body = RelayBody::new(
        body,
        mode,
        timeouts.idle,
        Some(deadline.into()),
        guard,
        inflight,
    );
    Response::from_parts(parts, http_body_util::Either::Right(body))
}
