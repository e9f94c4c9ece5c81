//! The meter of a whole (non-streaming) JSON answer: reads the body as it is relayed, chunk by
//! chunk, in constant memory, and finds what billing needs: the top-level `usage` object, and
//! for an answer without one, the text it generated (`choices[].message.content`,
//! `choices[].text`, Anthropic's top-level `content`, the Responses API's `output`, measured
//! by the `tokens` module's rule).
//!
//! Nothing is buffered but the `usage` value itself (bounded), so an answer of any size is billed:
//! from its usage when it has one, else from its text, and if it is not JSON at all, from the
//! characters relayed. Keys and strings are scanned byte by byte; a byte that breaks JSON turns
//! the meter to its last resort (characters relayed) instead of guessing.

use crate::sse::usage::{TokenUsage, UsageProbe};
use crate::tokens::TextMeasure;

/// A `usage` object larger than this is not read (no upstream sends one near it).
const MAX_USAGE_BYTES: usize = 64 * 1024;
/// Nesting deeper than this is treated as unreadable.
const MAX_DEPTH: usize = 256;
/// Only keys this short are compared; longer ones are never ones we look for.
const KEY_BYTES: usize = 16;

/// Where a value sits, for what its text means to billing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Root,
    Choices,
    Choice,
    Message,
    /// Text here counts (the `tokens` rule: strings, token ids, `text`/`content` of objects).
    Measure,
    Usage,
    Ignore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Container {
    Object,
    Array,
}

#[derive(Debug, Clone, Copy)]
struct Frame {
    container: Container,
    ctx: Ctx,
}

/// Where a string's escape sequence is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    None,
    Backslash,
    /// Inside `\uXXXX`: digits seen so far and their value.
    Hex {
        seen: u8,
        value: u16,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    /// A value may start (after `:`, `[`, `,` in an array, or at the top).
    Value,
    /// After `{` or `,` in an object: a key or (right after `{`) the end.
    Key {
        first: bool,
    },
    /// After a key: `:`.
    Colon,
    /// After a value: `,` or the end of the container.
    After,
    /// Inside a string: a key or a value (the value's context is `scalar_ctx`).
    Str {
        key: bool,
        esc: Esc,
    },
    Number {
        float: bool,
    },
    Literal,
    /// The whole top-level value ended; only whitespace may follow.
    Done,
    Broken,
}

pub struct WholeBodyMeter {
    stack: Vec<Frame>,
    lex: Lex,
    /// The context of the string, number or literal being read.
    scalar_ctx: Ctx,
    key: [u8; KEY_BYTES],
    key_len: usize,
    key_long: bool,
    /// The `usage` value's bytes while it is read; `Some(empty)` once it was too large.
    usage: Option<Vec<u8>>,
    /// Stack depth at which the captured `usage` value started.
    usage_depth: Option<usize>,
    usage_done: Option<Vec<u8>>,
    text: TextMeasure,
    /// Characters (Unicode scalar values) relayed, for a body that is not JSON.
    relayed_chars: u64,
}

impl Default for WholeBodyMeter {
    fn default() -> Self {
        Self {
            stack: Vec::new(),
            lex: Lex::Value,
            scalar_ctx: Ctx::Root,
            key: [0; KEY_BYTES],
            key_len: 0,
            key_long: false,
            usage: None,
            usage_depth: None,
            usage_done: None,
            text: TextMeasure::default(),
            relayed_chars: 0,
        }
    }
}

/// Bytes before the next quote or backslash. Keys and short values end within a few bytes, where
/// eight bytes at a time in a register are cheapest (a byte loop there was a sixth of the meter's
/// time on a short answer); a long text is searched with SIMD past its first 16 bytes.
fn string_run_len(rest: &[u8]) -> usize {
    const SHORT: usize = 16;
    let mut at = 0;
    while at < SHORT {
        let Some(word) = rest.get(at..at + 8) else {
            let tail = &rest[at..];
            return at + tail.iter().position(|b| *b == b'"' || *b == b'\\').unwrap_or(tail.len());
        };
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(word);
        if let Some(found) = first_quote_or_backslash(u64::from_le_bytes(bytes)) {
            return at + found;
        }
        at += 8;
    }
    SHORT + memchr::memchr2(b'"', b'\\', &rest[SHORT..]).unwrap_or(rest.len() - SHORT)
}

