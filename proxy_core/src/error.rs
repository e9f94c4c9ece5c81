//! One error type for everything the gateway answers on its own (Pingora's model): each kind says
//! where the fault came from, which HTTP status and error `type`/`code` the client sees in either
//! API flavour, the finer reason it is counted under, and whether another attempt on a different
//! upstream is safe.

use std::borrow::Cow;
use std::time::Duration;

use http::StatusCode;

/// Where a fault originated. Only upstream-origin faults count against an upstream's health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The client sent something we refuse (bad body, bad key, over a limit).
    Downstream,
    /// The upstream failed to connect, answered badly, or timed out.
    Upstream,
    /// The gateway itself (shedding, shutting down, a bug).
    Internal,
}

/// Everything the table below says about one kind.
pub struct KindInfo {
    pub status: StatusCode,
    pub origin: Origin,
    /// OpenAI `error.type`.
    pub openai_type: &'static str,
    /// OpenAI `error.code`: the stable machine-readable reason clients branch on.
    pub code: &'static str,
    /// Anthropic `error.type`.
    pub anthropic_type: &'static str,
    /// The finer reason label of `sluicegate_rejections_total`.
    pub reason: &'static str,
}

macro_rules! kinds {
    ($($kind:ident => ($status:ident, $origin:ident, $openai:literal, $code:literal, $anthropic:literal, $reason:literal);)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum ErrorKind { $($kind,)* }

        impl ErrorKind {
            pub const ALL: &'static [ErrorKind] = &[$(ErrorKind::$kind,)*];

            pub const fn info(self) -> KindInfo {
                match self {
                    $(ErrorKind::$kind => KindInfo {
                        status: StatusCode::$status,
                        origin: Origin::$origin,
                        openai_type: $openai,
                        code: $code,
                        anthropic_type: $anthropic,
                        reason: $reason,
                    },)*
                }
            }
        }
    };
}

kinds! {
    InvalidRequest => (BAD_REQUEST, Downstream, "invalid_request_error", "invalid_request", "invalid_request_error", "invalid_request");
    MissingApiKey => (UNAUTHORIZED, Downstream, "authentication_error", "missing_api_key", "authentication_error", "missing_api_key");
    InvalidApiKey => (UNAUTHORIZED, Downstream, "authentication_error", "invalid_api_key", "authentication_error", "invalid_api_key");
    ModelNotAllowed => (FORBIDDEN, Downstream, "permission_error", "model_not_allowed", "permission_error", "model_not_allowed");
    ModelNotFound => (NOT_FOUND, Downstream, "invalid_request_error", "model_not_found", "not_found_error", "model_not_found");
    RouteNotFound => (NOT_FOUND, Downstream, "invalid_request_error", "unknown_url", "not_found_error", "unknown_url");
    MethodNotAllowed => (METHOD_NOT_ALLOWED, Downstream, "invalid_request_error", "method_not_allowed", "invalid_request_error", "method_not_allowed");
    PayloadTooLarge => (PAYLOAD_TOO_LARGE, Downstream, "invalid_request_error", "request_too_large", "request_too_large", "request_too_large");
    HeadersTooLarge => (REQUEST_HEADER_FIELDS_TOO_LARGE, Downstream, "invalid_request_error", "request_headers_too_large", "invalid_request_error", "headers_too_large");
    UriTooLong => (URI_TOO_LONG, Downstream, "invalid_request_error", "uri_too_long", "invalid_request_error", "uri_too_long");
    BodyTimeout => (REQUEST_TIMEOUT, Downstream, "invalid_request_error", "request_timeout", "invalid_request_error", "body_timeout");
    RpmExceeded => (TOO_MANY_REQUESTS, Downstream, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error", "rpm");
    TpmExceeded => (TOO_MANY_REQUESTS, Downstream, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error", "tpm");
    ConcurrencyExceeded => (TOO_MANY_REQUESTS, Downstream, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error", "concurrency");
    InsufficientQuota => (TOO_MANY_REQUESTS, Downstream, "insufficient_quota", "insufficient_quota", "rate_limit_error", "quota");
    QueueFull => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "overloaded", "overloaded_error", "queue_full");
    QueueTimeout => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "overloaded", "overloaded_error", "queue_timeout");
    DeadlineExceeded => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "overloaded", "overloaded_error", "deadline");
    TenantShareExceeded => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "overloaded", "overloaded_error", "tenant_share");
    NotConfigured => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "not_configured", "overloaded_error", "not_configured");
    UsageBacklog => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "usage_backlog", "overloaded_error", "usage_backlog");
    LimitsUnavailable => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "limits_unavailable", "overloaded_error", "limits_unavailable");
    BodyBudget => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "overloaded", "overloaded_error", "body_budget");
    ShuttingDown => (SERVICE_UNAVAILABLE, Internal, "overloaded_error", "shutting_down", "overloaded_error", "shutting_down");
    UpstreamConnect => (BAD_GATEWAY, Upstream, "upstream_error", "upstream_connect_error", "api_error", "upstream_connect");
    UpstreamConnectTimeout => (GATEWAY_TIMEOUT, Upstream, "upstream_timeout", "upstream_connect_timeout", "api_error", "upstream_connect_timeout");
    UpstreamTimeout => (GATEWAY_TIMEOUT, Upstream, "upstream_timeout", "upstream_timeout", "api_error", "upstream_timeout");
    UpstreamProtocol => (BAD_GATEWAY, Upstream, "upstream_error", "upstream_protocol_error", "api_error", "upstream_protocol");
    UpstreamAuth => (BAD_GATEWAY, Upstream, "upstream_error", "upstream_auth_failed", "api_error", "upstream_auth");
    NoHealthyUpstream => (SERVICE_UNAVAILABLE, Upstream, "upstream_error", "no_healthy_upstream", "overloaded_error", "no_healthy_upstream");
    Internal => (INTERNAL_SERVER_ERROR, Internal, "server_error", "internal_error", "api_error", "internal");
}

