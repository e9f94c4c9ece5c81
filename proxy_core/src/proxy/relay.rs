//! The response body relayed to the client: upstream frames go out as they arrive, through the
//! SSE tap for streams, with the idle and first-token/total deadlines enforced in place. The body
//! owns the usage guard, so the request's single usage event is emitted when the body ends or is
//! dropped (client disconnect), and dropping it also drops the upstream body, which cancels the
//! upstream request.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

use super::trace::UsageGuard;
use crate::admission::Permit;
use crate::endpoint::Flavor;
use crate::error::{ErrorKind, GatewayError, Origin};
use crate::routing::{MemberLease, Verdict};
use crate::sse::{error_event, SseTap, WholeBodyMeter};
use crate::translate::{translate_error, translate_whole, Translation, MAX_TRANSLATED_BODY};
use crate::upstream::UpstreamIncoming;
use crate::usage::Outcome;

/// Largest upstream error body relayed; it is held whole to scrub the member's credential.
pub const MAX_ERROR_BODY: usize = 64 * 1024;

pub enum RelayMode {
    /// A 2xx event stream: tapped event by event.
    Stream { tap: SseTap, flavor: Flavor },
    /// A whole body relayed as it arrives; a 2xx answer is metered for billing on the way.
    Whole { meter: Option<Box<WholeBodyMeter>> },
    /// An upstream error body: held (up to `MAX_ERROR_BODY`) and sent at its end with the
    /// member's credential scrubbed out, since some upstreams quote what they were sent.
    Scrubbed { kept: Vec<u8>, secret: std::sync::Arc<str> },
    /// A whole answer from an upstream of another API: held (up to `MAX_TRANSLATED_BODY`, or
    /// `MAX_ERROR_BODY` for an error) and sent translated at its end. A 2xx answer is metered in
    /// the upstream's vocabulary; an error is scrubbed of the member's credential first.
    Translated(Box<Translating>),
}

pub struct Translating {
    pub translation: Translation,
    pub kept: Vec<u8>,
    /// The status the upstream answered with, when it is an error.
    pub error_status: Option<u16>,
    pub meter: WholeBodyMeter,
    pub secret: Option<std::sync::Arc<str>>,
}

impl Translating {
    fn limit(&self) -> usize {
        if self.error_status.is_some() {
            MAX_ERROR_BODY
        } else {
            MAX_TRANSLATED_BODY
        }
    }
}

/// What `poll_frame` answers.
type FramePoll = Poll<Option<Result<Frame<Bytes>, GatewayError>>>;

enum State {
    Relaying,
    /// One last frame to send, then the end.
    Closing(Option<Bytes>),
    Done,
}

/// The clocks a relayed body runs against.
pub struct Timers {
    /// Longest silence between two chunks.
    pub idle: Duration,
    /// A stream's first content token must arrive before this.
    pub first_token: Option<std::time::Instant>,
    /// A whole answer must have arrived completely before this.
    pub total: Option<std::time::Instant>,
    /// The client's own deadline (`x-sluicegate-timeout-ms`), for the whole response.
    pub client_deadline: Option<std::time::Instant>,
}

/// What stands in for "never" (as tokio's own sleep does for a duration past what `Instant`
/// holds): about 30 years.
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

fn after(at: Instant, wait: Duration) -> Instant {
    at.checked_add(wait).unwrap_or_else(|| at + FAR_FUTURE)
}

pub struct RelayBody {
    upstream: UpstreamIncoming,
    mode: RelayMode,
    idle_timeout: Duration,
    /// When the upstream last sent a frame (or the body began): the idle clock runs from it.
    last_frame: Instant,
    /// First content token (streams) or whole response (others) must arrive before this.
    deadline: Option<Instant>,
    client_deadline: Option<Instant>,
    /// One timer for the three clocks, set to the earliest of them. A frame only moves
    /// `last_frame`; the timer is set again when it rings before anything ran out. (A timer
    /// moved at every frame took the timer wheel's lock twice a frame; an answer that arrives
    /// whole with its head never registers this one at all.)
    alarm: Pin<Box<Sleep>>,
    state: State,
    guard: UsageGuard,
    /// The member lease that passes the attempt's verdict to its health, and the pool slot.
    /// Fields drop in order: the member's count falls before the slot goes to the next waiter,
    /// so that waiter finds the member free instead of skipping to a fallback pool.
    held: (MemberLease, Permit),
}

