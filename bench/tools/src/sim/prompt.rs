//! The simulator's prompt count: the documented token estimate that stands in for a tokenizer.
//! The text a model reads (chat and Anthropic `messages`, Anthropic `system`, a completion's
//! `prompt`, an embedding's `input`) is measured in Unicode scalar values and counts
//! ceil(chars / 4) tokens; a pre-tokenized prompt counts one token per id; never less than 1.
//! Inside message objects only `content` and `text` are read (roles, names, image URLs are not
//! text the model reads as tokens here). Tool and response schemas are not counted: the
//! simulator reports what a model server would, not what the gateway reserves for.

use serde_json::Value;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    chars: u64,
    ids: u64,
}

impl Tally {
    fn take(&mut self, value: &Value) {
        match value {
            Value::String(text) => self.chars += text.chars().count() as u64,
            // Token ids are integers; a fractional number is no token.
            Value::Number(number) if number.is_u64() || number.is_i64() => self.ids += 1,
            Value::Array(items) => items.iter().for_each(|item| self.take(item)),
            Value::Object(fields) => {
                for key in ["content", "text"] {
                    if let Some(inner) = fields.get(key) {
                        self.take(inner);
                    }
                }
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
        }
    }
}

/// Prompt tokens of the given text fields of one request.
pub fn prompt_tokens<'a>(fields: impl IntoIterator<Item = &'a Value>) -> u64 {
    let mut tally = Tally::default();
    fields.into_iter().for_each(|field| tally.take(field));
    (tally.chars.div_ceil(4) + tally.ids).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_counts_a_token_per_four_scalar_values_rounded_up() {
        assert_eq!(prompt_tokens([&json!("abcd")]), 1);
        assert_eq!(prompt_tokens([&json!("abcde")]), 2);
        assert_eq!(prompt_tokens([&json!("x".repeat(41))]), 11);
        // Scalar values, not bytes: 11 characters, 14 bytes.
        assert_eq!(prompt_tokens([&json!("héllo wörld")]), 3);
        assert_eq!(prompt_tokens([&json!("")]), 1, "never less than one");
    }

    #[test]
    fn messages_count_content_and_text_parts_only() {
        let messages = json!([
            {"role": "system", "content": "abcd", "name": "a-long-name-that-is-not-read"},
            {"role": "user", "content": [
                {"type": "text", "text": "ef"},
                {"type": "image_url", "image_url": {"url": "data:AAAAAAAAAAAAAAAAAAAAAAAA"}},
            ]},
        ]);
        assert_eq!(prompt_tokens([&messages]), 2);
        // Anthropic's system prompt counts with the messages.
        assert_eq!(prompt_tokens([&json!("abcd"), &messages]), 3);
    }

    #[test]
    fn token_ids_count_one_each() {
        assert_eq!(prompt_tokens([&json!([[1, 2, 3], [4]])]), 4);
        assert_eq!(prompt_tokens([&json!([1, 2, "abcd"])]), 3);
        assert_eq!(prompt_tokens([&json!([1.5, true, null])]), 1);
    }
}
