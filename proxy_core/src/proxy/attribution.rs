//! Cost attribution below the key: the tags a request carries (`x-sluicegate-tags:
//! team=search,feature=ac`) and the end user it names (OpenAI `user`, Anthropic
//! `metadata.user_id`, read by `peek`), both kept on its usage row. The client controls both and
//! every row keeps them, so both are bounded, and what exceeds a bound is refused with a 400
//! naming it, never cut short (a shortened tag would bill another team).

use std::sync::Arc;

use http::HeaderMap;

use crate::error::GatewayError;
use crate::header_names::X_SLUICEGATE_TAGS;

/// Tags per request.
pub const MAX_TAGS: usize = 10;
/// A tag's name: 1 to 32 of `a-z 0-9 _ - .`.
pub const MAX_TAG_NAME: usize = 32;
/// A tag's value: 1 to 64 of `A-Z a-z 0-9 _ - . : / @ +`.
pub const MAX_TAG_VALUE: usize = 64;
/// An end user's id, in characters (no control characters).
pub const MAX_END_USER: usize = 256;

fn name_char(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-' | b'.')
}

fn value_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.' | b':' | b'/' | b'@' | b'+')
}

fn refused(message: String) -> GatewayError {
    GatewayError::invalid(message).with_param("x-sluicegate-tags")
}

/// The request's tags as a JSON object with its names in order (`{"feature":"ac","team":"search"}`),
/// or `None` without the header. The alphabets need no escaping, so the text is written as is.
pub fn tags(headers: &HeaderMap) -> Result<Option<Arc<str>>, GatewayError> {
    let mut values = headers.get_all(X_SLUICEGATE_TAGS).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(refused("x-sluicegate-tags may appear once (tags are separated by commas)".into()));
    }
    let text = value.to_str().map_err(|_| refused("x-sluicegate-tags must be ASCII".into()))?;
    let mut tags: Vec<(&str, &str)> = Vec::new();
    for item in text.split(',') {
        let item = item.trim();
        let Some((name, value)) = item.split_once('=') else {
            return Err(refused(format!("tag {:?} must be NAME=VALUE", shown(item))));
        };
        let (name, value) = (name.trim(), value.trim());
        if name.is_empty() || name.len() > MAX_TAG_NAME || !name.bytes().all(name_char) {
            return Err(refused(format!("tag name {:?} must be 1 to {MAX_TAG_NAME} of a-z 0-9 _ - .", shown(name))));
        }
        if value.is_empty() || value.len() > MAX_TAG_VALUE || !value.bytes().all(value_char) {
            return Err(refused(format!(
                "the value of tag {name:?} must be 1 to {MAX_TAG_VALUE} of A-Z a-z 0-9 _ - . : / @ +"
            )));
        }
        if tags.iter().any(|(n, _)| *n == name) {
            return Err(refused(format!("tag {name:?} appears twice")));
        }
        if tags.len() == MAX_TAGS {
            return Err(refused(format!("at most {MAX_TAGS} tags per request")));
        }
        tags.push((name, value));
    }
    tags.sort_unstable();
    let mut json = String::with_capacity(text.len() + 4 * tags.len() + 2);
    json.push('{');
    for (i, (name, value)) in tags.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        for part in ["\"", name, "\":\"", value, "\""] {
            json.push_str(part);
        }
    }
    json.push('}');
    Ok(Some(Arc::from(json)))
}

/// At most 40 characters of what a client sent, for an error message.
fn shown(text: &str) -> String {
    text.chars().take(40).collect()
}

/// An end user's id as the body gave it: refused when too long or holding control characters.
pub fn end_user(field: &'static str, id: &str) -> Result<Arc<str>, GatewayError> {
    if id.chars().count() > MAX_END_USER || id.chars().any(char::is_control) {
        return Err(GatewayError::invalid(format!(
            "'{field}' must be at most {MAX_END_USER} characters, none of them control characters"
        ))
        .with_param(field));
    }
    Ok(Arc::from(id))
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn tagged(values: &[&str]) -> Result<Option<Arc<str>>, GatewayError> {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(X_SLUICEGATE_TAGS, HeaderValue::from_str(v).unwrap());
        }
        tags(&h)
    }

    #[test]
    fn tags_become_one_json_object_in_name_order() {
        assert_eq!(tagged(&[]).unwrap(), None);
        let json = tagged(&[" team=search , feature=ac:v2/beta "]).unwrap().unwrap();
        assert_eq!(&*json, r#"{"feature":"ac:v2/beta","team":"search"}"#);
        let parsed: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed["team"], "search");
        let ten: Vec<String> = (0..MAX_TAGS).map(|i| format!("t{i}=v")).collect();
        assert!(tagged(&[&ten.join(",")]).unwrap().is_some());
    }

    #[test]
    fn every_bound_is_refused_by_name() {
        let eleven: Vec<String> = (0..=MAX_TAGS).map(|i| format!("t{i}=v")).collect();
        let long_name = format!("{}=v", "n".repeat(MAX_TAG_NAME + 1));
        let long_value = format!("n={}", "v".repeat(MAX_TAG_VALUE + 1));
        for bad in [
            eleven.join(","),
            long_name,
            long_value,
            "team".into(),
            "team=".into(),
            "=search".into(),
            "Team=search".into(),
            "team=a\"b".into(),
            "team=a,team=b".into(),
            "team=search,".into(),
            String::new(),
        ] {
            let error = tagged(&[&bad]).expect_err(&bad);
            assert_eq!(error.param.as_deref(), Some("x-sluicegate-tags"), "{bad}");
        }
        assert!(tagged(&["a=1", "b=2"]).is_err(), "the header twice");
    }

    #[test]
    fn end_users_are_bounded() {
        assert_eq!(&*end_user("user", "user-42@example.com").unwrap(), "user-42@example.com");
        assert!(end_user("user", &"u".repeat(MAX_END_USER)).is_ok());
        let long = end_user("user", &"u".repeat(MAX_END_USER + 1)).unwrap_err();
        assert_eq!(long.param.as_deref(), Some("user"));
        assert!(end_user("metadata.user_id", "a\nb").is_err());
    }
}
