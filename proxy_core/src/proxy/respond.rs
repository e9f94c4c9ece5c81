//! Responses the gateway writes itself: errors in each API's format, with the retry and
//! rate-limit headers the official SDKs read.

use std::time::Duration;

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;

use super::deferred::DeferredBody;
use super::handler::new_request_id;
use super::relay::RelayBody;
use super::shared::Shared;
use crate::access_log::Refusal;
use crate::clock::unix_now;
use crate::endpoint::Flavor;
use crate::error::{ErrorKind, GatewayError, RateLimitInfo};
use crate::header_names::{REQUEST_ID, X_REQUEST_ID, X_SHOULD_RETRY};
use crate::server::refused_head::{self, RefusedHead};

/// Every response body the gateway writes.
// Relayed answers are the common case: keep them inline rather than boxing every one.
#[allow(clippy::large_enum_variant)]
pub enum ProxyBody {
    /// Written by the gateway itself (errors, model lists).
    Full(Full<Bytes>),
    /// An upstream's answer, relayed.
    Relay(RelayBody),
    /// A stream whose headers went out while it waited in a queue.
    Deferred(DeferredBody),
}

impl Body for ProxyBody {
    type Data = Bytes;
    type Error = GatewayError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
        match self.get_mut() {
            ProxyBody::Full(full) => match Pin::new(full).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                Poll::Ready(Some(Err(never))) => match never {},
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            },
            ProxyBody::Relay(relay) => Pin::new(relay).poll_frame(cx),
            ProxyBody::Deferred(deferred) => Pin::new(deferred).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ProxyBody::Full(full) => full.is_end_stream(),
            ProxyBody::Relay(relay) => relay.is_end_stream(),
            ProxyBody::Deferred(deferred) => deferred.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            ProxyBody::Full(full) => full.size_hint(),
            ProxyBody::Relay(relay) => relay.size_hint(),
            ProxyBody::Deferred(deferred) => deferred.size_hint(),
        }
    }
}

