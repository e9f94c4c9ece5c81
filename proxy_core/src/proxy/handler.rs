//! The request pipeline up to admission: route the path, authenticate, read and peek at the body,
//! check the key's model and limits, and take (or wait for) a slot in a pool. Forwarding and
//! relaying live in `forward.rs` and `relay.rs`.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;

use super::attribution;
use super::auth::authenticate;
use super::body::{read_body, BodyLimits};
use super::context::{kept_headers, RequestCtx};
use super::deferred::DeferredBody;
use super::forward::forward;
use super::peek::{peek, Peeked};
use super::respond::{self, ProxyBody};
use super::shared::Shared;
use super::spans::{self, TraceCtx};
use crate::access_log::Refusal;
use crate::admission::Entry;
use crate::clock::unix_now;
use crate::config::{KeyEntry, Priority, Route, Snapshot};
use crate::endpoint::{Endpoint, Flavor};
use crate::error::{ErrorKind, GatewayError};
use crate::fleet;
use crate::header_names::{REQUEST_ID, X_REQUEST_ID, X_SLUICEGATE_PRIORITY, X_SLUICEGATE_TIMEOUT_MS};
use crate::limits::{self, Estimate, Scope};
use crate::server::MAX_HEAD_BYTES;

/// Output tokens reserved for a request that gives no max_tokens on a route without a maximum.
const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 4096;
/// The upper bound of the client's deadline header (`x-sluicegate-timeout-ms`).
const MAX_DEADLINE_MS: u64 = 3_600_000;

const EXPOSED_HEADERS: &str = "x-request-id, request-id, retry-after, retry-after-ms, \
x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, \
x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens, x-should-retry, \
x-sluicegate-upstream, x-sluicegate-fallback";

/// `req_` + the arrival in milliseconds (12 hex digits) + 64 random bits (16): ordered by time,
/// unique in practice. Written digit by digit: `format!` cost the request path 2% of its work.
pub(super) fn new_request_id() -> Arc<str> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let millis = (unix_now() * 1000.0) as u64 & 0xffff_ffff_ffff;
    let random = fastrand::u64(..);
    let mut id = *b"req_0000000000000000000000000000";
    for (i, slot) in id[4..16].iter_mut().enumerate() {
        *slot = HEX[(millis >> (4 * (11 - i))) as usize & 0xf];
    }
    for (i, slot) in id[16..].iter_mut().enumerate() {
        *slot = HEX[(random >> (4 * (15 - i))) as usize & 0xf];
    }
    Arc::from(std::str::from_utf8(&id).unwrap_or("req_0"))
}

/// The size of the request's head as HTTP/1.1 writes it: request line, headers, the blank line.
/// hyper's read buffer caps it only roughly (`server::MAX_HEAD_BYTES`); this is the exact check,
/// on HTTP/2's decoded headers as well.
fn head_bytes(req: &Request<Incoming>) -> usize {
    let target = req.uri().path_and_query().map_or(1, |p| p.as_str().len());
    let line = req.method().as_str().len() + 1 + target + " HTTP/1.1\r\n".len();
    let headers: usize = req.headers().iter().map(|(name, value)| name.as_str().len() + 2 + value.len() + 2).sum();
    line + headers + 2
}

/// The load balancer's contract, on the data port and without a key: `/healthz` answers while
/// the process serves at all; `/readyz` while it should get new traffic (a snapshot applied,
/// not stopping, not draining).
fn probe(shared: &Shared, path: &str) -> Option<Response<ProxyBody>> {
    let (status, body) = match path {
        "/healthz" => (StatusCode::OK, serde_json::json!({"status": "alive"})),
        "/readyz" => match shared.unready_reason() {
            None => (StatusCode::OK, serde_json::json!({"status": "ready"})),
            Some(reason) => {
                (StatusCode::SERVICE_UNAVAILABLE, serde_json::json!({"status": "not_ready", "reason": reason}))
            }
        },
        _ => return None,
    };
    let mut response = respond::json(status, serde_json::to_vec(&body).unwrap_or_default());
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Some(response)
}

