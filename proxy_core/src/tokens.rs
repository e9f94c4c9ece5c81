//! The documented token estimate, used wherever no tokenizer's count is available: when an upstream
//! reports no usage, and for TPM and quota reservations. (The simulator, in `bench/tools`, counts
//! its prompts by the same rule with its own code.)
//!
//! Rule: the text of the request (message `content` strings and `text` parts, Anthropic `system`,
//! completion `prompt`, embedding `input`) is measured in Unicode scalar values; the estimate is
//! `ceil(chars / 4)`, at least 1. Token-id arrays (completions and embeddings accept them) count
//! one token per id.

use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::json_str::JsonStr;

/// Characters and pre-tokenized ids found in one request's text fields.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TextMeasure {
    pub chars: u64,
    pub token_ids: u64,
}

impl TextMeasure {
    pub fn add(&mut self, other: TextMeasure) {
        self.chars += other.chars;
        self.token_ids += other.token_ids;
    }

    pub fn tokens(self) -> u64 {
        (self.chars.div_ceil(4) + self.token_ids).max(1)
    }
}

/// Measures a value that is a string, an array of strings/token ids/parts, or nested arrays.
/// Inside objects only `text` and `content` are text; everything else (image URLs, roles, tool
/// schemas) is skipped.
pub struct Measured(pub TextMeasure);

impl<'de> Deserialize<'de> for Measured {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MeasureVisitor).map(Measured)
    }
}

struct MeasureVisitor;

impl<'de> Visitor<'de> for MeasureVisitor {
    type Value = TextMeasure;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("text, token ids, or a list of message parts")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<TextMeasure, E> {
        Ok(TextMeasure { chars: v.chars().count() as u64, token_ids: 0 })
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<TextMeasure, E> {
        Ok(TextMeasure { chars: 0, token_ids: 1 })
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<TextMeasure, E> {
        Ok(TextMeasure { chars: 0, token_ids: 1 })
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<TextMeasure, E> {
        Ok(TextMeasure::default())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<TextMeasure, E> {
        Ok(TextMeasure::default())
    }

    fn visit_unit<E: de::Error>(self) -> Result<TextMeasure, E> {
        Ok(TextMeasure::default())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TextMeasure, A::Error> {
        let mut total = TextMeasure::default();
        while let Some(Measured(m)) = seq.next_element()? {
            total.add(m);
        }
        Ok(total)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<TextMeasure, A::Error> {
        let mut total = TextMeasure::default();
        while let Some(JsonStr(key)) = map.next_key::<JsonStr<'de>>()? {
            if key == "text" || key == "content" {
                total.add(map.next_value::<Measured>()?.0);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(total)
    }
}

/// Measure one JSON value's text (see the module rule).
pub fn measure_json(raw: &str) -> Result<TextMeasure, serde_json::Error> {
    serde_json::from_str::<Measured>(raw).map(|m| m.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_messages_count_content_and_text_parts_only() {
        let m = measure_json(
            r#"[{"role":"system","content":"abcd"},
                {"role":"user","content":[{"type":"text","text":"ef"},
                 {"type":"image_url","image_url":{"url":"data:AAAAAAAAAAAAAAAA"}}]}]"#,
        )
        .unwrap();
        assert_eq!(m, TextMeasure { chars: 6, token_ids: 0 });
        assert_eq!(m.tokens(), 2);
    }

    #[test]
    fn token_ids_count_one_each_and_minimum_is_one() {
        let m = measure_json("[[1,2,3],[4]]").unwrap();
        assert_eq!(m.tokens(), 4);
        assert_eq!(measure_json("\"\"").unwrap().tokens(), 1);
        assert_eq!(measure_json("\"héllo wörld\"").unwrap().chars, 11);
    }
}