/// The index of the first `"` or `\` among the eight bytes of `word` (little-endian). A byte
/// equal to the one sought is zero after the xor; `(x - 0x01..) & !x & 0x80..` flags the zero
/// bytes, exactly up to the first of them (a borrow may flag bytes after it, never before).
fn first_quote_or_backslash(word: u64) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let zero_bytes = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let hits = zero_bytes(word ^ (ONES * u64::from(b'"'))) | zero_bytes(word ^ (ONES * u64::from(b'\\')));
    (hits != 0).then(|| (hits.trailing_zeros() / 8) as usize)
}

/// Characters (Unicode scalar values) in UTF-8 `bytes`: the bytes that do not continue one, which
/// is also what a body that is not valid UTF-8 is measured by. Summed in bytes, a block of 255 at
/// a time (a u64 per byte made the compiler widen every lane: a fifth of the meter's time).
fn scalar_values(bytes: &[u8]) -> u64 {
    bytes.chunks(255).map(|block| u64::from(block.iter().fold(0u8, |n, b| n + u8::from((b & 0xc0) != 0x80)))).sum()
}

fn child_ctx(parent: Option<Frame>, key: &[u8]) -> Ctx {
    let Some(parent) = parent else {
        return Ctx::Root;
    };
    match (parent.container, parent.ctx) {
        (_, Ctx::Usage) => Ctx::Usage,
        (Container::Object, Ctx::Root) => match key {
            b"usage" => Ctx::Usage,
            b"choices" => Ctx::Choices,
            // Anthropic's `content`, the Responses API's `output` (items with `content` parts).
            b"content" | b"output" => Ctx::Measure,
            _ => Ctx::Ignore,
        },
        (Container::Object, Ctx::Choice) => match key {
            b"message" => Ctx::Message,
            b"text" => Ctx::Measure,
            _ => Ctx::Ignore,
        },
        (Container::Object, Ctx::Message) if key == b"content" => Ctx::Measure,
        (Container::Object, Ctx::Measure) if key == b"text" || key == b"content" => Ctx::Measure,
        (Container::Array, Ctx::Choices) => Ctx::Choice,
        (Container::Array, Ctx::Measure) => Ctx::Measure,
        _ => Ctx::Ignore,
    }
}

impl WholeBodyMeter {
    pub fn new() -> Self {
        Self::default()
    }

    fn value_ctx(&self) -> Ctx {
        let key = if self.key_long { &b""[..] } else { &self.key[..self.key_len] };
        let ctx = child_ctx(self.stack.last().copied(), key);
        // Only a top-level object's children are looked at: `[...]` or a scalar answer is ignored.
        if self.stack.is_empty() {
            return Ctx::Root;
        }
        if self.stack.len() == 1 && self.stack[0].container == Container::Array {
            return Ctx::Ignore;
        }
        ctx
    }

    /// Read the next chunk of the body.
    pub fn feed(&mut self, chunk: &[u8]) {
        self.relayed_chars += scalar_values(chunk);
        let mut at = 0;
        while at < chunk.len() {
            if self.lex == Lex::Broken {
                return;
            }
            // Most of an answer is string bytes, and up to the next quote or backslash they only
            // add to what is counted: taken as one run, not byte by byte through the lexer.
            if let Lex::Str { key, esc: Esc::None } = self.lex {
                let rest = &chunk[at..];
                let run = string_run_len(rest);
                if run > 0 {
                    self.string_run(key, &rest[..run]);
                    at += run;
                    continue;
                }
            }
            self.byte(chunk[at]);
            at += 1;
        }
    }

