//! Compiling one pool member: its URIs per endpoint, credential header, the operator's headers,
//! the address checks that can be made on a literal host, and its pooled client.

use std::sync::Arc;

use http::uri::Scheme;
use http::{HeaderName, HeaderValue, Uri};

use super::compile::{err, ConfigError};
use super::model::{MemberConfig, ProviderKind};
use super::registry::Lease;
use super::snapshot::{AzureDeployments, Member, PoolTimeouts};
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

/// The header an `openai` member's credential goes in when not `Authorization: Bearer`: any
/// header name the gateway does not own (framing, hop-by-hop, trace context, its own), or one of
/// the usual credential names.
fn auth_header(path: &str, raw: &str) -> Result<HeaderName, ConfigError> {
    let field = format!("{path}.auth_header");
    let name = HeaderName::from_bytes(raw.as_bytes()).map_err(|_| err(field.clone(), "is not a header name"))?;
    let credential_name = matches!(name.as_str(), "authorization" | "x-api-key" | "api-key");
    if reserved_name(&name) && !credential_name {
        return Err(err(field, format!("{name} is the gateway's to set")));
    }
    Ok(name)
}

/// An `azure_openai` member's deployments (it needs `api_version`; no other kind takes one).
fn azure_deployments(path: &str, m: &MemberConfig, base: &str) -> Result<Option<AzureDeployments>, ConfigError> {
    let field = format!("{path}.api_version");
    match (m.kind, &m.api_version) {
        (ProviderKind::AzureOpenai, None) => Err(err(field, "is required for azure_openai members")),
        (ProviderKind::AzureOpenai, Some(v)) => {
            let allowed = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '.';
            if v.is_empty() || v.len() > 32 || !v.chars().all(allowed) {
                return Err(err(field, "must be 1-32 of A-Z a-z 0-9 - . (e.g. 2024-10-21)"));
            }
            Ok(Some(AzureDeployments { base: base.to_string(), api_version: v.clone() }))
        }
        (_, Some(_)) => Err(err(field, "is for azure_openai members")),
        (_, None) => Ok(None),
    }
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
    let azure = azure_deployments(path, m, &format!("{scheme}://{authority}{prefix}"))?;
    // An Azure member's requests and checks carry the API version.
    let query = azure.as_ref().map_or(String::new(), |a| format!("?api-version={}", a.api_version));
    let mut uris = Vec::with_capacity(Endpoint::ALL.len());
    for endpoint in Endpoint::ALL {
        let full = format!("{scheme}://{authority}{prefix}{}{query}", endpoint.upstream_suffix());
        uris.push(Uri::try_from(full).map_err(|e| err(format!("{path}.base_url"), e.to_string()))?);
    }
    let health_uri = match check_path {
        Some(check) => Some(
            Uri::try_from(format!("{scheme}://{authority}{prefix}{check}{query}"))
                .map_err(|e| err(format!("{path}.base_url"), e.to_string()))?,
        ),
        None => None,
    };
    let uris: [Uri; Endpoint::ALL.len()] =
        uris.try_into().map_err(|_| err(format!("{path}.base_url"), "internal: endpoint count"))?;

    let credential = match &m.credential {
        None => None,
        Some(secret) => {
            let (name, value) = match (m.kind, &m.auth_header) {
                (ProviderKind::Openai, None) => (http::header::AUTHORIZATION, format!("Bearer {secret}")),
                (ProviderKind::Openai, Some(raw)) => (auth_header(path, raw)?, secret.clone()),
                (ProviderKind::Anthropic, _) => (HeaderName::from_static("x-api-key"), secret.clone()),
                (ProviderKind::AzureOpenai, _) => (HeaderName::from_static("api-key"), secret.clone()),
            };
            let mut value = HeaderValue::try_from(value)
                // Never echo the credential itself.
                .map_err(|_| err(format!("{path}.credential"), "contains characters not allowed in a header"))?;
            value.set_sensitive(true);
            Some((name, value))
        }
    };
    if m.auth_header.is_some() && m.kind != ProviderKind::Openai {
        return Err(err(format!("{path}.auth_header"), "is for openai members (the others' header is fixed)"));
    }
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
        uris: Arc::new(uris),
        azure,
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