pub async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<ProxyBody>, Infallible> {
    if req.method() == Method::GET {
        if let Some(response) = probe(&shared, req.uri().path()) {
            return Ok(response);
        }
    }
    if let (Some(port), "/metrics") = (&shared.metrics_port, req.uri().path()) {
        return Ok(port.serve(req.method(), req.headers()).await);
    }
    let arrived = Instant::now();
    let request_id = new_request_id();
    let endpoint = Endpoint::from_path(req.uri().path());
    let flavor = endpoint.map_or(Flavor::OpenAi, Endpoint::flavor);
    let version = req.version();
    let cors = req.headers().contains_key(header::ORIGIN);
    let result = match endpoint {
        _ if head_bytes(&req) > MAX_HEAD_BYTES => Err(GatewayError::head_too_large()),
        // Boxed when it starts: the pipeline's future is most of a request's state (4 KiB),
        // and boxed here it is copied once, where inline it was copied with this one at every
        // move between hyper's call and its box.
        Some(endpoint) => Box::pin(process(&shared, endpoint, req, &request_id, arrived)).await,
        None if Endpoint::stored_object(req.uri().path()).is_some() => Err(GatewayError::invalid(
            "stored responses (/v1/responses/{id}: retrieve, delete, input_items, cancel) are not relayed: \
             this gateway spreads requests over upstreams and its tenants share upstream accounts, so it \
             can neither reach the upstream that holds a response nor tell whose it is; keep what the \
             response returned, and send the conversation in 'input'",
        )),
        None => {
            let path: String = req.uri().path().chars().take(200).collect();
            Err(GatewayError::new(ErrorKind::RouteNotFound, format!("unknown path {path}")))
        }
    };
    let mut response = result.unwrap_or_else(|e| {
        shared.metrics.global.reject(e.kind);
        if let Some(log) = &shared.access_log {
            log.refusal(&Refusal {
                ts: unix_now(),
                request_id: &request_id,
                endpoint: endpoint.map_or("unknown", Endpoint::as_str),
                status: e.status().as_u16(),
                outcome: "refused",
                error_code: e.kind.code(),
                reason: e.kind.reason(),
                duration_ms: arrived.elapsed().as_secs_f64() * 1000.0,
            });
        }
        respond::error(flavor, &e)
    });
    *response.version_mut() = version;
    let headers = response.headers_mut();
    if let Ok(id) = HeaderValue::from_str(&request_id) {
        headers.insert(X_REQUEST_ID, id.clone());
        headers.insert(REQUEST_ID, id);
    }
    if cors {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
    }
    Ok(response)
}

/// CORS preflight: browsers send the SDKs' `x-stainless-*` headers, so reflect what is asked.
fn preflight(req: &Request<Incoming>) -> Response<ProxyBody> {
    let mut response = respond::json(StatusCode::NO_CONTENT, Vec::new());
    let headers = response.headers_mut();
    headers.remove(header::CONTENT_TYPE);
    headers.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, OPTIONS"));
    if let Some(asked) = req.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
    }
    headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    response
}

/// Framing shapes hyper lets through but a request must not have.
fn check_framing(headers: &HeaderMap) -> Result<(), GatewayError> {
    let lengths = headers.get_all(header::CONTENT_LENGTH).iter().count();
    if headers.contains_key(header::TRANSFER_ENCODING) && lengths > 0 {
        return Err(GatewayError::invalid("both Content-Length and Transfer-Encoding are set").closing());
    }
    if lengths > 1 {
        return Err(GatewayError::invalid("Content-Length appears more than once").closing());
    }
    Ok(())
}

fn models_list(snapshot: &Snapshot, key: &KeyEntry) -> Response<ProxyBody> {
    let data: Vec<serde_json::Value> = snapshot
        .route_aliases
        .iter()
        .filter(|alias| key.allows_model(alias))
        .map(|alias| serde_json::json!({"id": alias, "object": "model", "created": 0, "owned_by": "sluicegate"}))
        .collect();
    let body = serde_json::to_vec(&serde_json::json!({"object": "list", "data": data})).unwrap_or_default();
    respond::json(StatusCode::OK, body)
}

/// The key's priority class, lowered (never raised) by `x-sluicegate-priority`.
fn requested_priority(headers: &HeaderMap, key_priority: Priority) -> Priority {
    headers
        .get(X_SLUICEGATE_PRIORITY)
        .and_then(|v| v.to_str().ok())
        .and_then(Priority::parse)
        .map_or(key_priority, |asked| asked.max(key_priority))
}

fn client_deadline(headers: &HeaderMap, arrived: Instant) -> Result<Option<Instant>, GatewayError> {
    let Some(value) = headers.get(X_SLUICEGATE_TIMEOUT_MS) else {
        return Ok(None);
    };
    let ms = value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| (1..=MAX_DEADLINE_MS).contains(ms))
        .ok_or_else(|| {
            let name = X_SLUICEGATE_TIMEOUT_MS;
            GatewayError::invalid(format!(
                "{} must be a whole number of milliseconds from 1 to {MAX_DEADLINE_MS}",
                name.as_str()
            ))
            .with_param(name.as_str().to_owned())
        })?;
    Ok(Some(arrived + Duration::from_millis(ms)))
}

/// The most output tokens the upstream may produce: the client's largest cap, lowered to the
/// route's; when the client set none, the route's (or the default) if anything counts tokens.
fn output_cap(endpoint: Endpoint, peeked: &Peeked, route: &Route, counts_tokens: bool) -> Option<u64> {
    endpoint.output_cap_field()?;
    match (peeked.max_tokens, route.max_output_tokens) {
        (Some(asked), Some(cap)) => Some(asked.min(cap)),
        (Some(asked), None) => Some(asked),
        (None, cap) if counts_tokens => Some(cap.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS)),
        (None, _) => None,
    }
}

