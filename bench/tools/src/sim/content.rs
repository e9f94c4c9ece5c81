//! An answer's content cut into the pieces the simulator sends one per token: its vocabulary
//! cycled, a fixed text word by word, or a tool call's arguments a few bytes at a time. One piece
//! is one frame on the wire and one completion token in the usage and the record, so the counts
//! the simulator reports are the content events a client (or the gateway) sees.

use super::tools::{Reply, ToolCall};
use super::wire::token_text;
use crate::endpoint::Endpoint;

/// The most bytes of a tool call's arguments sent in one piece (fewer to end on a character).
const ARGUMENT_PIECE_BYTES: usize = 8;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Content {
    /// The vocabulary cycled, as many tokens as the timing model says.
    Vocab,
    /// This text, one piece per word (with the whitespace before it).
    Text(Vec<String>),
    /// One tool call. OpenAI's stream opens it with a chunk of its own (id and name, no
    /// arguments), which counts as a token like any other content chunk: `opening` is 1 there;
    /// Anthropic names the call in `content_block_start`, before the first token, as it opens a
    /// text block.
    Call { id: String, name: String, arguments: Vec<String>, opening: u32 },
}

impl Content {
    /// The content of `reply` on `endpoint`; `serial` makes the call's id unique per response.
    pub fn new(reply: &Reply, endpoint: Endpoint, serial: u64) -> Self {
        match reply {
            Reply::Vocab => Content::Vocab,
            Reply::Text(text) => Content::Text(words(text)),
            Reply::Call(ToolCall { name, arguments }) => {
                let (id, opening) = match endpoint {
                    Endpoint::Messages => (format!("toolu_{serial:x}"), 0),
                    _ => (format!("call_{serial:x}"), 1),
                };
                Content::Call { id, name: name.clone(), arguments: pieces(arguments, ARGUMENT_PIECE_BYTES), opening }
            }
        }
    }

    /// Tokens in the whole answer; `None` when the timing model decides (vocabulary text).
    pub fn fixed_tokens(&self) -> Option<u32> {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        match self {
            Content::Vocab => None,
            Content::Text(words) => Some(count(words.len())),
            Content::Call { arguments, opening, .. } => Some(count(arguments.len()).saturating_add(*opening)),
        }
    }

    /// The finish reason of an answer sent whole (OpenAI's words; `anthropic_stop` maps them).
    pub fn finish(&self) -> &'static str {
        match self {
            Content::Call { .. } => "tool_calls",
            _ => "stop",
        }
    }

    /// The text token `i` carries (a call's: its piece of the arguments; empty for the opening).
    pub fn piece(&self, i: u32) -> &str {
        fn at(list: &[String], i: u32) -> &str {
            list.get(i as usize).map_or("", String::as_str)
        }
        match self {
            Content::Vocab => token_text(i),
            Content::Text(words) => at(words, i),
            Content::Call { arguments, opening, .. } => i.checked_sub(*opening).map_or("", |i| at(arguments, i)),
        }
    }

    /// Everything the first `tokens` tokens carry: the text, or a call's arguments so far.
    pub fn sent(&self, tokens: u32) -> String {
        (0..tokens).map(|i| self.piece(i)).collect()
    }
}

/// Anthropic's `stop_reason` for a finish reason.
pub fn anthropic_stop(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        _ => "end_turn",
    }
}

/// Words with the whitespace before each, as a tokenizer's pieces carry it (" the", " gate");
/// whitespace at the end is a piece of its own. Never empty: empty text is one empty piece.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() && in_word {
            words.push(std::mem::take(&mut current));
            in_word = false;
        }
        in_word |= !c.is_whitespace();
        current.push(c);
    }
    if !current.is_empty() || words.is_empty() {
        words.push(current);
    }
    words
}

/// `text` in pieces of at most `max` bytes, each ending on a character boundary (a character
/// longer than `max` is a piece alone).
fn pieces(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if !current.is_empty() && current.len() + c.len_utf8() > max {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_into_words_with_their_leading_space() {
        assert_eq!(words("tool result: 22C,  sunny"), ["tool", " result:", " 22C,", "  sunny"]);
        assert_eq!(words("tool result: "), ["tool", " result:", " "]);
        assert_eq!(words(" lead\nline"), [" lead", "\nline"]);
        assert_eq!(words(""), [""]);
        let text = "tool result: a \"quoted\"\tthing ";
        assert_eq!(words(text).concat(), text);
    }

    #[test]
    fn arguments_are_cut_on_character_boundaries() {
        let args = r#"{"city":"Zürich","n":1}"#;
        let cut = pieces(args, 8);
        assert_eq!(cut.concat(), args);
        assert!(cut.iter().all(|p| !p.is_empty() && p.len() <= 8), "{cut:?}");
        assert!(cut.len() >= 3);
        assert_eq!(pieces("€€€", 2), ["€", "€", "€"], "a character wider than a piece goes alone");
        assert!(pieces("", 8).is_empty());
    }

    #[test]
    fn a_call_counts_its_frames() {
        let call = Reply::Call(ToolCall { name: "f".into(), arguments: r#"{"city":"sim","days":1}"#.into() });
        let openai = Content::new(&call, Endpoint::ChatCompletions, 0x1f);
        let anthropic = Content::new(&call, Endpoint::Messages, 0x1f);
        let Content::Call { id, arguments, .. } = &openai else { panic!("{openai:?}") };
        assert_eq!(id, "call_1f");
        assert!(matches!(&anthropic, Content::Call { id, .. } if id == "toolu_1f"));
        // 23 bytes of arguments: three pieces, and OpenAI's opening chunk.
        assert_eq!(arguments.len(), 3);
        assert_eq!((openai.fixed_tokens(), anthropic.fixed_tokens()), (Some(4), Some(3)));
        assert_eq!(openai.piece(0), "");
        assert_eq!(openai.sent(4), anthropic.sent(3));
        assert_eq!(openai.sent(2), r#"{"city":"#);
        assert_eq!(openai.piece(9), "", "past the end: nothing");
        assert_eq!(openai.finish(), "tool_calls");
        assert_eq!(anthropic_stop(openai.finish()), "tool_use");
    }

    #[test]
    fn text_and_vocabulary() {
        let text = Content::new(&Reply::Text("tool result: ok".into()), Endpoint::Messages, 0);
        assert_eq!((text.fixed_tokens(), text.finish()), (Some(3), "stop"));
        assert_eq!(text.sent(3), "tool result: ok");
        assert_eq!(text.sent(2), "tool result:");
        let vocab = Content::new(&Reply::Vocab, Endpoint::ChatCompletions, 0);
        assert_eq!(vocab.fixed_tokens(), None);
        assert_eq!(vocab.sent(2), " the gate");
        assert_eq!((anthropic_stop("length"), anthropic_stop("stop")), ("max_tokens", "end_turn"));
    }
}
