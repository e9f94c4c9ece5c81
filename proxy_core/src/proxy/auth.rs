//! Authenticating a request against the current snapshot.

use std::sync::Arc;

use http::header::{HeaderMap, HeaderName, AUTHORIZATION};

use crate::auth::{digest_eq, well_formed};
use crate::config::{KeyEntry, Snapshot};
use crate::error::{ErrorKind, GatewayError};
use crate::header_names::X_API_KEY;

/// The one answer for a key that is malformed, unknown, revoked, disabled or expired, so a caller
/// learns nothing about which.
fn invalid_key() -> GatewayError {
    GatewayError::new(
        ErrorKind::InvalidApiKey,
        "Incorrect API key provided. Check the key, or ask your administrator for a new one.",
    )
}

fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<Option<&'a str>, GatewayError> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(GatewayError::new(ErrorKind::InvalidApiKey, format!("the {name} header appears more than once")));
    }
    first.to_str().map(|v| Some(v.trim())).map_err(|_| invalid_key())
}

/// The presented key, from `Authorization: Bearer` or `x-api-key` (both may be sent if equal).
fn presented_key(headers: &HeaderMap) -> Result<&str, GatewayError> {
    let bearer = match single(headers, &AUTHORIZATION)? {
        None => None,
        Some(value) => {
            let (scheme, token) = value.split_once(' ').unwrap_or((value, ""));
            if !scheme.eq_ignore_ascii_case("bearer") {
                return Err(GatewayError::new(
                    ErrorKind::InvalidApiKey,
                    "the Authorization header must use the Bearer scheme",
                ));
            }
            Some(token.trim())
        }
    };
    let x_api_key = single(headers, &X_API_KEY)?;
    let key = match (bearer, x_api_key) {
        (Some(a), Some(b)) if a != b => {
            return Err(GatewayError::new(ErrorKind::InvalidApiKey, "Authorization and x-api-key carry different keys"))
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => "",
    };
    if key.is_empty() {
        return Err(GatewayError::new(
            ErrorKind::MissingApiKey,
            "You didn't provide an API key. Send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY'.",
        ));
    }
    Ok(key)
}

pub fn authenticate(snapshot: &Snapshot, headers: &HeaderMap, unix_now: f64) -> Result<Arc<KeyEntry>, GatewayError> {
    let key = presented_key(headers)?;
    if !well_formed(key) {
        return Err(invalid_key());
    }
    let digest = snapshot.hasher.hash(key);
    match snapshot.keys.get(&digest) {
        Some(entry) if digest_eq(&entry.hash, &digest) && entry.usable_at(unix_now) => Ok(entry.clone()),
        _ => Err(invalid_key()),
    }
}