fn earliest(idle_ends: Instant, deadline: Option<Instant>, client_deadline: Option<Instant>) -> Instant {
    [deadline, client_deadline].into_iter().flatten().fold(idle_ends, Instant::min)
}

impl RelayBody {
    pub fn new(
        upstream: UpstreamIncoming,
        mode: RelayMode,
        timers: Timers,
        guard: UsageGuard,
        held: (MemberLease, Permit),
    ) -> Self {
        let last_frame = Instant::now();
        let deadline = timers.first_token.or(timers.total).map(Instant::from_std);
        let client_deadline = timers.client_deadline.map(Instant::from_std);
        let first = earliest(after(last_frame, timers.idle), deadline, client_deadline);
        Self {
            upstream,
            mode,
            idle_timeout: timers.idle,
            last_frame,
            deadline,
            client_deadline,
            alarm: Box::pin(tokio::time::sleep_until(first)),
            state: State::Relaying,
            guard,
            held,
        }
    }

    /// The alarm rang: the clock that ran out, if one did, as the body's end; otherwise the
    /// alarm is set to the earliest clock again.
    fn ring(&mut self) -> Option<FramePoll> {
        let now = Instant::now();
        if self.deadline.is_some_and(|d| now >= d) {
            let what = match self.mode {
                RelayMode::Stream { .. } => "the first token",
                RelayMode::Whole { .. } | RelayMode::Scrubbed { .. } | RelayMode::Translated(_) => "the whole response",
            };
            let message = format!("the upstream did not send {what} in time");
            return Some(self.fail(ErrorKind::UpstreamTimeout, Outcome::Timeout, &message));
        }
        if self.client_deadline.is_some_and(|d| now >= d) {
            let message = "the request's deadline passed before the response ended";
            return Some(self.fail(ErrorKind::DeadlineExceeded, Outcome::Timeout, message));
        }
        let idle_ends = after(self.last_frame, self.idle_timeout);
        if now >= idle_ends {
            let message = format!("the upstream sent nothing for {} ms", self.idle_timeout.as_millis());
            return Some(self.fail(ErrorKind::UpstreamTimeout, Outcome::Timeout, &message));
        }
        self.alarm.as_mut().reset(earliest(idle_ends, self.deadline, self.client_deadline));
        None
    }

    /// The upstream failed mid-body. Streams end with an SSE error event (the status line is
    /// long gone); other bodies are aborted so the client sees a truncated response, not a
    /// complete-looking one.
    fn fail(&mut self, kind: ErrorKind, outcome: Outcome, message: &str) -> FramePoll {
        if let Some(trace) = self.guard.trace() {
            trace.error = Some(kind);
        }
        let verdict = if kind.origin() == Origin::Upstream { Verdict::Failure } else { Verdict::Neutral };
        self.held.0.set_verdict(verdict);
        match &mut self.mode {
            RelayMode::Stream { tap, flavor } => {
                let mut tail = tap.take_partial().map(|b| b.to_vec()).unwrap_or_default();
                if !tail.is_empty() && !tail.ends_with(b"\n\n") {
                    tail.extend_from_slice(b"\n\n");
                }
                tail.extend_from_slice(&error_event(*flavor, kind, message));
                self.guard.finish(outcome);
                self.state = State::Done;
                Poll::Ready(Some(Ok(Frame::data(Bytes::from(tail)))))
            }
            RelayMode::Whole { meter } => {
                // What was relayed of a 2xx answer is billed (the upstream accepted it).
                if let (Some(meter), Some(trace)) = (meter.as_ref(), self.guard.trace()) {
                    trace.relayed_tokens = meter.completion_estimate();
                }
                self.guard.finish(outcome);
                self.state = State::Done;
                Poll::Ready(Some(Err(GatewayError::new(kind, message.to_string()))))
            }
            RelayMode::Scrubbed { .. } | RelayMode::Translated(_) => {
                self.guard.finish(outcome);
                self.state = State::Done;
                Poll::Ready(Some(Err(GatewayError::new(kind, message.to_string()))))
            }
        }
    }

