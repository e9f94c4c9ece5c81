//! Compiling one pool member: its URIs per endpoint, credential header, the operator's headers,
//! the address checks that can be made on a literal host, and its pooled client.

use std::sync::Arc;

use http::uri::Scheme;
use http::{HeaderName, HeaderValue, Uri};

use super::compile::{err, ConfigError};
use super::model::{MemberConfig, ProviderKind};
use super::registry::Lease;
use super::snapshot::{Member, PoolTimeouts};
use crate::endpoint::Endpoint;
use crate::upstream::headers::reserved_name;
use crate::upstream::{forbidden_address, is_metadata, ClientSettings};

/// The operator's pass-through names and own headers of one member, checked.
type MemberHeaders = (Vec<HeaderName>, Vec<(HeaderName, HeaderValue)>);

fn member_headers(m: &MemberConfig, path: &str) -> Result<MemberHeaders, ConfigError> {
    let name = |field: String, raw: &str| -> Result<HeaderName, ConfigError> {
        let name = HeaderName::from_bytes(raw.as_bytes()).map_err(|_| err(field.clone(), "is not a header name"))?;
        if reserved_name(&name) {
            return Err(err(field, format!("{name} is the gateway's to set or to keep from upstreams")));
        }
        Ok(name)
    };
    let mut pass_through = Vec::with_capacity(m.forward_headers.len());
    for (i, raw) in m.forward_headers.iter().enumerate() {
        pass_through.push(name(format!("{path}.forward_headers[{i}]"), raw)?);
    }
    let mut headers = Vec::with_capacity(m.headers.len());
    for (raw, value) in &m.headers {
        let field = format!("{path}.headers.{raw}");
        let name = name(field.clone(), raw)?;
        // Values may be secrets of the operator's: never echoed.
        let value = HeaderValue::try_from(value.as_str())
            .map_err(|_| err(field, "has a value with characters not allowed in a header"))?;
        headers.push((name, value));
    }
    Ok((pass_through, headers))
}

pub(super) fn compile_member(
    path: &str,
    pool_id: &str,
    m: &MemberConfig,
    pool_timeouts: &PoolTimeouts,
    check_path: Option<&str>,
    lease: &mut Lease<'_>,
) -> Result<Member, ConfigError> {
    let base: Uri = m.base_url.parse().map_err(|_| err(format!("{path}.base_url"), "is not a valid URL"))?;
    let scheme = base
        .scheme()
        .filter(|s| *s == &Scheme::HTTP || *s == &Scheme::HTTPS)
        .ok_or_else(|| err(format!("{path}.base_url"), "must start with http:// or https://"))?
        .clone();
    let authority = base.authority().ok_or_else(|| err(format!("{path}.base_url"), "needs a host"))?.clone();
    if base.query().is_some() {
        return Err(err(format!("{path}.base_url"), "must not carry a query"));
    }
    let prefix = base.path().trim_end_matches('/');
    let mut uris = Vec::with_capacity(Endpoint::ALL.len());
    for endpoint in Endpoint::ALL {
        let full = format!("{scheme}://{authority}{prefix}{}", endpoint.upstream_suffix());
        uris.push(Uri::try_from(full).map_err(|e| err(format!("{path}.base_url"), e.to_string()))?);
    }
    let health_uri = match check_path {
        Some(check) => Some(
            Uri::try_from(format!("{scheme}://{authority}{prefix}{check}"))
                .map_err(|e| err(format!("{path}.base_url"), e.to_string()))?,
        ),
        None => None,
    };
    let uris: [Uri; Endpoint::ALL.len()] =
        uris.try_into().map_err(|_| err(format!("{path}.base_url"), "internal: endpoint count"))?;

    let credential = match &m.credential {
        None => None,
        Some(secret) => {
            let (name, value) = match m.kind {
                ProviderKind::Openai => (http::header::AUTHORIZATION, format!("Bearer {secret}")),
                ProviderKind::Anthropic => (HeaderName::from_static("x-api-key"), secret.clone()),
            };
            let mut value = HeaderValue::try_from(value)
                // Never echo the credential itself.
                .map_err(|_| err(format!("{path}.credential"), "contains characters not allowed in a header"))?;
            value.set_sensitive(true);
            Some((name, value))
        }
    };
    if m.max_concurrency == Some(0) {
        return Err(err(format!("{path}.max_concurrency"), "must be positive when set"));
    }
    let (pass_through, headers) = member_headers(m, path)?;
    let member_key = format!("{pool_id}/{}", m.id);
    let literal = authority.host().trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<std::net::IpAddr>() {
        if is_metadata(ip) {
            return Err(err(
                format!("{path}.base_url"),
                "points at a cloud metadata address, which no member may reach",
            ));
        }
        if !m.internal && forbidden_address(ip) {
            return Err(err(
                format!("{path}.base_url"),
                "points at a link-local or unspecified address; mark the member internal to allow it",
            ));
        }
    }
    let port = authority.port_u16().unwrap_or(if scheme == Scheme::HTTPS { 443 } else { 80 });
    let settings = ClientSettings {
        connect_timeout: pool_timeouts.connect,
        http2_prior_knowledge: m.http2 && scheme == Scheme::HTTP,
        allow_internal: m.internal,
        port,
    };
    let client = lease
        .client(&member_key, settings)
        .map_err(|e| err(format!("{path}.base_url"), format!("TLS setup failed: {e}")))?;
    Ok(Member {
        id: Arc::from(m.id.as_str()),
        kind: m.kind,
        host: Arc::from(literal),
        port,
        uris,
        credential,
        secret: m.credential.as_deref().map(Arc::from),
        pass_through,
        headers,
        health_uri,
        weight: m.weight,
        max_concurrency: m.max_concurrency,
        client,
        state: lease.member_state(&member_key),
    })
}
