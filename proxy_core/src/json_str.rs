//! A JSON string as the request path reads one: borrowed from the input unless it holds escapes.
//!
//! serde's own `Cow<str>` always deserializes the owned form, an allocation for every object key
//! of a request body (and of every message in it) and for every string field read as one.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

/// A string borrowed from the JSON text when it holds no escape, owned otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonStr<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for JsonStr<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_str(JsonStrVisitor)
    }
}

struct JsonStrVisitor;

impl<'de> Visitor<'de> for JsonStrVisitor {
    type Value = JsonStr<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<JsonStr<'de>, E> {
        Ok(JsonStr(Cow::Borrowed(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<JsonStr<'de>, E> {
        Ok(JsonStr(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<JsonStr<'de>, E> {
        Ok(JsonStr(Cow::Owned(v)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_string_is_borrowed_and_an_escaped_one_owned() {
        let plain: JsonStr<'_> = serde_json::from_str(r#""model""#).expect("a string");
        assert!(matches!(plain.0, Cow::Borrowed("model")));
        let escaped: JsonStr<'_> = serde_json::from_str(r#""mo\u0064el""#).expect("a string");
        assert!(matches!(&escaped.0, Cow::Owned(s) if s == "model"));
        // As an object's key, the way the request path reads most of them.
        struct Keys;
        impl<'de> Visitor<'de> for Keys {
            type Value = Vec<JsonStr<'de>>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<JsonStr<'de>>()? {
                    map.next_value::<de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(keys)
            }
        }
        let mut de = serde_json::Deserializer::from_str(r#"{"model":1,"b\u0063":2}"#);
        let keys = de.deserialize_map(Keys).expect("an object");
        assert!(matches!(keys[0].0, Cow::Borrowed("model")));
        assert!(matches!(&keys[1].0, Cow::Owned(s) if s == "bc"));
    }

    #[test]
    fn anything_but_a_string_is_refused() {
        for text in ["1", "null", "[]", "{}", "true"] {
            assert!(serde_json::from_str::<JsonStr<'_>>(text).is_err(), "{text}");
        }
    }
}
