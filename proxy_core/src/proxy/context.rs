//! Everything an admitted request carries from the handler into forwarding and relaying: owned,
//! so a stream that waited in a queue can be forwarded from inside its response body.

use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use http::{HeaderMap, HeaderValue, Version};

use super::body::BodyBytes;
use super::peek::Peeked;
use super::shared::Shared;
use super::spans::TraceCtx;
use crate::config::{KeyEntry, Priority, Route};
use crate::endpoint::Endpoint;
use crate::header_names::X_STAINLESS_RETRY_COUNT;
use crate::limits::Held;
use crate::upstream::headers::reserved_name;

pub struct RequestCtx {
    pub shared: Arc<Shared>,
    pub request_id: Arc<str>,
    pub endpoint: Endpoint,
    pub key: Arc<KeyEntry>,
    pub route: Arc<Route>,
    pub peeked: Peeked,
    /// The client's headers, as `kept_headers` keeps them.
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
    /// The trace it belongs to (the client's `traceparent`, continued).
    pub trace: TraceCtx,
    /// `x-sluicegate-tags` (read before the headers are kept: the name never goes upstream).
    pub tags: Option<Arc<str>>,
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
        self.client_headers.get(X_STAINLESS_RETRY_COUNT).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
    }
}

/// The client's headers as a request keeps them for its whole life (a stream lasts minutes):
/// without the names that never go upstream (its credential above all), and with the values
/// copied into one allocation of their own. hyper's values are slices of the connection's read
/// buffer (8 KiB); keeping them would keep that buffer, and hyper would allocate another for the
/// connection's next read: 8 KiB more for every open stream.
pub fn kept_headers(headers: &HeaderMap) -> HeaderMap {
    let kept = || headers.iter().filter(|(name, _)| !reserved_name(name));
    let mut values = BytesMut::with_capacity(kept().map(|(_, v)| v.len()).sum());
    for (_, value) in kept() {
        values.extend_from_slice(value.as_bytes());
    }
    let mut values = values.freeze();
    let mut out = HeaderMap::with_capacity(headers.keys_len());
    for (name, value) in kept() {
        let own = values.split_to(value.len());
        // The bytes were a valid value a moment ago; a refusal here would be a bug, so the
        // original is kept rather than the header lost.
        out.append(name.clone(), HeaderValue::from_maybe_shared(own).unwrap_or_else(|_| value.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_headers_drop_credentials_and_share_no_byte_with_the_read_buffer() {
        // Values as hyper makes them: slices of one buffer.
        let head = bytes::Bytes::from_static(b"Bearer sk-sg-secret|application/json|python|a|b");
        let part = |at: usize, len: usize| HeaderValue::from_maybe_shared(head.slice(at..at + len)).unwrap();
        let mut h = HeaderMap::new();
        h.insert("authorization", part(0, 19));
        h.insert("x-api-key", part(7, 12));
        h.insert("content-type", part(20, 16));
        h.append("x-stainless-lang", part(37, 6));
        h.append("x-custom", part(44, 1));
        h.append("x-custom", part(46, 1));
        let kept = kept_headers(&h);
        assert!(!kept.contains_key("authorization") && !kept.contains_key("x-api-key"));
        assert_eq!(kept["content-type"], "application/json");
        assert_eq!(kept["x-stainless-lang"], "python");
        let custom: Vec<_> = kept.get_all("x-custom").iter().collect();
        assert_eq!(custom, ["a", "b"]);
        let buffer = head.as_ptr_range();
        for value in kept.values() {
            assert!(!buffer.contains(&value.as_bytes().as_ptr()), "{value:?} still points into the read buffer");
        }
    }
}
