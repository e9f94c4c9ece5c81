//! The parts of a count an upstream reports apart, asked per request with header
//! `x-sim-usage: cached=N,cache_write=N,reasoning=N`: prompt tokens read from and written to the
//! provider's cache, completion tokens spent on reasoning. Each is capped at what it is a part
//! of, the way a real provider counts.

use serde::Serialize;
use serde_json::{json, Map, Value};

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UsageParts {
    pub cached: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

impl UsageParts {
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut parts = Self::default();
        for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| format!("x-sim-usage: {item:?} is not NAME=N"))?;
            let n: u64 = value.trim().parse().map_err(|_| format!("x-sim-usage: {name}={value:?} is not a count"))?;
            match name.trim() {
                "cached" => parts.cached = n,
                "cache_write" => parts.cache_write = n,
                "reasoning" => parts.reasoning = n,
                other => return Err(format!("x-sim-usage: unknown part {other:?} (cached, cache_write, reasoning)")),
            }
        }
        Ok(parts)
    }

    /// Capped at the prompt (both cache parts together) and the completion.
    pub fn within(self, prompt: u64, completion: u64) -> Self {
        let cached = self.cached.min(prompt);
        Self { cached, cache_write: self.cache_write.min(prompt - cached), reasoning: self.reasoning.min(completion) }
    }

    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// OpenAI's `usage` object of a chat or completions answer.
    pub fn openai_usage(&self, prompt: u64, completion: u64) -> Value {
        let mut usage =
            json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion});
        if !self.is_empty() {
            usage["prompt_tokens_details"] = json!({"cached_tokens": self.cached});
            usage["completion_tokens_details"] = json!({"reasoning_tokens": self.reasoning});
        }
        usage
    }

    /// The Responses API's `usage`: `input_tokens` includes the cached ones, and the details are
    /// always there (as OpenAI sends them).
    pub fn responses_usage(&self, prompt: u64, completion: u64) -> Value {
        json!({
            "input_tokens": prompt,
            "input_tokens_details": {"cached_tokens": self.cached},
            "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": self.reasoning},
            "total_tokens": prompt + completion,
        })
    }

    /// Anthropic's prompt counts: `input_tokens` holds only the tokens read from neither cache
    /// part. (Anthropic reports no reasoning count: thinking is output.)
    pub fn anthropic_prompt(&self, prompt: u64) -> Map<String, Value> {
        let mut usage = Map::new();
        usage.insert("input_tokens".into(), json!(prompt - self.cached - self.cache_write));
        if !self.is_empty() {
            usage.insert("cache_read_input_tokens".into(), json!(self.cached));
            usage.insert("cache_creation_input_tokens".into(), json!(self.cache_write));
        }
        usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsed_and_capped() {
        let parts = UsageParts::parse("cached=8, reasoning=5,cache_write=4").unwrap();
        assert_eq!(parts, UsageParts { cached: 8, cache_write: 4, reasoning: 5 });
        assert_eq!(parts.within(10, 3), UsageParts { cached: 8, cache_write: 2, reasoning: 3 });
        assert!(UsageParts::parse("").unwrap().is_empty());
        for bad in ["cached", "cached=-1", "cached=x", "spare=1"] {
            assert!(UsageParts::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn each_vocabulary() {
        let parts = UsageParts { cached: 8, cache_write: 2, reasoning: 3 };
        let openai = parts.openai_usage(20, 5);
        assert_eq!(openai["prompt_tokens_details"]["cached_tokens"], 8);
        assert_eq!(openai["completion_tokens_details"]["reasoning_tokens"], 3);
        let responses = parts.responses_usage(20, 5);
        assert_eq!((responses["input_tokens"].as_u64(), responses["total_tokens"].as_u64()), (Some(20), Some(25)));
        assert_eq!(responses["output_tokens_details"]["reasoning_tokens"], 3);
        let anthropic = parts.anthropic_prompt(20);
        assert_eq!(
            (anthropic["input_tokens"].as_u64(), anthropic["cache_read_input_tokens"].as_u64()),
            (Some(10), Some(8))
        );
        assert_eq!(
            UsageParts::default().openai_usage(1, 2),
            json!({"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
        );
    }
}
