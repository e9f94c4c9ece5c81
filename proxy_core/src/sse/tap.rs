//! The tap: reads a relayed event stream as it passes, to find the first content token, count
//! tokens, pick up `usage`, see whether the stream ended properly, and drop the usage chunk the
//! gateway asked for on behalf of a client that did not.
//!
//! Output is cut at event boundaries: a chunk yields the complete events it finishes (at most one
//! frame out per frame in, never coalesced); a partial event waits for the rest of its bytes.

use bytes::{Bytes, BytesMut};
use serde::de::IgnoredAny;
use serde::Deserialize;

use super::frame::{event_end, parse_event};
use super::usage::{TokenUsage, UsageProbe};
use crate::endpoint::Flavor;
use crate::translate::StreamTranslator;

#[derive(Debug, Default, Clone, Copy)]
pub struct TapStats {
    pub events_in: u64,
    pub events_out: u64,
    /// Events that carried generated content (one per token for the servers we know).
    pub content_events: u64,
    pub usage: Option<TokenUsage>,
    /// `[DONE]` (OpenAI) or `message_stop` (Anthropic) went through.
    pub terminated: bool,
    /// The upstream sent an error event.
    pub upstream_error: bool,
}

pub struct SseTap {
    flavor: Flavor,
    hide_usage: bool,
    pending: BytesMut,
    /// Set when the client speaks another API than the upstream: each event goes out translated
    /// (after its usage was read here, in the upstream's own vocabulary).
    translator: Option<Box<StreamTranslator>>,
    pub stats: TapStats,
}

/// What one fed chunk produced.
#[derive(Debug, Default)]
pub struct Fed {
    pub out: Option<Bytes>,
    pub content: bool,
}

#[derive(Deserialize)]
struct OpenAiChunk {
    #[serde(default)]
    choices: ChoicesSeen,
    #[serde(default)]
    usage: Option<UsageProbe>,
    #[serde(default)]
    error: Option<IgnoredAny>,
}

/// What the tap needs of a chunk's `choices`, folded as they are read (no list is kept: one
/// allocation less for each of a stream's chunks): whether there were any, and whether one
/// carried generated content.
#[derive(Default)]
struct ChoicesSeen {
    any: bool,
    content: bool,
}

impl<'de> Deserialize<'de> for ChoicesSeen {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fold;
        impl<'de> serde::de::Visitor<'de> for Fold {
            type Value = ChoicesSeen;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of choices")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<ChoicesSeen, A::Error> {
                let mut seen = ChoicesSeen::default();
                while let Some(choice) = seq.next_element::<OpenAiChoice<'de>>()? {
                    seen.any = true;
                    seen.content |= choice.has_content();
                }
                Ok(seen)
            }
        }
        deserializer.deserialize_seq(Fold)
    }
}

#[derive(Deserialize)]
struct OpenAiChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<OpenAiDelta<'a>>,
    #[serde(default, borrow)]
    text: Option<std::borrow::Cow<'a, str>>,
}

impl OpenAiChoice<'_> {
    fn has_content(&self) -> bool {
        self.text.as_deref().is_some_and(|t| !t.is_empty())
            || self.delta.as_ref().is_some_and(|d| {
                d.content.as_deref().is_some_and(|t| !t.is_empty())
                    || d.reasoning_content.as_deref().is_some_and(|t| !t.is_empty())
                    || d.tool_calls.is_some()
            })
    }
}

#[derive(Deserialize)]
struct OpenAiDelta<'a> {
    #[serde(default, borrow)]
    content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct AnthropicEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    message: Option<WithUsage>,
    #[serde(default)]
    usage: Option<UsageProbe>,
    #[serde(default)]
    delta: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct WithUsage {
    #[serde(default)]
    usage: Option<UsageProbe>,
}

/// A Responses API event: `response.*.delta` events carry generated text (or tool-call
/// arguments, a refusal, a reasoning summary); the final `response.*` events carry the whole
/// response with its usage.
#[derive(Deserialize)]
struct ResponsesEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    response: Option<WithUsage>,
}

/// The ranges of a fed chunk that go out. One range (every event forwarded, or only the ends
/// hidden) is the chunk's own bytes; only an event hidden between two forwarded ones makes more,
/// and only then a list and a copy.
#[derive(Default)]
struct Kept {
    first: Option<(usize, usize)>,
    more: Vec<(usize, usize)>,
}

impl Kept {
    fn add(&mut self, start: usize, end: usize) {
        let last = self.more.last_mut().or(self.first.as_mut());
        match last {
            Some((_, last_end)) if *last_end == start => *last_end = end,
            Some(_) => self.more.push((start, end)),
            None => self.first = Some((start, end)),
        }
    }

