//! Token usage as upstreams report it, in either API's vocabulary.

use serde::Deserialize;

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TokenUsage {
    pub prompt: u64,
    pub completion: u64,
    /// Prompt tokens served from the provider's cache (a subset of `prompt`).
    pub cached: u64,
    /// Prompt tokens written to the provider's cache (Anthropic's cache creation; a subset of
    /// `prompt`, apart from `cached`).
    pub cache_write: u64,
    /// Completion tokens spent on reasoning (a subset of `completion`).
    pub reasoning: u64,
}

#[derive(Debug, Default, Deserialize)]
struct Details {
    cached_tokens: Option<u64>,
    reasoning_tokens: Option<u64>,
}

/// Accepts OpenAI chat (`prompt_tokens`, `completion_tokens`, `*_tokens_details`), OpenAI
/// Responses (`input_tokens`, `output_tokens`, `*_tokens_details`) and Anthropic (`input_tokens`,
/// `output_tokens`, `cache_*_input_tokens`) field names. Responses and Anthropic share the
/// names with different meanings: Responses' `input_tokens` includes the cached ones (and comes
/// with `input_tokens_details`), Anthropic's counts only the uncached ones.
#[derive(Debug, Default, Deserialize)]
pub struct UsageProbe {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<Details>,
    completion_tokens_details: Option<Details>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    input_tokens_details: Option<Details>,
    output_tokens_details: Option<Details>,
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
        if let Some(r) = self.completion_tokens_details.as_ref().and_then(|d| d.reasoning_tokens) {
            usage.reasoning = r;
        }
        match (self.input_tokens, &self.input_tokens_details) {
            (Some(input), Some(details)) => {
                usage.prompt = input;
                usage.cached = details.cached_tokens.unwrap_or(0);
            }
            (Some(input), None) => {
                let read = self.cache_read_input_tokens.unwrap_or(0);
                let created = self.cache_creation_input_tokens.unwrap_or(0);
                usage.prompt = input.saturating_add(read).saturating_add(created);
                usage.cached = read;
                usage.cache_write = created;
            }
            (None, _) => {}
        }
        if let Some(o) = self.output_tokens {
            usage.completion = o;
        }
        if let Some(r) = self.output_tokens_details.as_ref().and_then(|d| d.reasoning_tokens) {
            usage.reasoning = r;
        }
        // An upstream's parts never exceed its whole: what is billed at a part's rate is at most
        // the tokens counted (a hostile or broken upstream cannot make the parts outgrow them).
        usage.cached = usage.cached.min(usage.prompt);
        usage.cache_write = usage.cache_write.min(usage.prompt - usage.cached);
        usage.reasoning = usage.reasoning.min(usage.completion);
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
        assert_eq!(
            usage_of_body(openai),
            Some(TokenUsage { prompt: 10, completion: 3, cached: 4, ..Default::default() })
        );
        let anthropic = br#"{"type":"message","usage":{"input_tokens":7,"output_tokens":2,
            "cache_read_input_tokens":5,"cache_creation_input_tokens":1}}"#;
        let counted = TokenUsage { prompt: 13, completion: 2, cached: 5, cache_write: 1, reasoning: 0 };
        assert_eq!(usage_of_body(anthropic), Some(counted));
        assert_eq!(usage_of_body(br#"{"usage":null}"#), None);
        assert_eq!(usage_of_body(b"not json"), None);
    }

    #[test]
    fn reasoning_and_the_responses_vocabulary() {
        let chat = br#"{"usage":{"prompt_tokens":20,"completion_tokens":9,
            "prompt_tokens_details":{"cached_tokens":8},"completion_tokens_details":{"reasoning_tokens":6}}}"#;
        let counted = TokenUsage { prompt: 20, completion: 9, cached: 8, cache_write: 0, reasoning: 6 };
        assert_eq!(usage_of_body(chat), Some(counted));
        // Responses: `input_tokens` already includes the cached ones.
        let responses = br#"{"object":"response","usage":{"input_tokens":20,"output_tokens":9,
            "input_tokens_details":{"cached_tokens":8},"output_tokens_details":{"reasoning_tokens":6},
            "total_tokens":29}}"#;
        assert_eq!(usage_of_body(responses), Some(counted));
    }

    #[test]
    fn parts_never_exceed_their_whole() {
        let inflated = br#"{"usage":{"prompt_tokens":5,"completion_tokens":2,
            "prompt_tokens_details":{"cached_tokens":500},"completion_tokens_details":{"reasoning_tokens":90}}}"#;
        let counted = TokenUsage { prompt: 5, completion: 2, cached: 5, cache_write: 0, reasoning: 2 };
        assert_eq!(usage_of_body(inflated), Some(counted));
    }
}
