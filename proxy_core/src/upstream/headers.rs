//! Which headers cross the gateway, in either direction: allow-lists, not deny-lists. A header the
//! gateway does not know stays behind, so a client cannot pick the operator's billing account
//! upstream (`OpenAI-Organization`, `OpenAI-Project`) or switch on beta features the operator did
//! not choose (`OpenAI-Beta`, `anthropic-beta`), and an upstream's account headers, rate-limit
//! figures and host names never reach a tenant. The operator widens the lists per provider: names
//! of client headers to pass through, and headers of its own to send.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::header_names::{ANTHROPIC_VERSION, RETRY_AFTER_MS, X_SHOULD_RETRY};

/// Client headers every upstream gets: what describes the body and the API version the client
/// speaks, and the client's name for the upstream's logs. Trace context (`traceparent`,
/// `tracestate`) is the gateway's to write: validated and continued (`proxy/spans.rs`).
const FROM_CLIENT: [HeaderName; 4] = [header::CONTENT_TYPE, header::ACCEPT, header::USER_AGENT, ANTHROPIC_VERSION];
/// The official SDKs' own telemetry (`x-stainless-retry-count`, `-lang`, `-timeout`, ...): it
/// describes the client and can neither pick an account nor switch a feature on.
const SDK_PREFIX: &str = "x-stainless-";

/// Upstream response headers the client gets (the gateway adds its own ids and limits): the
/// body's description, and when to come back when the upstream's answer is relayed as it was.
const TO_CLIENT: [HeaderName; 6] = [
    header::CONTENT_TYPE,
    header::CONTENT_LENGTH,
    header::CACHE_CONTROL,
    header::RETRY_AFTER,
    RETRY_AFTER_MS,
    X_SHOULD_RETRY,
];

/// Prefix of the gateway's own headers.
pub const INTERNAL_PREFIX: &str = "x-sluicegate-";

/// Names an operator may not add to a provider's pass-through list or set itself: credentials
/// (the tenant's must never go upstream; the member's is `credential`), framing and hop-by-hop
/// headers the gateway owns, and its own headers.
pub fn reserved_name(name: &HeaderName) -> bool {
    const RESERVED: &[&str] = &[
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "upgrade",
        "x-request-id",
        "request-id",
        "accept-encoding",
        "traceparent",
        "tracestate",
    ];
    RESERVED.contains(&name.as_str()) || name.as_str().starts_with(INTERNAL_PREFIX)
}

/// The headers to send upstream: the allowed client headers, those the provider lets through,
/// then the provider's own (which win over the client's).
pub fn upstream_request_headers(
    client: &HeaderMap,
    pass_through: &[HeaderName],
    provider_headers: &[(HeaderName, HeaderValue)],
) -> HeaderMap {
    let mut out = HeaderMap::with_capacity(FROM_CLIENT.len() + provider_headers.len() + 4);
    for name in &FROM_CLIENT {
        for value in client.get_all(name) {
            out.append(name.clone(), value.clone());
        }
    }
    for (name, value) in client {
        if name.as_str().starts_with(SDK_PREFIX) {
            out.append(name.clone(), value.clone());
        }
    }
    for name in pass_through {
        for value in client.get_all(name) {
            out.append(name.clone(), value.clone());
        }
    }
    for (name, value) in provider_headers {
        out.insert(name.clone(), value.clone());
    }
    if !out.contains_key(header::CONTENT_TYPE) {
        out.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    }
    out
}

/// The name of an upstream response header a client may see, from its bytes as they arrived
/// (any case); `None` for the rest. The gateway's own HTTP/1.1 client keeps only these of an
/// answer's head: nothing downstream reads another (`relay` and the retry hints read a subset).
pub fn client_may_see(raw: &[u8]) -> Option<HeaderName> {
    TO_CLIENT.iter().find(|name| raw.eq_ignore_ascii_case(name.as_str().as_bytes())).cloned()
}