/// What to reserve against TPM and quotas: the prompt estimate plus the most the answer may use
/// (every choice generated), and what that would cost.
fn estimate(endpoint: Endpoint, peeked: &Peeked, route: &Route, cap: Option<u64>, now: f64) -> Estimate {
    let prompt = peeked.prompt.tokens();
    let output = if endpoint.output_cap_field().is_none() {
        0
    } else {
        cap.or(route.max_output_tokens).unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS).saturating_mul(peeked.n)
    };
    Estimate {
        tokens: prompt.saturating_add(output),
        cost_micros: route.price.map_or(0, |p| p.bound(prompt, output)),
        now: now as i64,
    }
}

fn key_scopes(key: &KeyEntry) -> [Scope<'_>; 2] {
    let tenant = &key.tenant;
    [
        Scope {
            name: "tenant",
            id: &tenant.id,
            limits: &tenant.limits,
            state: &tenant.limit_state,
            quota: tenant.quota.as_ref().map(|q| (q, &tenant.quota_state)),
        },
        Scope {
            name: "key",
            id: &key.id,
            limits: &key.limits,
            state: &key.limit_state,
            quota: key.quota.as_ref().map(|q| (q, &key.quota_state)),
        },
    ]
}

// Not an `async fn`, on purpose (the body's first comment says why).
#[allow(clippy::manual_async_fn)]
fn process<'a>(
    shared: &'a Arc<Shared>,
    endpoint: Endpoint,
    req: Request<Incoming>,
    request_id: &'a Arc<str>,
    arrived: Instant,
) -> impl Future<Output = Result<Response<ProxyBody>, GatewayError>> + 'a {
    // An `async move` block for the reason `forward` is one: the request is kept once.
    async move {
        if req.method() == Method::OPTIONS {
            return Ok(preflight(&req));
        }
        if req.method() != endpoint.method() {
            return Err(GatewayError::new(
                ErrorKind::MethodNotAllowed,
                format!("{} is not allowed here; use {}", req.method(), endpoint.method()),
            ));
        }
        check_framing(req.headers())?;
        if shared.is_draining() {
            return Err(GatewayError::new(ErrorKind::ShuttingDown, "the gateway is shutting down")
                .with_retry_after(Duration::from_secs(1)));
        }
        let snapshot = shared
            .config
            .load_full()
            .ok_or_else(|| GatewayError::new(ErrorKind::NotConfigured, "the gateway has no configuration yet"))?;
        let unix = unix_now();
        let key = authenticate(&snapshot, req.headers(), unix)?;
        if endpoint == Endpoint::Models {
            return Ok(models_list(&snapshot, &key));
        }

        let (parts, body) = req.into_parts();
        let deadline = client_deadline(&parts.headers, arrived)?;
        let tags = attribution::tags(&parts.headers)?;
        // The key's concurrency slot and RPM before its body is read: a key at its limits cannot
        // make the gateway buffer bodies.
        let mut held = match shared.fleet.get() {
            Some(fleet) => fleet::admit_request(fleet, &key_scopes(&key)).await?,
            None => limits::admit_request(&key_scopes(&key))?,
        };
        let settings = &shared.settings;
        let body_limits = BodyLimits {
            cap: settings.max_body_bytes,
            timeout: settings.body_read_timeout,
            budget: &shared.body_budget,
        };
        let (body, body_bytes) = read_body(body, &parts.headers, body_limits).await?;
        let peeked = peek(endpoint, body)?;
        let route = snapshot.routes.get(peeked.model.as_str()).cloned().ok_or_else(|| {
            GatewayError::new(
                ErrorKind::ModelNotFound,
                format!("The model '{}' does not exist or you do not have access to it.", peeked.model),
            )
            .with_param("model")
        })?;
        let trace = TraceCtx::from_headers(shared, &parts.headers);
        // From here the request reached routing: a refusal is traced too.
        let refused = |e: GatewayError| {
            spans::refused(shared, &trace, endpoint, &route.alias, &key, request_id, (arrived, unix), &e);
            e
        };
        if !key.allows_model(&route.alias) {
            return Err(refused(
                GatewayError::new(
                    ErrorKind::ModelNotAllowed,
                    format!("this key may not use the model '{}'", route.alias),
                )
                .with_param("model"),
            ));
        }
        if !route.chain.iter().any(|leg| leg.pool.serves(endpoint)) {
            return Err(refused(
                GatewayError::invalid(format!("the model '{}' is not served on {}", route.alias, endpoint.as_str()))
                    .with_param("model"),
            ));
        }
        // A pool of the other API gets the request translated; what has no translation is refused
        // now, before a fallback to that pool could turn it into a late 400.
        if let Some(t) = route.chain.iter().find_map(|leg| leg.pool.translation(endpoint)) {
            crate::translate::translate_request(t, peeked.body()).map_err(refused)?;
        }
        if !shared.usage.has_room() {
            return Err(refused(
                GatewayError::new(
                    ErrorKind::UsageBacklog,
                    "usage accounting is behind; billable requests are paused until it catches up",
                )
                .with_retry_after(Duration::from_secs(5)),
            ));
        }

        // What the upstream may produce is what is reserved: the cap goes into the body it gets.
        let scopes = key_scopes(&key);
        let output_cap = output_cap(endpoint, &peeked, &route, limits::counts_tokens(&scopes));
        let estimate = estimate(endpoint, &peeked, &route, output_cap, unix);
        let admitted = match shared.fleet.get() {
            Some(fleet) => fleet::admit_tokens(fleet, &mut held, &scopes, estimate).await,
            None => limits::admit_tokens(&mut held, &scopes, estimate),
        };
        admitted.map_err(refused)?;
        let ctx = RequestCtx {
            shared: shared.clone(),
            request_id: request_id.clone(),
            endpoint,
            priority: requested_priority(&parts.headers, key.priority),
            key,
            route,
            peeked,
            client_headers: kept_headers(&parts.headers),
            client_version: parts.version,
            arrived,
            arrived_unix: unix,
            deadline,
            held,
            output_cap,
            body_bytes,
            trace,
            tags,
        };
        admit_and_forward(ctx).await
    }
}