    /// Bytes inside a string that are neither its closing quote nor a backslash: what
    /// `string_byte` does for each of them, at once.
    fn string_run(&mut self, key: bool, run: &[u8]) {
        self.capture_all(run);
        if key {
            let room = KEY_BYTES - self.key_len;
            let taken = run.len().min(room);
            self.key[self.key_len..self.key_len + taken].copy_from_slice(&run[..taken]);
            self.key_len += taken;
            self.key_long |= run.len() > room;
        } else if self.scalar_ctx == Ctx::Measure {
            self.text.chars += scalar_values(run);
        }
    }

    /// `capture` for each byte of `run`, at once.
    fn capture_all(&mut self, run: &[u8]) {
        if let Some(buf) = &mut self.usage {
            if buf.len() + run.len() <= MAX_USAGE_BYTES {
                buf.extend_from_slice(run);
            } else {
                for &b in run {
                    self.capture(b);
                }
            }
        }
    }

    fn capture(&mut self, b: u8) {
        if let Some(buf) = &mut self.usage {
            if buf.len() < MAX_USAGE_BYTES {
                buf.push(b);
            } else {
                buf.clear();
                buf.shrink_to_fit();
                self.usage_depth = None;
            }
        }
    }

    /// A value in `ctx` begins with byte `b` at the current depth.
    fn begin_value(&mut self, ctx: Ctx, b: u8) {
        if ctx == Ctx::Usage && self.usage_depth.is_none() && self.usage_done.is_none() && self.usage.is_none() {
            self.usage = Some(Vec::with_capacity(256));
            self.usage_depth = Some(self.stack.len());
        }
        self.capture(b);
        match b {
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH {
                    self.lex = Lex::Broken;
                    return;
                }
                let container = if b == b'{' { Container::Object } else { Container::Array };
                self.stack.push(Frame { container, ctx });
                self.lex = if container == Container::Object { Lex::Key { first: true } } else { Lex::Value };
            }
            b'"' => {
                self.scalar_ctx = ctx;
                self.lex = Lex::Str { key: false, esc: Esc::None };
            }
            b'-' | b'0'..=b'9' => {
                self.scalar_ctx = ctx;
                self.lex = Lex::Number { float: false };
            }
            b't' | b'f' | b'n' => {
                self.scalar_ctx = ctx;
                self.lex = Lex::Literal;
            }
            _ => self.lex = Lex::Broken,
        }
    }

    /// A value (scalar or container) just ended at the current depth.
    fn end_value(&mut self) {
        if self.usage_depth == Some(self.stack.len()) {
            self.usage_done = self.usage.take();
            self.usage_depth = None;
        }
        self.lex = if self.stack.is_empty() { Lex::Done } else { Lex::After };
    }

    fn close(&mut self, b: u8) {
        let want = if b == b'}' { Container::Object } else { Container::Array };
        match self.stack.pop() {
            Some(frame) if frame.container == want => {
                self.capture(b);
                self.end_value();
            }
            _ => self.lex = Lex::Broken,
        }
    }

    fn byte(&mut self, b: u8) {
        let ws = matches!(b, b' ' | b'\t' | b'\n' | b'\r');
        match self.lex {
            Lex::Value => {
                if ws {
                    return;
                }
                if b == b']' && self.stack.last().is_some_and(|f| f.container == Container::Array) {
                    return self.close(b);
                }
                let ctx = self.value_ctx();
                self.begin_value(ctx, b);
            }
            Lex::Key { first } => match b {
                _ if ws => {}
                b'"' => {
                    self.capture(b);
                    self.key_len = 0;
                    self.key_long = false;
                    self.lex = Lex::Str { key: true, esc: Esc::None };
                }
                b'}' if first => self.close(b),
                _ => self.lex = Lex::Broken,
            },
            Lex::Colon => match b {
                _ if ws => {}
                b':' => {
                    self.capture(b);
                    self.lex = Lex::Value;
                }
                _ => self.lex = Lex::Broken,
            },
            Lex::After => match b {
                _ if ws => {}
                b',' => {
                    self.capture(b);
                    self.lex = match self.stack.last().map(|f| f.container) {
                        Some(Container::Object) => Lex::Key { first: false },
                        _ => Lex::Value,
                    };
                }
                b'}' | b']' => self.close(b),
                _ => self.lex = Lex::Broken,
            },
            Lex::Str { key, esc } => {
                self.capture(b);
                self.string_byte(key, esc, b);
            }
            Lex::Number { float } => match b {
                b'0'..=b'9' | b'-' | b'+' => self.capture(b),
                b'.' | b'e' | b'E' => {
                    self.capture(b);
                    self.lex = Lex::Number { float: true };
                }
                _ => {
                    if !float && self.scalar_ctx == Ctx::Measure {
                        self.text.token_ids += 1;
                    }
                    self.end_value();
                    self.byte(b);
                }
            },
            Lex::Literal => {
                if b.is_ascii_lowercase() {
                    self.capture(b);
                } else {
                    self.end_value();
                    self.byte(b);
                }
            }
            Lex::Done => {
                if !ws {
                    self.lex = Lex::Broken;
                }
            }
            Lex::Broken => {}
        }
    }

    /// One byte inside a string (after its opening quote).
    fn string_byte(&mut self, key: bool, esc: Esc, b: u8) {
        let counts = !key && self.scalar_ctx == Ctx::Measure;
        let count_char = |this: &mut Self| {
            if counts {
                this.text.chars += 1;
            }
        };
        let next = match esc {
            Esc::None => match b {
                b'"' => {
                    if key {
                        self.lex = Lex::Colon;
                    } else {
                        self.end_value();
                    }
                    return;
                }
                b'\\' => Esc::Backslash,
                _ => {
                    if key {
                        self.key_byte(b);
                    } else if (b & 0xc0) != 0x80 {
                        count_char(self);
                    }
                    Esc::None
                }
            },
            Esc::Backslash => {
                // Escaped keys are never ones we look for.
                self.key_long |= key;
                if b == b'u' {
                    Esc::Hex { seen: 0, value: 0 }
                } else {
                    count_char(self);
                    Esc::None
                }
            }
            Esc::Hex { seen, value } => {
                let digit = (b as char).to_digit(16).unwrap_or(0) as u16;
                let value = (value << 4) | digit;
                if seen < 3 {
                    Esc::Hex { seen: seen + 1, value }
                } else {
                    // A high surrogate and its low half are one character, counted at the low.
                    if !(0xd800..=0xdbff).contains(&value) {
                        count_char(self);
                    }
                    Esc::None
                }
            }
        };
        self.lex = Lex::Str { key, esc: next };
    }

    fn key_byte(&mut self, b: u8) {
        if self.key_len < KEY_BYTES {
            self.key[self.key_len] = b;
            self.key_len += 1;
        } else {
            self.key_long = true;
        }
    }

    /// The answer's reported usage, if it had a readable one.
    pub fn usage(&self) -> Option<TokenUsage> {
        let raw = self.usage_done.as_deref().filter(|r| !r.is_empty())?;
        let probe = serde_json::from_slice::<Option<UsageProbe>>(raw).ok().flatten()?;
        if probe.is_empty() {
            return None;
        }
        let mut usage = TokenUsage::default();
        probe.merge_into(&mut usage);
        Some(usage)
    }

    /// The completion estimate for an answer without usage: its generated text by the `tokens`
    /// rule, or, when the body was not a whole JSON value, the characters relayed.
    pub fn completion_estimate(&self) -> u64 {
        match self.lex {
            Lex::Done if self.text == TextMeasure::default() => 0,
            Lex::Done => self.text.tokens(),
            _ if self.relayed_chars == 0 => 0,
            _ => self.relayed_chars.div_ceil(4),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::sse::usage::usage_of_body;
    use crate::tokens::Measured;

    /// The reference: the whole body parsed at once (what the relay did before it streamed).
    fn oracle(body: &[u8]) -> (Option<TokenUsage>, u64) {
        #[derive(serde::Deserialize)]
        struct Message {
            content: Option<Measured>,
        }
        #[derive(serde::Deserialize)]
        struct Choice {
            message: Option<Message>,
            text: Option<Measured>,
        }
        #[derive(serde::Deserialize)]
        struct Body {
            choices: Option<Vec<Choice>>,
            content: Option<Measured>,
            output: Option<Measured>,
        }
        let usage = usage_of_body(body);
        let Ok(parsed) = serde_json::from_slice::<Body>(body) else {
            return (usage, 0);
        };
        let mut total = TextMeasure::default();
        for choice in parsed.choices.unwrap_or_default() {
            if let Some(Measured(m)) = choice.message.and_then(|m| m.content) {
                total.add(m);
            }
            if let Some(Measured(m)) = choice.text {
                total.add(m);
            }
        }
        for Measured(m) in [parsed.content, parsed.output].into_iter().flatten() {
            total.add(m);
        }
        (usage, if total == TextMeasure::default() { 0 } else { total.tokens() })
    }

    fn meter(chunks: &[&[u8]]) -> (Option<TokenUsage>, u64) {
        let mut m = WholeBodyMeter::new();
        for c in chunks {
            m.feed(c);
        }
        (m.usage(), m.completion_estimate())
    }

    #[test]
    fn usage_is_read_wherever_it_sits_and_in_both_vocabularies() {
        let openai = br#"{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":10,
            "completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}"#;
        assert_eq!(meter(&[openai]).0, Some(TokenUsage { prompt: 10, completion: 3, cached: 4, ..Default::default() }));
        let first = br#"{"usage":{"input_tokens":7,"output_tokens":2,"cache_read_input_tokens":5},"content":[]}"#;
        assert_eq!(meter(&[first]).0, Some(TokenUsage { prompt: 12, completion: 2, cached: 5, ..Default::default() }));
        // A `usage` key deeper down, or inside a string, is not the answer's usage.
        let nested = br#"{"choices":[{"message":{"content":"\"usage\":{\"completion_tokens\":1}","usage":{"completion_tokens":1}}}]}"#;
        assert_eq!(meter(&[nested]).0, None);
        assert_eq!(meter(&[br#"{"usage":null}"#]).0, None);
    }

    #[test]
    fn an_answer_larger_than_any_buffer_is_still_billed_from_its_usage() {
        let text = "x".repeat(20 * 1024 * 1024);
        let body =
            json!({"choices":[{"message":{"content": text}}],"usage":{"prompt_tokens":5,"completion_tokens":4000000}});
        let bytes = serde_json::to_vec(&body).unwrap();
        let chunks: Vec<&[u8]> = bytes.chunks(16 * 1024).collect();
        assert_eq!(
            meter(&chunks).0,
            Some(TokenUsage { prompt: 5, completion: 4_000_000, cached: 0, ..Default::default() })
        );
        let without: Vec<u8> =
            serde_json::to_vec(&json!({"choices":[{"message":{"content": "y".repeat(8_000_000)}}]})).unwrap();
        assert_eq!(meter(&without.chunks(65536).collect::<Vec<_>>()).1, 2_000_000);
    }

    #[test]
    fn text_is_measured_like_the_tokens_rule() {
        let body = br#"{"choices":[{"message":{"role":"assistant","content":"caf\u00e9 \ud83d\ude00 \n ok"}},{"text":"abcd"}]}"#;
        assert_eq!(meter(&[body]), oracle(body));
        let anthropic =
            br#"{"content":[{"type":"text","text":"12345678"},{"type":"tool_use","input":{"text":"ignored"}}]}"#;
        assert_eq!(meter(&[anthropic]), (None, 2));
        let responses = br#"{"object":"response","output":[{"type":"reasoning","summary":[]},
            {"type":"message","id":"msg_1","content":[{"type":"output_text","text":"12345678","annotations":[]}]}]}"#;
        assert_eq!(meter(&[responses]), (None, 2));
        assert_eq!(meter(&[br#"{"choices":[]}"#]), (None, 0));
        assert_eq!(meter(&[br#"{"choices":[{"text":[1,2,3]}]}"#]), (None, 3));
    }

    #[test]
    fn a_body_that_is_not_json_is_billed_by_the_characters_relayed() {
        assert_eq!(meter(&[b"plain text answer!"]), (None, 5));
        assert_eq!(meter(&[br#"{"choices":[{"message":{"content":"abc"#]).1, 10);
        assert_eq!(meter(&[b"{\"a\":1} trailing"]).1, 4);
        assert_eq!(meter(&[]), (None, 0));
    }

    fn leaf() -> impl Strategy<Value = Value> {
        prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i32>().prop_map(|n| json!(n)),
            (-1e6f64..1e6).prop_map(|f| json!(f)),
            "[a-z\\\\\"\u{e9}\u{1f600} \n]{0,12}".prop_map(Value::String),
        ]
    }

    fn value() -> impl Strategy<Value = Value> {
        leaf().prop_recursive(4, 48, 6, |inner| {
            let keys = prop_oneof![
                Just("content".to_string()),
                Just("text".to_string()),
                Just("message".to_string()),
                Just("usage".to_string()),
                "[a-z]{1,20}",
            ];
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(keys, inner, 0..5).prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn answer() -> impl Strategy<Value = Vec<u8>> {
        let usage = prop_oneof![
            Just(Value::Null),
            (0u64..1_000_000, 0u64..1_000_000).prop_map(|(p, c)| json!({"prompt_tokens": p, "completion_tokens": c})),
            (0u64..1000, 0u64..1000).prop_map(|(i, o)| json!({"input_tokens": i, "output_tokens": o})),
        ];
        (prop::collection::vec(value(), 0..4), value(), usage, any::<bool>()).prop_map(
            |(choices, content, usage, first)| {
                let choices: Vec<Value> =
                    choices.into_iter().map(|c| json!({"index": 0, "message": {"content": c}, "text": c})).collect();
                let body = if first {
                    json!({"usage": usage, "choices": choices, "content": content})
                } else {
                    json!({"choices": choices, "content": content, "usage": usage})
                };
                serde_json::to_vec(&body).unwrap_or_default()
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases(256)))]

        /// The run ends at the first quote or backslash, wherever it falls in or past a word.
        #[test]
        fn a_string_run_ends_at_the_first_quote_or_backslash(
            bytes in prop::collection::vec(prop::sample::select(vec![b'a', b'"', b'\\', 0x80, 0xdc, 0xa2, 0x5d, 0x00]), 0..48)
        ) {
            let naive = bytes.iter().position(|b| *b == b'"' || *b == b'\\').unwrap_or(bytes.len());
            prop_assert_eq!(string_run_len(&bytes), naive);
        }

        /// Characters are the bytes that do not continue a UTF-8 sequence, past 255 of them too.
        #[test]
        fn scalar_values_count_what_is_not_a_continuation_byte(text in ".{0,600}") {
            prop_assert_eq!(scalar_values(text.as_bytes()), text.chars().count() as u64);
        }

        /// Any split of the same bytes gives what parsing the whole body gives.
        #[test]
        fn any_split_meters_like_the_whole_body(body in answer(), cuts in prop::collection::vec(0usize..4096, 0..8)) {
            let mut points: Vec<usize> = cuts.into_iter().map(|c| c % (body.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for p in points {
                chunks.push(&body[at..p]);
                at = p;
            }
            chunks.push(&body[at..]);
            prop_assert_eq!(meter(&chunks), oracle(&body));
        }

        /// Arbitrary bytes never panic and bill at most the characters relayed.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
            let (_, estimate) = meter(&[&bytes]);
            prop_assert!(estimate <= bytes.len() as u64);
        }
    }
}
