//! Which headers cross the gateway, in either direction.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Hop-by-hop headers (RFC 9110 7.6.1) and their legacy companions.
const HOP_BY_HOP: &[HeaderName] = &[
    header::CONNECTION,
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

const LEGACY_HOP_BY_HOP: &[&str] = &["keep-alive", "proxy-connection"];

/// Client headers that never go upstream: the tenant's credentials, framing the gateway redoes,
/// and the gateway's own control headers.
const NOT_FORWARDED_UPSTREAM: &[&str] = &[
    "host",
    "content-length",
    "authorization",
    "x-api-key",
    "api-key",
    "cookie",
    "accept-encoding",
    "x-request-id",
    "request-id",
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
];

/// Upstream response headers the client does not get: the gateway sets its own ids and framing.
const NOT_RETURNED: &[&str] = &["x-request-id", "request-id", "set-cookie", "server"];

/// Prefix of the gateway's own headers; clients cannot smuggle them upstream.
pub const INTERNAL_PREFIX: &str = "x-sluicegate-";

fn connection_named(headers: &HeaderMap) -> Vec<HeaderName> {
    headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect()
}

fn strip_hop_by_hop(headers: &mut HeaderMap) {
    for name in connection_named(headers) {
        headers.remove(name);
    }
    for name in HOP_BY_HOP {
        headers.remove(name);
    }
    for name in LEGACY_HOP_BY_HOP {
        headers.remove(*name);
    }
}

/// The headers to send upstream, built from the client's.
pub fn upstream_request_headers(client: &HeaderMap) -> HeaderMap {
    let mut out = client.clone();
    strip_hop_by_hop(&mut out);
    for name in NOT_FORWARDED_UPSTREAM {
        out.remove(*name);
    }
    let internal: Vec<HeaderName> = out.keys().filter(|k| k.as_str().starts_with(INTERNAL_PREFIX)).cloned().collect();
    for name in internal {
        out.remove(name);
    }
    if !out.contains_key(header::CONTENT_TYPE) {
        out.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    out
}

/// Clean an upstream response's headers before they go to the client.
pub fn client_response_headers(headers: &mut HeaderMap) {
    strip_hop_by_hop(headers);
    for name in NOT_RETURNED {
        headers.remove(*name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_hop_by_hop_and_connection_named_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer sk-sg-secret"));
        h.insert("x-api-key", HeaderValue::from_static("sk-sg-secret"));
        h.insert("connection", HeaderValue::from_static("close, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-sluicegate-priority", HeaderValue::from_static("batch"));
        h.insert("x-stainless-retry-count", HeaderValue::from_static("1"));
        h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        let out = upstream_request_headers(&h);
        for gone in ["authorization", "x-api-key", "connection", "x-private", "keep-alive", "x-sluicegate-priority"] {
            assert!(!out.contains_key(gone), "{gone} leaked upstream");
        }
        assert!(out.contains_key("x-stainless-retry-count"));
        assert!(out.contains_key("anthropic-version"));
        assert_eq!(out["content-type"], "application/json");
    }
}
