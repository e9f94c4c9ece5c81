//! Token usage as upstreams report it, in either API's vocabulary.

use serde::Deserialize;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TokenUsage {
    pub prompt: u64,
    pub completion: u64,
    /// Prompt tokens served from the provider's cache (a subset of `prompt`).
    pub cached: u64,
}

#[derive(Debug, Default, Deserialize)]
struct Details {
    cached_tokens: Option<u64>,
}

/// Accepts OpenAI (`prompt_tokens`, `completion_tokens`, `prompt_tokens_details.cached_tokens`)
/// and Anthropic (`input_tokens`, `output_tokens`, `cache_*_input_tokens`) field names.
#[derive(Debug, Default, Deserialize)]
pub struct UsageProbe {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<Details>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl UsageProbe {
    pub fn is_empty(&self) -> bool {
        self.prompt_tokens.is_none()
            && self.completion_tokens.is_none()
            && self.input_tokens.is_none()
            && self.output_tokens.is_none()
    }

    /// Merge into `usage`: fields present here overwrite (Anthropic's counts are cumulative).
    pub fn merge_into(&self, usage: &mut TokenUsage) {
        if let Some(p) = self.prompt_tokens {
            usage.prompt = p;
        }
        if let Some(c) = self.completion_tokens {
            usage.completion = c;
        }
        if let Some(c) = self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens) {
            usage.cached = c;
        }
        if let Some(input) = self.input_tokens {
            let read = self.cache_read_input_tokens.unwrap_or(0);
            let created = self.cache_creation_input_tokens.unwrap_or(0);
            usage.prompt = input + read + created;
            usage.cached = read;
        }
        if let Some(o) = self.output_tokens {
            usage.completion = o;
        }
    }
}

/// The `usage` object of a whole (non-streaming) JSON response.
pub fn usage_of_body(body: &[u8]) -> Option<TokenUsage> {
    #[derive(Deserialize)]
    struct Body {
        usage: Option<UsageProbe>,
    }
    let probe = serde_json::from_slice::<Body>(body).ok()?.usage?;
    if probe.is_empty() {
        return None;
    }
    let mut usage = TokenUsage::default();
    probe.merge_into(&mut usage);
    Some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_and_anthropic_bodies() {
        let openai = br#"{"id":"x","usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,
            "prompt_tokens_details":{"cached_tokens":4}}}"#;
        assert_eq!(usage_of_body(openai), Some(TokenUsage { prompt: 10, completion: 3, cached: 4 }));
        let anthropic = br#"{"type":"message","usage":{"input_tokens":7,"output_tokens":2,
            "cache_read_input_tokens":5,"cache_creation_input_tokens":1}}"#;
        assert_eq!(usage_of_body(anthropic), Some(TokenUsage { prompt: 13, completion: 2, cached: 5 }));
        assert_eq!(usage_of_body(br#"{"usage":null}"#), None);
        assert_eq!(usage_of_body(b"not json"), None);
    }
}