/// A request no pool admitted (a full lane, a wait that ran out): its span says so.
fn refused_at_admission(ctx: &RequestCtx, error: GatewayError) -> GatewayError {
    let arrived = (ctx.arrived, ctx.arrived_unix);
    spans::refused(&ctx.shared, &ctx.trace, ctx.endpoint, &ctx.route.alias, &ctx.key, &ctx.request_id, arrived, &error);
    error
}

/// Take a slot in the first pool of the chain that will have the request (the next pool serves
/// when one refuses), waiting in its lane if it must.
// Not an `async fn`, on purpose (the body's first comment says why).
#[allow(clippy::manual_async_fn)]
fn admit_and_forward(ctx: RequestCtx) -> impl Future<Output = Result<Response<ProxyBody>, GatewayError>> {
    // An `async move` block for the reason `forward` is one: the context is kept once.
    async move {
        let mut refused: Option<GatewayError> = None;
        let mut entered = None;
        for (i, leg) in ctx.route.chain.iter().enumerate() {
            if !leg.pool.serves(ctx.endpoint) {
                continue;
            }
            match leg.pool.gate.enter(
                ctx.priority,
                &ctx.key.tenant.id,
                ctx.deadline.map(tokio::time::Instant::from_std),
            ) {
                Ok(entry) => {
                    entered = Some((i, entry, leg.pool.gate.config().keepalive_ms));
                    break;
                }
                Err(e) => {
                    leg.pool.state.windows.record_rejection(unix_now() as u64);
                    refused.get_or_insert(e);
                }
            }
        }
        let Some((leg, entry, keepalive_ms)) = entered else {
            let error = refused
                .unwrap_or_else(|| GatewayError::new(ErrorKind::NoHealthyUpstream, "no pool can take this request"));
            return Err(refused_at_admission(&ctx, error));
        };
        let ticket = match entry {
            Entry::Admitted(permit) => return forward(ctx, leg, permit, Duration::ZERO).await,
            Entry::Queued(ticket) => ticket,
        };
        let queued_at = Instant::now();
        if !ctx.peeked.stream {
            let permit = ticket.wait().await.map_err(|e| refused_at_admission(&ctx, e))?;
            return forward(ctx, leg, permit, queued_at.elapsed()).await;
        }
        let keepalive = Duration::from_millis(keepalive_ms);
        let mut waiting = Box::pin(ticket.wait());
        match tokio::time::timeout(keepalive, &mut waiting).await {
            Ok(admitted) => {
                let permit = admitted.map_err(|e| refused_at_admission(&ctx, e))?;
                forward(ctx, leg, permit, queued_at.elapsed()).await
            }
            Err(_) => {
                // Long wait for a stream: send headers now and keep the client company.
                let flavor = ctx.endpoint.flavor();
                let pending = Box::pin(async move {
                    let permit = waiting.await.map_err(|e| refused_at_admission(&ctx, e))?;
                    forward(ctx, leg, permit, queued_at.elapsed()).await
                });
                let mut response = Response::new(ProxyBody::Deferred(DeferredBody::new(pending, flavor, keepalive)));
                let headers = response.headers_mut();
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
                headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
                Ok(response)
            }
        }
    }
}