    /// The upstream body ended.
    fn end(&mut self) -> FramePoll {
        match &mut self.mode {
            RelayMode::Stream { tap, .. } => {
                let stats = tap.stats;
                if !stats.terminated && !stats.upstream_error {
                    return self.fail(
                        ErrorKind::UpstreamProtocol,
                        Outcome::UpstreamError,
                        "the upstream closed the stream before it finished",
                    );
                }
                let partial = tap.take_partial();
                if let Some(trace) = self.guard.trace() {
                    trace.usage = stats.usage;
                    trace.relayed_tokens = stats.content_events;
                }
                let outcome = if stats.upstream_error {
                    self.held.0.set_verdict(Verdict::Failure);
                    Outcome::UpstreamError
                } else {
                    Outcome::Complete
                };
                self.guard.finish(outcome);
                self.state = State::Closing(partial);
            }
            RelayMode::Whole { .. } => {
                self.complete_whole();
                self.state = State::Closing(None);
            }
            RelayMode::Scrubbed { kept, secret } => {
                let body = scrub(std::mem::take(kept), secret);
                self.guard.finish(Outcome::Complete);
                self.state = State::Closing(Some(Bytes::from(body)));
            }
            RelayMode::Translated(_) => return self.end_translated(),
        }
        self.poll_closing()
    }

    /// A whole answer from an upstream of another API arrived: bill it as the upstream counted
    /// it, and send it in the client's vocabulary.
    fn end_translated(&mut self) -> FramePoll {
        let RelayMode::Translated(t) = &mut self.mode else {
            return self.poll_closing();
        };
        let kept = std::mem::take(&mut t.kept);
        let body = match t.error_status {
            Some(status) => {
                let kept = match &t.secret {
                    Some(secret) => scrub(kept, secret),
                    None => kept,
                };
                Ok(translate_error(t.translation, status, &kept))
            }
            None => {
                let usage = t.meter.usage();
                let estimate = if usage.is_some() { 0 } else { t.meter.completion_estimate() };
                if let Some(trace) = self.guard.trace() {
                    trace.usage = usage;
                    trace.relayed_tokens = estimate;
                }
                translate_whole(t.translation, &kept, crate::clock::unix_now() as u64)
            }
        };
        match body {
            Ok(body) => {
                self.guard.finish(Outcome::Complete);
                self.state = State::Closing(Some(body));
                self.poll_closing()
            }
            Err(e) => self.fail(e.kind, Outcome::UpstreamError, &e.message.clone()),
        }
    }

    /// A whole body went through: bill it from its usage, or from its text, and emit the event.
    fn complete_whole(&mut self) {
        if let RelayMode::Whole { meter: Some(meter) } = &self.mode {
            let usage = meter.usage();
            let estimate = if usage.is_some() { 0 } else { meter.completion_estimate() };
            if let Some(trace) = self.guard.trace() {
                trace.usage = usage;
                trace.relayed_tokens = estimate;
            }
        }
        self.guard.finish(Outcome::Complete);
    }

    fn poll_closing(&mut self) -> FramePoll {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Closing(Some(bytes)) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            _ => Poll::Ready(None),
        }
    }
}

/// The upstream error body with every occurrence of the member's credential replaced.
fn scrub(body: Vec<u8>, secret: &str) -> Vec<u8> {
    let needle = secret.as_bytes();
    if needle.is_empty() || body.len() < needle.len() {
        return body;
    }
    let mut out = Vec::with_capacity(body.len());
    let mut at = 0;
    while at < body.len() {
        if body[at..].starts_with(needle) {
            out.extend_from_slice(b"[redacted]");
            at += needle.len();
        } else {
            out.push(body[at]);
            at += 1;
        }
    }
    out
}

