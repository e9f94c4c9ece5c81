//! One error type for everything the gateway answers on its own (Pingora's model): each kind says
//! where the fault came from, which HTTP status and error `type`/`code` the client sees in either
//! API flavour, and whether another attempt on a different upstream is safe.

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidRequest,
    MissingApiKey,
    InvalidApiKey,
    ModelNotAllowed,
    ModelNotFound,
    RouteNotFound,
    MethodNotAllowed,
    PayloadTooLarge,
    RateLimited,
    InsufficientQuota,
    Overloaded,
    NotConfigured,
    UsageBacklog,
    ShuttingDown,
    UpstreamConnect,
    UpstreamConnectTimeout,
    UpstreamTimeout,
    UpstreamProtocol,
    NoHealthyUpstream,
    Internal,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 20] = [
        ErrorKind::InvalidRequest,
        ErrorKind::MissingApiKey,
        ErrorKind::InvalidApiKey,
        ErrorKind::ModelNotAllowed,
        ErrorKind::ModelNotFound,
        ErrorKind::RouteNotFound,
        ErrorKind::MethodNotAllowed,
        ErrorKind::PayloadTooLarge,
        ErrorKind::RateLimited,
        ErrorKind::InsufficientQuota,
        ErrorKind::Overloaded,
        ErrorKind::NotConfigured,
        ErrorKind::UsageBacklog,
        ErrorKind::ShuttingDown,
        ErrorKind::UpstreamConnect,
        ErrorKind::UpstreamConnectTimeout,
        ErrorKind::UpstreamTimeout,
        ErrorKind::UpstreamProtocol,
        ErrorKind::NoHealthyUpstream,
        ErrorKind::Internal,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn status(self) -> StatusCode {
        use ErrorKind::*;
        match self {
            InvalidRequest => StatusCode::BAD_REQUEST,
            MissingApiKey | InvalidApiKey => StatusCode::UNAUTHORIZED,
            ModelNotAllowed => StatusCode::FORBIDDEN,
            ModelNotFound | RouteNotFound => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            RateLimited | InsufficientQuota => StatusCode::TOO_MANY_REQUESTS,
            Overloaded | NotConfigured | UsageBacklog | ShuttingDown | NoHealthyUpstream => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            UpstreamConnect | UpstreamProtocol => StatusCode::BAD_GATEWAY,
            UpstreamTimeout | UpstreamConnectTimeout => StatusCode::GATEWAY_TIMEOUT,
            Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn origin(self) -> Origin {
        use ErrorKind::*;
        match self {
            InvalidRequest | MissingApiKey | InvalidApiKey | ModelNotAllowed | ModelNotFound
            | RouteNotFound | MethodNotAllowed | PayloadTooLarge | RateLimited
            | InsufficientQuota => Origin::Downstream,
            UpstreamConnect
            | UpstreamConnectTimeout
            | UpstreamTimeout
            | UpstreamProtocol
            | NoHealthyUpstream => Origin::Upstream,
            Overloaded | NotConfigured | UsageBacklog | ShuttingDown | Internal => Origin::Internal,
        }
    }

    /// The OpenAI `error.type` field.
    pub fn openai_type(self) -> &'static str {
        use ErrorKind::*;
        match self {
            InvalidRequest | ModelNotFound | RouteNotFound | MethodNotAllowed | PayloadTooLarge => {
                "invalid_request_error"
            }
            MissingApiKey | InvalidApiKey => "authentication_error",
            ModelNotAllowed => "permission_error",
            RateLimited => "rate_limit_error",
            InsufficientQuota => "insufficient_quota",
            Overloaded | NotConfigured | UsageBacklog | ShuttingDown => "overloaded_error",
            UpstreamConnect | UpstreamProtocol | NoHealthyUpstream => "upstream_error",
            UpstreamTimeout | UpstreamConnectTimeout => "upstream_timeout",
            Internal => "server_error",
        }
    }

    /// The OpenAI `error.code` field: a stable machine-readable reason.
    pub fn code(self) -> &'static str {
        use ErrorKind::*;
        match self {
            InvalidRequest => "invalid_request",
            MissingApiKey => "missing_api_key",
            InvalidApiKey => "invalid_api_key",
            ModelNotAllowed => "model_not_allowed",
            ModelNotFound => "model_not_found",
            RouteNotFound => "unknown_url",
            MethodNotAllowed => "method_not_allowed",
            PayloadTooLarge => "request_too_large",
            RateLimited => "rate_limit_exceeded",
            InsufficientQuota => "insufficient_quota",
            Overloaded => "overloaded",
            NotConfigured => "not_configured",
            UsageBacklog => "usage_backlog",
            ShuttingDown => "shutting_down",
            UpstreamConnect => "upstream_connect_error",
            UpstreamConnectTimeout => "upstream_connect_timeout",
            UpstreamTimeout => "upstream_timeout",
            UpstreamProtocol => "upstream_protocol_error",
            NoHealthyUpstream => "no_healthy_upstream",
            Internal => "internal_error",
        }
    }

    /// The Anthropic `error.type` field.
    pub fn anthropic_type(self) -> &'static str {
        use ErrorKind::*;
        match self {
            InvalidRequest | ModelNotFound | RouteNotFound | MethodNotAllowed => {
                "invalid_request_error"
            }
            MissingApiKey | InvalidApiKey => "authentication_error",
            ModelNotAllowed => "permission_error",
            PayloadTooLarge => "request_too_large",
            RateLimited | InsufficientQuota => "rate_limit_error",
            Overloaded | NotConfigured | UsageBacklog | ShuttingDown | NoHealthyUpstream => {
                "overloaded_error"
            }
            UpstreamConnect
            | UpstreamConnectTimeout
            | UpstreamProtocol
            | UpstreamTimeout
            | Internal => "api_error",
        }
    }

    /// Whether a failed attempt of this kind may be retried on another upstream. Only faults that
    /// happened before the upstream could have acted on the request qualify.
    pub fn retry_safe(self) -> bool {
        matches!(
            self,
            ErrorKind::UpstreamConnect
                | ErrorKind::UpstreamConnectTimeout
                | ErrorKind::NoHealthyUpstream
        )
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
    /// Ask the connection to close after this answer (request smuggling shapes).
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
            close_connection: false,
        }
    }

    pub fn invalid(message: impl Into<Cow<'static, str>>) -> Self {
        Self::new(ErrorKind::InvalidRequest, message)
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