impl ErrorKind {
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn status(self) -> StatusCode {
        self.info().status
    }

    pub fn origin(self) -> Origin {
        self.info().origin
    }

    pub fn openai_type(self) -> &'static str {
        self.info().openai_type
    }

    pub fn code(self) -> &'static str {
        self.info().code
    }

    pub fn anthropic_type(self) -> &'static str {
        self.info().anthropic_type
    }

    pub fn reason(self) -> &'static str {
        self.info().reason
    }

    /// Whether a failed attempt of this kind may be retried on another upstream. Only faults that
    /// happened before the upstream could have acted on the request qualify.
    pub fn retry_safe(self) -> bool {
        matches!(self, ErrorKind::UpstreamConnect | ErrorKind::UpstreamConnectTimeout | ErrorKind::NoHealthyUpstream)
    }
}

/// Rate-limit state reported to the client on 429s (OpenAI `x-ratelimit-*` headers).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitInfo {
    pub limit_requests: Option<u64>,
    pub remaining_requests: Option<u64>,
    pub reset_requests: Option<Duration>,
    pub limit_tokens: Option<u64>,
    pub remaining_tokens: Option<u64>,
    pub reset_tokens: Option<Duration>,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct GatewayError {
    pub kind: ErrorKind,
    pub message: Cow<'static, str>,
    /// The request field at fault, when there is one (OpenAI `error.param`).
    pub param: Option<Cow<'static, str>>,
    pub retry_after: Option<Duration>,
    pub rate_limit: Option<Box<RateLimitInfo>>,
    /// Retrying the same request cannot succeed (`x-should-retry: false`).
    pub no_retry: bool,
    /// Ask the connection to close after this answer.
    pub close_connection: bool,
}

impl GatewayError {
    pub fn new(kind: ErrorKind, message: impl Into<Cow<'static, str>>) -> Self {
        Self {
            kind,
            message: message.into(),
            param: None,
            retry_after: None,
            rate_limit: None,
            no_retry: kind == ErrorKind::InsufficientQuota,
            close_connection: false,
        }
    }

    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
    }

    /// A request head over `server::MAX_HEAD_BYTES`, or with more headers than hyper parses.
    pub fn head_too_large() -> Self {
        Self::new(
            ErrorKind::HeadersTooLarge,
            "the request's head is too large: at most 8 KiB of request line and headers, and at most 100 headers",
        )
    }

    pub fn with_param(mut self, param: impl Into<Cow<'static, str>>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn with_retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    pub fn with_rate_limit(mut self, info: RateLimitInfo) -> Self {
        self.rate_limit = Some(Box::new(info));
        self
    }

    pub fn closing(mut self) -> Self {
        self.close_connection = true;
        self
    }

    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_the_documented_answers() {
        assert_eq!(ErrorKind::TpmExceeded.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(ErrorKind::TpmExceeded.code(), "rate_limit_exceeded");
        assert_eq!(ErrorKind::TpmExceeded.reason(), "tpm");
        assert_eq!(ErrorKind::QueueFull.code(), "overloaded");
        assert_eq!(ErrorKind::UpstreamTimeout.origin(), Origin::Upstream);
        assert!(GatewayError::new(ErrorKind::InsufficientQuota, "x").no_retry);
        let reasons: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.reason()).collect();
        assert_eq!(reasons.len(), ErrorKind::ALL.len(), "reasons are distinct");
        assert!(ErrorKind::ALL.iter().enumerate().all(|(i, k)| k.index() == i));
    }
}