impl Body for RelayBody {
    type Data = Bytes;
    type Error = GatewayError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        let this = self.get_mut();
        loop {
            match this.state {
                State::Done => return Poll::Ready(None),
                State::Closing(_) => return this.poll_closing(),
                State::Relaying => {}
            }
            match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    let Ok(data) = frame.into_data() else {
                        continue; // trailers: LLM APIs send none worth relaying
                    };
                    let now = Instant::now();
                    this.last_frame = now;
                    match &mut this.mode {
                        RelayMode::Stream { tap, .. } => {
                            let fed = tap.feed(data);
                            let stats = tap.stats;
                            // What went out before this frame, now that the connection took it.
                            this.guard.journal_progress(now.into_std());
                            if let Some(trace) = this.guard.trace() {
                                if fed.content && trace.first_token_at.is_none() {
                                    trace.first_token_at = Some(now.into_std());
                                }
                                trace.relayed_tokens = stats.content_events;
                                trace.streamed_usage = stats.usage;
                                if let Some(usage) = stats.usage {
                                    trace.reported_prompt = Some(usage.prompt);
                                }
                            }
                            if fed.content {
                                this.deadline = None;
                            }
                            if let Some(out) = fed.out {
                                return Poll::Ready(Some(Ok(Frame::data(out))));
                            }
                        }
                        RelayMode::Whole { meter } => {
                            if let Some(meter) = meter {
                                meter.feed(&data);
                            }
                            // With a Content-Length the server stops polling after the last
                            // byte, so the end must be noticed here, not at `None`.
                            if this.upstream.is_end_stream() {
                                this.complete_whole();
                                this.state = State::Done;
                            }
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                        RelayMode::Translated(t) => {
                            if t.kept.len() + data.len() > t.limit() {
                                let message = "the upstream's answer is too large to translate";
                                return this.fail(ErrorKind::UpstreamProtocol, Outcome::UpstreamError, message);
                            }
                            if t.error_status.is_none() {
                                t.meter.feed(&data);
                            }
                            t.kept.extend_from_slice(&data);
                            if this.upstream.is_end_stream() {
                                return this.end();
                            }
                        }
                        RelayMode::Scrubbed { kept, .. } => {
                            if kept.len() + data.len() > MAX_ERROR_BODY {
                                let message = "the upstream's error body is too large to relay";
                                return this.fail(ErrorKind::UpstreamProtocol, Outcome::UpstreamError, message);
                            }
                            kept.extend_from_slice(&data);
                            if this.upstream.is_end_stream() {
                                return this.end();
                            }
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let message = format!("the upstream connection failed mid-response: {e}");
                    return this.fail(ErrorKind::UpstreamProtocol, Outcome::UpstreamError, &message);
                }
                Poll::Ready(None) => return this.end(),
                Poll::Pending => loop {
                    if this.alarm.as_mut().poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    if let Some(end) = this.ring() {
                        return end;
                    }
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done)
    }

    fn size_hint(&self) -> SizeHint {
        match (&self.mode, &self.state) {
            // A whole body passes byte for byte: the upstream's length holds.
            (RelayMode::Whole { .. }, State::Relaying) => self.upstream.size_hint(),
            _ => SizeHint::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::scrub;

    #[test]
    fn the_credential_is_scrubbed_wherever_it_is_quoted() {
        let body = br#"{"error":{"message":"Incorrect API key provided: sk-live-123abc. Bearer sk-live-123abc"}}"#;
        let out = String::from_utf8(scrub(body.to_vec(), "sk-live-123abc")).unwrap();
        assert!(!out.contains("sk-live-123abc"));
        assert_eq!(out.matches("[redacted]").count(), 2);
        assert_eq!(scrub(b"short".to_vec(), "a-longer-secret"), b"short");
    }
}
