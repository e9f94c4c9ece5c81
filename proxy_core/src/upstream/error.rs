//! How an upstream exchange fails, whichever client carried it: before the connection was open
//! (nothing reached the upstream), or on it (the request may have).

use std::fmt;

#[derive(Debug)]
pub enum UpstreamError {
    /// No connection: refused, unreachable, not allowed by the address guard, or timed out.
    Connect { timed_out: bool, detail: String },
    /// The connection failed, or the upstream broke HTTP, before a response head arrived.
    Exchange(String),
}

impl fmt::Display for UpstreamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UpstreamError::Connect { timed_out: true, detail } => write!(f, "connect timed out: {detail}"),
            UpstreamError::Connect { timed_out: false, detail } => write!(f, "connect failed: {detail}"),
            UpstreamError::Exchange(detail) => write!(f, "exchange failed: {detail}"),
        }
    }
}

impl std::error::Error for UpstreamError {}

/// A response body that failed part-way.
#[derive(Debug)]
pub struct BodyError(pub String);

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BodyError {}
