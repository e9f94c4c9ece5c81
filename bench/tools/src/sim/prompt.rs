//! The simulator's prompt count: the documented token estimate that stands in for a tokenizer.
//! The text a model reads (chat and Anthropic `messages`, Anthropic `system`, a completion's
//! `prompt`, an embedding's `input`) is measured in Unicode scalar values and counts
//! ceil(chars / 4) tokens; a pre-tokenized prompt counts one token per id; never less than 1.
//! Inside message objects `content` and `text` are read (roles, names, image URLs are not text
//! the model reads as tokens here), and so are the model's own earlier tool calls, which it reads
//! back: OpenAI's `tool_calls[].function.arguments` text, Anthropic's `tool_use` `input` as
//! compact JSON. Tool definitions reach a model as prompt text too (real servers count them): the
//! `tools` and `tool_choice` fields count as the characters of their JSON as sent, the way the
//! gateway's estimate counts them.

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
                let calls = fields.get("tool_calls").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
                for arguments in calls.iter().filter_map(|c| c.pointer("/function/arguments")?.as_str()) {
                    self.chars += arguments.chars().count() as u64;
                }
                if fields.get("type").and_then(Value::as_str) == Some("tool_use") {
                    if let Some(input) = fields.get("input") {
                        self.chars += input.to_string().chars().count() as u64;
                    }
                }
            }
            Value::Number(_) | Value::Bool(_) | Value::Null => {}
        }
    }
}

/// Prompt tokens of one request: its text fields, and its tool fields as their raw JSON text.
pub fn prompt_tokens<'a>(fields: impl IntoIterator<Item = &'a Value>, schemas: &[&str]) -> u64 {
    let mut tally = Tally::default();
    fields.into_iter().for_each(|field| tally.take(field));
    tally.chars += schemas.iter().map(|raw| raw.chars().count() as u64).sum::<u64>();
    (tally.chars.div_ceil(4) + tally.ids).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_counts_a_token_per_four_scalar_values_rounded_up() {
        assert_eq!(prompt_tokens([&json!("abcd")], &[]), 1);
        assert_eq!(prompt_tokens([&json!("abcde")], &[]), 2);
        assert_eq!(prompt_tokens([&json!("x".repeat(41))], &[]), 11);
        // Scalar values, not bytes: 11 characters, 14 bytes.
        assert_eq!(prompt_tokens([&json!("héllo wörld")], &[]), 3);
        assert_eq!(prompt_tokens([&json!("")], &[]), 1, "never less than one");
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
        assert_eq!(prompt_tokens([&messages], &[]), 2);
        // Anthropic's system prompt counts with the messages.
        assert_eq!(prompt_tokens([&json!("abcd"), &messages], &[]), 3);
    }

    #[test]
    fn tool_calls_and_tool_schemas_count() {
        let openai = json!([
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "a-long-unread-name", "arguments": "{\"q\":1}"}},
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "abcd"},
        ]);
        // `{"q":1}` (7) and the result (4): 11 characters.
        assert_eq!(prompt_tokens([&openai], &[]), 3);
        let anthropic = json!([
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "n", "input": {"q": 1}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "abcd"}]},
        ]);
        assert_eq!(prompt_tokens([&anthropic], &[]), 3);
        // Schemas count their characters as sent, spaces included, with the text.
        let tools = r#"[{"name": "n"}]"#;
        assert_eq!(prompt_tokens([&json!("abcd")], &[tools, "\"auto\""]), 7);
    }

    #[test]
    fn token_ids_count_one_each() {
        assert_eq!(prompt_tokens([&json!([[1, 2, 3], [4]])], &[]), 4);
        assert_eq!(prompt_tokens([&json!([1, 2, "abcd"])], &[]), 3);
        assert_eq!(prompt_tokens([&json!([1.5, true, null])], &[]), 1);
    }
}
