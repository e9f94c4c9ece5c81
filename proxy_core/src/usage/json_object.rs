//! JSON objects written field by field, for the records the request path journals (the usage
//! event, the begin record): serde_json escapes every byte of every key it writes, which was two
//! fifths of encoding an event. Each caller holds its bytes to serde_json's with a property test.

use serde::Serialize;

/// A JSON object written field by field. Keys are the caller's literals (plain names, nothing to
/// escape); numbers and strings that need escaping go through serde_json, so the bytes are its.
pub(super) struct JsonObject {
    out: Vec<u8>,
}

impl JsonObject {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity);
        out.push(b'{');
        Self { out }
    }

    // The writers are inlined into each field's line: the key is a literal there, so its copy
    // is a few moves of known length instead of a call to `memcpy` (an event has 35 fields,
    // and the calls were most of what writing one cost).
    #[inline(always)]
    fn key(&mut self, name: &'static str) {
        if self.out.len() > 1 {
            self.out.push(b',');
        }
        self.out.push(b'"');
        self.out.extend_from_slice(name.as_bytes());
        self.out.extend_from_slice(b"\":");
    }

    #[inline(always)]
    pub(super) fn str(&mut self, name: &'static str, value: &str) {
        self.key(name);
        let plain = !value.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\');
        if plain {
            self.out.push(b'"');
            self.out.extend_from_slice(value.as_bytes());
            self.out.push(b'"');
        } else {
            self.serde(&value);
        }
    }

    #[inline(always)]
    pub(super) fn opt_str(&mut self, name: &'static str, value: Option<&str>) {
        match value {
            Some(value) => self.str(name, value),
            None => self.null(name),
        }
    }

    #[inline(always)]
    pub(super) fn bool(&mut self, name: &'static str, value: bool) {
        self.key(name);
        self.out.extend_from_slice(if value { b"true" } else { b"false" });
    }

    #[inline(always)]
    fn null(&mut self, name: &'static str) {
        self.key(name);
        self.out.extend_from_slice(b"null");
    }

    /// An integer or a float, as serde_json writes it (a float that is not finite is `null`).
    #[inline(always)]
    pub(super) fn number(&mut self, name: &'static str, value: impl Serialize) {
        self.key(name);
        self.serde(&value);
    }

    #[inline(always)]
    pub(super) fn opt_number<T: Serialize>(&mut self, name: &'static str, value: Option<T>) {
        match value {
            Some(value) => self.number(name, value),
            None => self.null(name),
        }
    }

    fn serde(&mut self, value: &impl Serialize) {
        // Writing to a Vec cannot fail, and these types always serialize.
        let _ = serde_json::to_writer(&mut self.out, value);
    }

    pub(super) fn finish(mut self) -> Vec<u8> {
        self.out.push(b'}');
        self.out
    }
}

/// Values for the property tests that hold a writer's bytes to serde_json's.
#[cfg(test)]
pub(super) mod strategies {
    use std::sync::Arc;

    use proptest::prelude::*;

    /// Plain names, and anything at all (quotes, backslashes, control characters, non-ASCII).
    pub fn text() -> impl Strategy<Value = Arc<str>> {
        prop_oneof![3 => "[a-z0-9_-]{0,24}", 1 => any::<String>()].prop_map(|s| Arc::from(s.as_str()))
    }

    /// Floats of every kind, those JSON has no number for among them.
    pub fn number() -> impl Strategy<Value = f64> {
        prop_oneof![any::<f64>(), 0.0..1e6f64, Just(f64::NAN), Just(f64::INFINITY), Just(-0.0)]
    }
}