    fn out(self, data: &Bytes) -> Option<Bytes> {
        let (start, end) = self.first?;
        if self.more.is_empty() {
            return Some(data.slice(start..end));
        }
        let ranges = std::iter::once((start, end)).chain(self.more);
        let mut out = BytesMut::new();
        for (start, end) in ranges {
            out.extend_from_slice(&data[start..end]);
        }
        Some(out.freeze())
    }
}

/// What the tap decided about one event.
enum Verdict {
    Forward { content: bool },
    Hide,
}

impl SseTap {
    pub fn new(flavor: Flavor, hide_usage: bool) -> Self {
        Self { flavor, hide_usage, pending: BytesMut::new(), translator: None, stats: TapStats::default() }
    }

    /// A tap on an upstream stream of `flavor` whose events reach the client through `translator`.
    pub fn translating(flavor: Flavor, translator: StreamTranslator) -> Self {
        Self { translator: Some(Box::new(translator)), ..Self::new(flavor, false) }
    }

    pub fn feed(&mut self, chunk: Bytes) -> Fed {
        let data = if self.pending.is_empty() {
            chunk
        } else {
            self.pending.extend_from_slice(&chunk);
            self.pending.split().freeze()
        };
        let mut fed = Fed::default();
        let mut pos = 0;
        // Ranges of `data` to forward; contiguous unless an event is hidden.
        let mut keep = Kept::default();
        let mut translated = BytesMut::new();
        while let Some(len) = event_end(&data[pos..]) {
            let end = pos + len;
            self.stats.events_in += 1;
            match self.observe(&data[pos..end]) {
                Verdict::Forward { content } => {
                    fed.content |= content;
                    self.stats.events_out += 1;
                    if let Some(translator) = self.translator.as_mut() {
                        translator.event(&data[pos..end], &mut translated);
                        pos = end;
                        continue;
                    }
                    keep.add(pos, end);
                }
                Verdict::Hide => {}
            }
            pos = end;
        }
        if pos < data.len() {
            self.pending.extend_from_slice(&data[pos..]);
        }
        if self.translator.is_some() {
            fed.out = (!translated.is_empty()).then(|| translated.freeze());
            return fed;
        }
        fed.out = keep.out(&data);
        fed
    }

    /// Bytes of an unfinished event left when the upstream ended; passed through as they are
    /// (or let go when translating: half an event has no translation).
    pub fn take_partial(&mut self) -> Option<Bytes> {
        let partial = (!self.pending.is_empty()).then(|| self.pending.split().freeze());
        partial.filter(|_| self.translator.is_none())
    }

    fn observe(&mut self, raw: &[u8]) -> Verdict {
        let event = parse_event(raw);
        let Some(data) = event.data else {
            return Verdict::Forward { content: false };
        };
        match self.flavor {
            Flavor::OpenAi => self.observe_openai(&data),
            Flavor::Anthropic => self.observe_anthropic(&data),
            Flavor::Responses => self.observe_responses(&data),
        }
    }

