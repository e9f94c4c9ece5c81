//! Everything an admitted request carries from the handler into forwarding and relaying: owned,
//! so a stream that waited in a queue can be forwarded from inside its response body.

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, Version};

use super::body::BodyBytes;
use super::peek::Peeked;
use super::shared::Shared;
use crate::config::{KeyEntry, Priority, Route};
use crate::endpoint::Endpoint;
use crate::limits::Held;

pub struct RequestCtx {
    pub shared: Arc<Shared>,
    pub request_id: Arc<str>,
    pub endpoint: Endpoint,
    pub key: Arc<KeyEntry>,
    pub route: Arc<Route>,
    pub peeked: Peeked,
    pub client_headers: HeaderMap,
    pub client_version: Version,
    pub priority: Priority,
    pub arrived: Instant,
    pub arrived_unix: f64,
    /// The client's deadline (`x-sluicegate-timeout-ms`): queue wait plus upstream time.
    pub deadline: Option<Instant>,
    /// Limit charges and slots, settled and released when the request ends.
    pub held: Held,
    /// The most output tokens the upstream may produce, written into the body sent upstream
    /// (`None`: nothing counts tokens and the client set no cap; the body goes as it came).
    pub output_cap: Option<u64>,
    /// The request body's share of the gateway's body budget, held until the request ends.
    pub body_bytes: BodyBytes,
}

impl RequestCtx {
    /// The gateway asks upstream for a usage chunk on OpenAI streams.
    pub fn want_usage(&self) -> bool {
        self.peeked.stream && matches!(self.endpoint, Endpoint::ChatCompletions | Endpoint::Completions)
    }

    /// The cap to write into the body sent upstream, and the field to add it as.
    pub fn cap_edit(&self) -> Option<(u64, &'static str)> {
        self.output_cap.zip(self.endpoint.output_cap_field())
    }

    pub fn client_retry_count(&self) -> Option<u32> {
        self.client_headers.get("x-stainless-retry-count").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
    }
}