/// Keep only the upstream response headers a client may see, each once. A head that holds
/// nothing else (the gateway's own client keeps no more) is kept as it is.
pub fn client_response_headers(upstream: HeaderMap) -> HeaderMap {
    let only_allowed = upstream.len() == upstream.keys_len() && upstream.keys().all(|name| TO_CLIENT.contains(name));
    if only_allowed {
        return upstream;
    }
    let mut out = HeaderMap::with_capacity(TO_CLIENT.len());
    for name in &TO_CLIENT {
        if let Some(value) = upstream.get(name) {
            out.insert(name.clone(), value.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_client_headers_go_upstream() {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer sk-sg-secret"));
        h.insert("x-api-key", HeaderValue::from_static("sk-sg-secret"));
        h.insert("connection", HeaderValue::from_static("close, x-private"));
        h.insert("x-private", HeaderValue::from_static("1"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert("x-sluicegate-priority", HeaderValue::from_static("batch"));
        h.insert("openai-organization", HeaderValue::from_static("org-victim"));
        h.insert("openai-project", HeaderValue::from_static("proj_victim"));
        h.insert("openai-beta", HeaderValue::from_static("assistants=v2"));
        h.insert("anthropic-beta", HeaderValue::from_static("computer-use-2025-01-24"));
        h.insert("anthropic-version", HeaderValue::from_static("2023-06-01"));
        h.insert("traceparent", HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
        let out = upstream_request_headers(&h, &[], &[]);
        for gone in [
            "authorization",
            "x-api-key",
            "connection",
            "x-private",
            "keep-alive",
            "x-sluicegate-priority",
            "openai-organization",
            "openai-project",
            "openai-beta",
            "anthropic-beta",
        ] {
            assert!(!out.contains_key(gone), "{gone} leaked upstream");
        }
        assert!(out.contains_key("anthropic-version"));
        // Trace context is written by the gateway itself, never copied from the client.
        assert!(!out.contains_key("traceparent"));
        h.insert("x-stainless-retry-count", HeaderValue::from_static("1"));
        assert!(upstream_request_headers(&h, &[], &[]).contains_key("x-stainless-retry-count"));
        assert_eq!(out["content-type"], "application/json");
    }

    #[test]
    fn the_provider_lets_named_headers_through_and_sets_its_own() {
        let mut h = HeaderMap::new();
        h.insert("anthropic-beta", HeaderValue::from_static("prompt-caching-2024-07-31"));
        h.insert("openai-organization", HeaderValue::from_static("org-victim"));
        let pass = [HeaderName::from_static("anthropic-beta")];
        let own = [(HeaderName::from_static("openai-organization"), HeaderValue::from_static("org-operator"))];
        let out = upstream_request_headers(&h, &pass, &own);
        assert_eq!(out["anthropic-beta"], "prompt-caching-2024-07-31");
        assert_eq!(out["openai-organization"], "org-operator");
        assert_eq!(out.get_all("openai-organization").iter().count(), 1);
    }

    #[test]
    fn upstream_account_and_host_headers_stay_behind() {
        let mut h = HeaderMap::new();
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert("content-length", HeaderValue::from_static("12"));
        h.insert("openai-organization", HeaderValue::from_static("org-operator"));
        h.insert("x-ratelimit-remaining-tokens", HeaderValue::from_static("1000"));
        h.insert("server", HeaderValue::from_static("internal-vllm-7.corp"));
        h.insert("set-cookie", HeaderValue::from_static("a=b"));
        h.insert("x-request-id", HeaderValue::from_static("upstream-id"));
        let out = client_response_headers(h);
        assert_eq!(out.len(), 2);
        assert!(out.contains_key("content-type") && out.contains_key("content-length"));
    }

    #[test]
    fn an_allowed_name_sent_twice_reaches_the_client_once() {
        let mut h = HeaderMap::new();
        h.append("content-type", HeaderValue::from_static("application/json"));
        h.append("cache-control", HeaderValue::from_static("no-cache"));
        h.append("cache-control", HeaderValue::from_static("no-store"));
        let out = client_response_headers(h);
        assert_eq!(out.get_all("cache-control").iter().count(), 1);
        let only_allowed = client_response_headers(out.clone());
        assert_eq!(only_allowed, out);
    }

    #[test]
    fn the_names_a_client_may_see_are_matched_in_any_case() {
        assert_eq!(client_may_see(b"Content-Type"), Some(header::CONTENT_TYPE));
        assert_eq!(client_may_see(b"RETRY-AFTER-MS"), Some(RETRY_AFTER_MS));
        assert_eq!(client_may_see(b"server"), None);
        assert_eq!(client_may_see(b"content-typ"), None);
    }

    #[test]
    fn credentials_and_framing_are_reserved() {
        for name in ["authorization", "x-api-key", "host", "content-length", "x-sluicegate-upstream"] {
            assert!(reserved_name(&HeaderName::from_static(name)), "{name}");
        }
        assert!(!reserved_name(&HeaderName::from_static("anthropic-beta")));
    }
}