    fn observe_responses(&mut self, data: &[u8]) -> Verdict {
        let Ok(event) = serde_json::from_slice::<ResponsesEvent<'_>>(data) else {
            return Verdict::Forward { content: false };
        };
        let kind = event.kind.as_ref();
        let content = kind.ends_with(".delta") && event.delta.is_some_and(|d| d.get() != "\"\"");
        match kind {
            // The response ended as it should: whole, or cut at its output cap.
            "response.completed" | "response.incomplete" => self.stats.terminated = true,
            "response.failed" | "error" => self.stats.upstream_error = true,
            _ => {}
        }
        // The final events carry the response's whole usage; earlier ones carry `null`.
        if let Some(probe) = event.response.and_then(|r| r.usage).filter(|u| !u.is_empty()) {
            let mut usage = TokenUsage::default();
            probe.merge_into(&mut usage);
            self.stats.usage = Some(usage);
        }
        if content {
            self.stats.content_events += 1;
        }
        Verdict::Forward { content }
    }

    fn observe_openai(&mut self, data: &[u8]) -> Verdict {
        if data == b"[DONE]" {
            self.stats.terminated = true;
            return Verdict::Forward { content: false };
        }
        let Ok(chunk) = serde_json::from_slice::<OpenAiChunk>(data) else {
            // Not ours to judge: pass it on unchanged.
            return Verdict::Forward { content: false };
        };
        if chunk.error.is_some() {
            self.stats.upstream_error = true;
            return Verdict::Forward { content: false };
        }
        let content = chunk.choices.content;
        if content {
            self.stats.content_events += 1;
        }
        if let Some(probe) = chunk.usage.filter(|u| !u.is_empty()) {
            probe.merge_into(self.stats.usage.get_or_insert_with(TokenUsage::default));
            if self.hide_usage && !chunk.choices.any {
                return Verdict::Hide;
            }
        }
        Verdict::Forward { content }
    }

    fn observe_anthropic(&mut self, data: &[u8]) -> Verdict {
        let Ok(event) = serde_json::from_slice::<AnthropicEvent<'_>>(data) else {
            return Verdict::Forward { content: false };
        };
        let mut content = false;
        match event.kind.as_ref() {
            "message_start" => {
                if let Some(probe) = event.message.and_then(|m| m.usage) {
                    probe.merge_into(self.stats.usage.get_or_insert_with(TokenUsage::default));
                }
            }
            "content_block_delta" => {
                content = event.delta.is_some();
            }
            "message_delta" => {
                if let Some(probe) = event.usage {
                    // Cumulative: the last one wins.
                    probe.merge_into(self.stats.usage.get_or_insert_with(TokenUsage::default));
                }
            }
            "message_stop" => self.stats.terminated = true,
            "error" => self.stats.upstream_error = true,
            _ => {}
        }
        if content {
            self.stats.content_events += 1;
        }
        Verdict::Forward { content }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(content: &str) -> String {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}}}}],\"usage\":null}}\n\n")
    }

    const USAGE: &str = "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":2}}\n\n";

    #[test]
    fn openai_stream_counts_and_hides_the_usage_chunk() {
        let mut tap = SseTap::new(Flavor::OpenAi, true);
        let first = tap.feed(Bytes::from(chunk("a")));
        assert!(first.content);
        assert_eq!(first.out.unwrap(), chunk("a"));
        let rest = format!("{}{USAGE}data: [DONE]\n\n", chunk("b"));
        let fed = tap.feed(Bytes::from(rest));
        assert_eq!(String::from_utf8(fed.out.unwrap().to_vec()).unwrap(), format!("{}data: [DONE]\n\n", chunk("b")));
        assert_eq!(tap.stats.content_events, 2);
        assert_eq!(tap.stats.usage, Some(TokenUsage { prompt: 5, completion: 2, cached: 0, ..Default::default() }));
        assert!(tap.stats.terminated);
        assert_eq!((tap.stats.events_in, tap.stats.events_out), (4, 3));
    }

    #[test]
    fn usage_chunk_passes_when_the_client_asked() {
        let mut tap = SseTap::new(Flavor::OpenAi, false);
        assert_eq!(tap.feed(Bytes::from(USAGE)).out.unwrap(), USAGE);
    }

    #[test]
    fn split_events_wait_for_their_end_and_are_not_coalesced() {
        let mut tap = SseTap::new(Flavor::OpenAi, false);
        let whole = chunk("xyz");
        let (a, b) = whole.split_at(10);
        let fed = tap.feed(Bytes::from(a.to_string()));
        assert!(fed.out.is_none());
        let fed = tap.feed(Bytes::from(b.to_string()));
        assert_eq!(fed.out.unwrap(), whole);
        tap.feed(Bytes::from("data: partial"));
        assert_eq!(tap.take_partial().unwrap(), "data: partial");
        assert!(!tap.stats.terminated);
    }

    #[test]
    fn anthropic_usage_is_cumulative_and_stop_terminates() {
        let mut tap = SseTap::new(Flavor::Anthropic, false);
        let stream = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: ping\ndata: {\"type\":\"ping\"}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":4}}\n\n",
            "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        );
        let fed = tap.feed(Bytes::from(stream));
        assert_eq!(fed.out.unwrap(), stream);
        assert_eq!(tap.stats.usage, Some(TokenUsage { prompt: 9, completion: 4, cached: 0, ..Default::default() }));
        assert_eq!(tap.stats.content_events, 1);
        assert!(tap.stats.terminated);
    }

    #[test]
    fn error_events_are_noticed() {
        let mut tap = SseTap::new(Flavor::OpenAi, false);
        tap.feed(Bytes::from("data: {\"error\":{\"message\":\"boom\"}}\n\n"));
        assert!(tap.stats.upstream_error);
    }

    #[test]
    fn responses_deltas_count_and_the_completed_event_carries_usage_and_ends_the_stream() {
        let mut tap = SseTap::new(Flavor::Responses, false);
        let stream = concat!(
            "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_1\",\"usage\":null}}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"hi\"}\n\n",
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"delta\":\"\"}\n\n",
            "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"a\"}\n\n",
            "event: response.output_text.done\ndata: {\"type\":\"response.output_text.done\",\"text\":\"hi\"}\n\n",
        );
        let fed = tap.feed(Bytes::from(stream));
        assert_eq!(fed.out.unwrap(), stream);
        assert!(fed.content);
        assert_eq!(tap.stats.content_events, 2, "empty deltas carry nothing");
        assert!(!tap.stats.terminated && tap.stats.usage.is_none());
        let completed = concat!(
            "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",",
            "\"usage\":{\"input_tokens\":20,\"input_tokens_details\":{\"cached_tokens\":8},\"output_tokens\":9,",
            "\"output_tokens_details\":{\"reasoning_tokens\":6},\"total_tokens\":29}}}\n\n"
        );
        assert_eq!(tap.feed(Bytes::from(completed)).out.unwrap(), completed);
        assert!(tap.stats.terminated && !tap.stats.upstream_error);
        let counted = TokenUsage { prompt: 20, completion: 9, cached: 8, cache_write: 0, reasoning: 6 };
        assert_eq!(tap.stats.usage, Some(counted));

        let mut failed = SseTap::new(Flavor::Responses, false);
        failed.feed(Bytes::from("event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{}}\n\n"));
        assert!(failed.stats.upstream_error && !failed.stats.terminated);
        let mut cut = SseTap::new(Flavor::Responses, false);
        cut.feed(Bytes::from("event: response.incomplete\ndata: {\"type\":\"response.incomplete\"}\n\n"));
        assert!(cut.stats.terminated, "an answer cut at its output cap ended as it should");
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;
        use crate::sse::frame::event_end;

        #[derive(Debug, Clone)]
        enum Ev {
            Token(String),
            Empty,
            Comment,
            Usage(u64, u64),
            Junk,
            Done,
        }

        fn event(ev: &Ev, crlf: bool) -> String {
            let body = match ev {
                Ev::Token(t) => format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{t:?}}}}}]}}"),
                Ev::Empty => "data: {\"choices\":[{\"index\":0,\"delta\":{}}]}".to_string(),
                Ev::Comment => ": keep-alive".to_string(),
                Ev::Usage(p, c) => {
                    format!("data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":{p},\"completion_tokens\":{c}}}}}")
                }
                Ev::Junk => "data: {not json".to_string(),
                Ev::Done => "data: [DONE]".to_string(),
            };
            if crlf {
                format!("{body}\r\n\r\n")
            } else {
                format!("{body}\n\n")
            }
        }

        fn stream() -> impl Strategy<Value = (Vec<u8>, bool)> {
            let ev = prop_oneof![
                4 => "[a-z \u{e9}]{1,6}".prop_map(Ev::Token),
                1 => Just(Ev::Empty),
                1 => Just(Ev::Comment),
                1 => (0u64..1000, 0u64..1000).prop_map(|(p, c)| Ev::Usage(p, c)),
                1 => Just(Ev::Junk),
            ];
            (prop::collection::vec(ev, 0..20), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
                |(events, done, crlf, hide)| {
                    let mut text: String = events.iter().map(|e| event(e, crlf)).collect();
                    if done {
                        text.push_str(&event(&Ev::Done, crlf));
                    }
                    (text.into_bytes(), hide)
                },
            )
        }

        fn run(bytes: &[u8], cuts: &[usize], hide: bool) -> (Vec<u8>, Vec<Bytes>, TapStats) {
            let mut tap = SseTap::new(Flavor::OpenAi, hide);
            let mut outs = Vec::new();
            let mut at = 0;
            for &cut in cuts.iter().chain(std::iter::once(&bytes.len())) {
                if let Some(out) = tap.feed(Bytes::copy_from_slice(&bytes[at..cut])).out {
                    outs.push(out);
                }
                at = cut;
            }
            let mut all: Vec<u8> = outs.iter().flat_map(|b| b.to_vec()).collect();
            if let Some(rest) = tap.take_partial() {
                all.extend_from_slice(&rest);
            }
            (all, outs, tap.stats)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(crate::test_cases(512)))]

            /// Any split of the same bytes gives the same frames out, tokens and usage, and every
            /// frame out is made of whole events.
            #[test]
            fn any_split_gives_the_same_frames_tokens_and_usage(
                (bytes, hide) in stream(),
                cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..10),
            ) {
                let mut points: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
                points.sort_unstable();
                let (whole_out, _, whole_stats) = run(&bytes, &[], hide);
                let (split_out, frames, split_stats) = run(&bytes, &points, hide);
                prop_assert_eq!(&whole_out, &split_out);
                prop_assert_eq!(whole_stats.content_events, split_stats.content_events);
                prop_assert_eq!(whole_stats.usage, split_stats.usage);
                prop_assert_eq!(whole_stats.terminated, split_stats.terminated);
                prop_assert_eq!((whole_stats.events_in, whole_stats.events_out), (split_stats.events_in, split_stats.events_out));
                for frame in frames {
                    let mut rest: &[u8] = &frame;
                    while !rest.is_empty() {
                        let len = event_end(rest);
                        prop_assert!(len.is_some(), "a frame out ends inside an event");
                        rest = &rest[len.unwrap_or(rest.len())..];
                    }
                }
            }
        }
    }
}
