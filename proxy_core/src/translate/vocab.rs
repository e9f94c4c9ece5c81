//! The words both APIs have for the same thing: why an answer stopped, what kind of error it
//! was, and how its tokens were counted.

use serde_json::{json, Map, Value};

/// Anthropic's `stop_reason` as a Chat Completions `finish_reason`.
pub fn finish_reason(stop_reason: &str) -> &'static str {
    match stop_reason {
        "max_tokens" | "model_context_window_exceeded" => "length",
        "tool_use" => "tool_calls",
        "refusal" => "content_filter",
        // end_turn, stop_sequence, pause_turn and whatever comes next: the turn ended.
        _ => "stop",
    }
}

/// A Chat Completions `finish_reason` as Anthropic's `stop_reason`; `matched_stop` is the stop
/// string the server reports it matched (vLLM's `stop_reason`), if any.
pub fn stop_reason(finish_reason: &str, matched_stop: Option<&str>) -> &'static str {
    match finish_reason {
        "length" => "max_tokens",
        "tool_calls" | "function_call" => "tool_use",
        "content_filter" => "refusal",
        _ if matched_stop.is_some() => "stop_sequence",
        _ => "end_turn",
    }
}

/// The Anthropic error `type` for an HTTP status.
pub fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        400 | 422 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        503 | 529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The OpenAI error `type` for an Anthropic one (OpenAI's clients branch on the status; the type
/// is for people reading it).
pub fn openai_error_type(anthropic_type: &str) -> &str {
    match anthropic_type {
        "rate_limit_error" => "rate_limit_error",
        "api_error" | "overloaded_error" | "timeout_error" => "server_error",
        other => other,
    }
}

fn count(usage: &Value, field: &str) -> u64 {
    usage.get(field).and_then(Value::as_u64).unwrap_or(0)
}

/// Anthropic usage (input counts only the uncached tokens) as Chat Completions usage (prompt
/// counts them all, the cached ones again in `prompt_tokens_details`).
pub fn openai_usage(anthropic: &Value) -> Value {
    let read = count(anthropic, "cache_read_input_tokens");
    let written = count(anthropic, "cache_creation_input_tokens");
    let prompt = count(anthropic, "input_tokens").saturating_add(read).saturating_add(written);
    let completion = count(anthropic, "output_tokens");
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt.saturating_add(completion),
        "prompt_tokens_details": {"cached_tokens": read},
    })
}

/// Chat Completions usage as Anthropic usage.
pub fn anthropic_usage(openai: &Value) -> Value {
    let cached = openai.pointer("/prompt_tokens_details/cached_tokens").and_then(Value::as_u64).unwrap_or(0);
    let prompt = count(openai, "prompt_tokens");
    let mut usage = Map::new();
    usage.insert("input_tokens".into(), prompt.saturating_sub(cached).into());
    usage.insert("output_tokens".into(), count(openai, "completion_tokens").into());
    usage.insert("cache_read_input_tokens".into(), cached.min(prompt).into());
    usage.insert("cache_creation_input_tokens".into(), 0.into());
    Value::Object(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keeps_every_token_in_both_directions() {
        let anthropic = json!({"input_tokens": 10, "output_tokens": 4, "cache_read_input_tokens": 30,
            "cache_creation_input_tokens": 5});
        let openai = openai_usage(&anthropic);
        assert_eq!(openai["prompt_tokens"], 45);
        assert_eq!(openai["total_tokens"], 49);
        assert_eq!(openai["prompt_tokens_details"]["cached_tokens"], 30);
        let back = anthropic_usage(&json!({"prompt_tokens": 45, "completion_tokens": 4,
            "prompt_tokens_details": {"cached_tokens": 30}}));
        assert_eq!(back["input_tokens"], 15);
        assert_eq!(back["cache_read_input_tokens"], 30);
        assert_eq!(back["output_tokens"], 4);
    }

    #[test]
    fn stop_reasons_round_trip_where_both_have_a_word() {
        for (anthropic, openai) in [("end_turn", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls")] {
            assert_eq!(finish_reason(anthropic), openai);
            assert_eq!(stop_reason(openai, None), anthropic);
        }
        assert_eq!(stop_reason("stop", Some("###")), "stop_sequence");
        assert_eq!(finish_reason("refusal"), "content_filter");
    }
}
