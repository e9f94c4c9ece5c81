//! Reading a streamed answer as a client does: events cut at blank lines (any of the three line
//! endings the SSE format allows, split across chunks anywhere), the events that carry generated
//! content, the usage in either API's vocabulary, a proper end and an error event.

use serde::de::IgnoredAny;
use serde::Deserialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grammar {
    /// Chat and text completions: `data:` JSON chunks, then `data: [DONE]`.
    OpenAi,
    /// Anthropic messages: named events, `message_stop` at the end.
    Anthropic,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub prompt: u64,
    pub completion: u64,
}

/// Token counts under either name; Anthropic's prompt is split into fresh and cached parts.
#[derive(Debug, Default, Deserialize)]
struct UsageFields {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
}

impl UsageFields {
    fn is_empty(&self) -> bool {
        [self.prompt_tokens, self.completion_tokens, self.input_tokens, self.output_tokens].iter().all(Option::is_none)
    }

    /// Later reports overwrite earlier ones field by field (Anthropic's counts are running totals).
    fn apply(&self, usage: &mut Usage) {
        if let Some(prompt) = self.prompt_tokens {
            usage.prompt = prompt;
        }
        if let Some(input) = self.input_tokens {
            usage.prompt =
                input + self.cache_read_input_tokens.unwrap_or(0) + self.cache_creation_input_tokens.unwrap_or(0);
        }
        if let Some(completion) = self.completion_tokens.or(self.output_tokens) {
            usage.completion = completion;
        }
    }
}

/// The `usage` of a whole (non-streamed) JSON answer.
pub fn usage_of_body(body: &[u8]) -> Option<Usage> {
    #[derive(Deserialize)]
    struct Answer {
        usage: Option<UsageFields>,
    }
    let fields = serde_json::from_slice::<Answer>(body).ok()?.usage.filter(|u| !u.is_empty())?;
    let mut usage = Usage::default();
    fields.apply(&mut usage);
    Some(usage)
}

#[derive(Deserialize)]
struct OpenAiChunk {
    #[serde(default)]
    choices: Vec<OpenAiChoice>,
    usage: Option<UsageFields>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct OpenAiChoice {
    text: Option<String>,
    delta: Option<OpenAiDelta>,
}

#[derive(Deserialize)]
struct OpenAiDelta {
    content: Option<String>,
    reasoning_content: Option<String>,
    tool_calls: Option<IgnoredAny>,
}

impl OpenAiChoice {
    fn has_content(&self) -> bool {
        let text = |t: &Option<String>| t.as_deref().is_some_and(|t| !t.is_empty());
        text(&self.text)
            || self
                .delta
                .as_ref()
                .is_some_and(|d| text(&d.content) || text(&d.reasoning_content) || d.tool_calls.is_some())
    }
}

#[derive(Deserialize)]
struct AnthropicEvent {
    #[serde(rename = "type")]
    kind: String,
    message: Option<AnthropicMessage>,
    usage: Option<UsageFields>,
    delta: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct AnthropicMessage {
    usage: Option<UsageFields>,
}

/// What one fed chunk completed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    pub events: u64,
    pub content_events: u64,
}

/// A stream being read, chunk by chunk.
pub struct StreamReader {
    grammar: Grammar,
    /// The line being read, when a chunk ended inside it.
    line: Vec<u8>,
    /// The last chunk ended with CR: a LF opening the next one belongs to that line ending.
    after_cr: bool,
    /// The current event's joined `data:` lines, and whether it has any line at all.
    data: Option<Vec<u8>>,
    open: bool,
    pub events: u64,
    /// Events that carried generated content (one per token for the servers we know).
    pub content_events: u64,
    pub usage: Option<Usage>,
    /// `data: [DONE]` (OpenAI) or `message_stop` (Anthropic) arrived.
    pub terminated: bool,
    /// The server sent an error event.
    pub upstream_error: bool,
}

impl StreamReader {
    pub fn new(grammar: Grammar) -> Self {
        Self {
            grammar,
            line: Vec::new(),
            after_cr: false,
            data: None,
            open: false,
            events: 0,
            content_events: 0,
            usage: None,
            terminated: false,
            upstream_error: false,
        }
    }

    pub fn feed(&mut self, mut chunk: &[u8]) -> Fed {
        let before = (self.events, self.content_events);
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = chunk.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.line.extend_from_slice(&chunk[..end]);
            let line = std::mem::take(&mut self.line);
            self.on_line(&line);
            let crlf = chunk[end] == b'\r' && chunk.get(end + 1) == Some(&b'\n');
            self.after_cr = chunk[end] == b'\r' && end + 1 == chunk.len();
            chunk = &chunk[end + if crlf { 2 } else { 1 }..];
        }
        self.line.extend_from_slice(chunk);
        Fed { events: self.events - before.0, content_events: self.content_events - before.1 }
    }