pub fn json(status: StatusCode, body: Vec<u8>) -> Response<ProxyBody> {
    let mut response = Response::new(ProxyBody::Full(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub fn error_body(flavor: Flavor, error: &GatewayError) -> Vec<u8> {
    let kind = error.kind;
    let value = match flavor {
        // The Responses API answers errors as chat does.
        Flavor::OpenAi | Flavor::Responses => serde_json::json!({
            "error": {
                "message": error.message,
                "type": kind.openai_type(),
                "param": error.param,
                "code": kind.code(),
            }
        }),
        Flavor::Anthropic => serde_json::json!({
            "type": "error",
            "error": {"type": kind.anthropic_type(), "message": error.message},
        }),
    };
    serde_json::to_vec(&value).unwrap_or_default()
}

/// The answer to a request head hyper could not parse (400, 414 or 431, chosen by hyper before
/// any handler runs), set once per process with hyper's `set_parse_error_answer`: the error in
/// OpenAI's format (the endpoint, and so the API's own format, is unknown before the head is
/// read) with a request id, as every other refusal carries. hyper closes the connection after it.
/// What it said is told to the connection's observer, which logs it (`refused_head`).
pub fn bad_head(status: StatusCode, headers: &mut HeaderMap) -> Bytes {
    let error = match status {
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => GatewayError::head_too_large(),
        StatusCode::URI_TOO_LONG => GatewayError::new(ErrorKind::UriTooLong, "the request's URI is too long"),
        _ => GatewayError::new(
            ErrorKind::InvalidRequest,
            "the request's head is not valid HTTP/1.1: a malformed request line or header, or a repeated \
             or conflicting Content-Length",
        ),
    };
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let request_id = new_request_id();
    if let Ok(id) = HeaderValue::from_str(&request_id) {
        headers.insert(X_REQUEST_ID, id.clone());
        headers.insert(REQUEST_ID, id);
    }
    refused_head::note(&RefusedHead { request_id, kind: error.kind, ts: unix_now() });
    Bytes::from(error_body(Flavor::OpenAi, &error))
}

/// A head `bad_head` answers, told as its answer is built: counted as a refusal of its kind and
/// written to the access log as one (no endpoint, and no duration: hyper does not say when the
/// head began to arrive).
pub fn refused_head(shared: &Shared, head: &RefusedHead) {
    shared.metrics.global.reject(head.kind);
    if let Some(log) = &shared.access_log {
        log.refusal(&Refusal {
            ts: head.ts,
            request_id: &head.request_id,
            endpoint: "unknown",
            status: head.kind.status().as_u16(),
            outcome: "refused",
            error_code: head.kind.code(),
            reason: head.kind.reason(),
            duration_ms: 0.0,
        });
    }
}

/// OpenAI's duration format for `x-ratelimit-reset-*`: `1m30s`, `250ms`, `2s`.
pub fn format_reset(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let secs = d.as_secs_f64();
    if secs < 60.0 {
        return format!("{}s", trim_float(secs));
    }
    let minutes = (secs / 60.0).floor();
    format!("{}m{}s", minutes as u64, trim_float(secs - minutes * 60.0))
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn insert(response: &mut Response<ProxyBody>, name: &'static str, value: String) {
    if let Ok(v) = HeaderValue::try_from(value) {
        response.headers_mut().insert(name, v);
    }
}

fn rate_limit_headers(response: &mut Response<ProxyBody>, info: &RateLimitInfo) {
    let numbers = [
        ("x-ratelimit-limit-requests", info.limit_requests),
        ("x-ratelimit-remaining-requests", info.remaining_requests),
        ("x-ratelimit-limit-tokens", info.limit_tokens),
        ("x-ratelimit-remaining-tokens", info.remaining_tokens),
    ];
    for (name, value) in numbers {
        if let Some(v) = value {
            insert(response, name, v.to_string());
        }
    }
    for (name, value) in
        [("x-ratelimit-reset-requests", info.reset_requests), ("x-ratelimit-reset-tokens", info.reset_tokens)]
    {
        if let Some(d) = value {
            insert(response, name, format_reset(d));
        }
    }
}

pub fn error(flavor: Flavor, error: &GatewayError) -> Response<ProxyBody> {
    let mut response = json(error.status(), error_body(flavor, error));
    if let Some(after) = error.retry_after {
        // Whole seconds, rounded up, for `retry-after`; the exact figure in `retry-after-ms`.
        let secs = after.as_millis().div_ceil(1000).max(1);
        insert(&mut response, "retry-after", secs.to_string());
        insert(&mut response, "retry-after-ms", after.as_millis().max(1).to_string());
    }
    if let Some(info) = &error.rate_limit {
        rate_limit_headers(&mut response, info);
    }
    if error.no_retry {
        response.headers_mut().insert(X_SHOULD_RETRY, HeaderValue::from_static("false"));
    }
    if error.close_connection {
        response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_durations_use_openai_style() {
        assert_eq!(format_reset(Duration::from_millis(12)), "12ms");
        assert_eq!(format_reset(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_reset(Duration::from_secs(360)), "6m0s");
    }

    #[test]
    fn both_error_formats() {
        let e = GatewayError::invalid("bad").with_param("model");
        let openai: serde_json::Value = serde_json::from_slice(&error_body(Flavor::OpenAi, &e)).unwrap();
        assert_eq!(openai["error"]["param"], "model");
        assert_eq!(openai["error"]["type"], "invalid_request_error");
        let anthropic: serde_json::Value = serde_json::from_slice(&error_body(Flavor::Anthropic, &e)).unwrap();
        assert_eq!(anthropic["type"], "error");
        assert_eq!(anthropic["error"]["type"], "invalid_request_error");
    }

    #[test]
    fn a_head_that_does_not_parse_is_answered_in_openai_format_with_a_request_id() {
        for (status, code) in [
            (StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE, "request_headers_too_large"),
            (StatusCode::URI_TOO_LONG, "uri_too_long"),
            (StatusCode::BAD_REQUEST, "invalid_request"),
        ] {
            let mut headers = HeaderMap::new();
            let body: serde_json::Value = serde_json::from_slice(&bad_head(status, &mut headers)).unwrap();
            assert_eq!(body["error"]["code"], code, "{status}");
            assert_eq!(body["error"]["type"], "invalid_request_error");
            assert_eq!(headers["content-type"], "application/json");
            assert!(headers["x-request-id"].to_str().unwrap().starts_with("req_"));
            assert_eq!(headers["x-request-id"], headers["request-id"]);
        }
    }

    #[test]
    fn retry_headers_and_should_retry() {
        let e = GatewayError::new(ErrorKind::InsufficientQuota, "out").with_retry_after(Duration::from_millis(1200));
        let r = error(Flavor::OpenAi, &e);
        assert_eq!(r.status(), 429);
        assert_eq!(r.headers()["retry-after"], "2");
        assert_eq!(r.headers()["retry-after-ms"], "1200");
        assert_eq!(r.headers()["x-should-retry"], "false");
    }
}