    fn on_line(&mut self, line: &[u8]) {
        if line.is_empty() {
            if std::mem::take(&mut self.open) {
                self.events += 1;
                if let Some(data) = self.data.take() {
                    self.on_data(&data);
                }
            }
            return;
        }
        self.open = true;
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (line, &b""[..]),
        };
        if field == b"data" {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            match &mut self.data {
                Some(data) => {
                    data.push(b'\n');
                    data.extend_from_slice(value);
                }
                None => self.data = Some(value.to_vec()),
            }
        }
    }

    fn on_data(&mut self, data: &[u8]) {
        let (content, usage) = match self.grammar {
            Grammar::OpenAi => self.openai(data),
            Grammar::Anthropic => self.anthropic(data),
        };
        if content {
            self.content_events += 1;
        }
        if let Some(fields) = usage.filter(|u| !u.is_empty()) {
            fields.apply(self.usage.get_or_insert_with(Usage::default));
        }
    }

    fn openai(&mut self, data: &[u8]) -> (bool, Option<UsageFields>) {
        if data == b"[DONE]" {
            self.terminated = true;
            return (false, None);
        }
        let Ok(chunk) = serde_json::from_slice::<OpenAiChunk>(data) else {
            return (false, None);
        };
        if chunk.error.is_some() {
            self.upstream_error = true;
        }
        (chunk.choices.iter().any(OpenAiChoice::has_content), chunk.usage)
    }

    fn anthropic(&mut self, data: &[u8]) -> (bool, Option<UsageFields>) {
        let Ok(event) = serde_json::from_slice::<AnthropicEvent>(data) else {
            return (false, None);
        };
        match event.kind.as_str() {
            "message_start" => (false, event.message.and_then(|m| m.usage)),
            "content_block_delta" => (event.delta.is_some(), None),
            "message_delta" => (false, event.usage),
            "message_stop" => {
                self.terminated = true;
                (false, None)
            }
            "error" => {
                self.upstream_error = true;
                (false, None)
            }
            _ => (false, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> String {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}],\"usage\":null}}\n\n")
    }

    #[test]
    fn openai_tokens_usage_and_end() {
        let mut reader = StreamReader::new(Grammar::OpenAi);
        let role = "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n";
        assert_eq!(reader.feed(role.as_bytes()), Fed { events: 1, content_events: 0 });
        let two = format!("{}{}", token(" a"), token(" b"));
        assert_eq!(reader.feed(two.as_bytes()), Fed { events: 2, content_events: 2 });
        let end = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        reader.feed(end.as_bytes());
        assert_eq!((reader.events, reader.content_events), (5, 2));
        assert_eq!(reader.usage, Some(Usage { prompt: 5, completion: 2 }));
        assert!(reader.terminated && !reader.upstream_error);
    }

    #[test]
    fn events_split_anywhere_and_every_line_ending_count_once() {
        let whole =
            format!("{}: keep-alive\r\n\r\n{}", token("x").replace('\n', "\r"), token("y").replace('\n', "\r\n"));
        for cut in 0..whole.len() {
            let mut reader = StreamReader::new(Grammar::OpenAi);
            let (a, b) = whole.as_bytes().split_at(cut);
            let fed = reader.feed(a).events + reader.feed(b).events;
            assert_eq!((fed, reader.content_events), (3, 2), "cut at {cut}");
        }
    }

    #[test]
    fn malformed_chunks_carry_no_content_and_error_chunks_are_noticed() {
        let mut reader = StreamReader::new(Grammar::OpenAi);
        reader.feed(b"data: {\"choices\":[{\"delta\":{\"content\":\"unterminated\n\n");
        reader.feed(b"data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n");
        assert_eq!((reader.events, reader.content_events), (2, 0));
        assert!(reader.upstream_error && !reader.terminated);
    }

    #[test]
    fn anthropic_events_and_running_usage() {
        let mut reader = StreamReader::new(Grammar::Anthropic);
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\"output_tokens\":1,\"cache_read_input_tokens\":3}}}\n\n",
            "event: ping\ndata: {\"type\": \"ping\"}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" a\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        reader.feed(stream.as_bytes());
        assert_eq!((reader.events, reader.content_events), (5, 1));
        assert_eq!(reader.usage, Some(Usage { prompt: 10, completion: 4 }));
        assert!(reader.terminated);
    }

    #[test]
    fn whole_answers_in_both_vocabularies() {
        let openai = br#"{"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13}}"#;
        assert_eq!(usage_of_body(openai), Some(Usage { prompt: 10, completion: 3 }));
        let anthropic = br#"{"usage":{"input_tokens":7,"output_tokens":2,"cache_creation_input_tokens":1}}"#;
        assert_eq!(usage_of_body(anthropic), Some(Usage { prompt: 8, completion: 2 }));
        assert_eq!(usage_of_body(br#"{"usage":null}"#), None);
        assert_eq!(usage_of_body(br#"{"usage":{}}"#), None);
        assert_eq!(usage_of_body(b"not json"), None);
    }
}
