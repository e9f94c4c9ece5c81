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
use hyper::body::Incoming;
use tokio::time::{Instant, Sleep};

use super::trace::UsageGuard;
use crate::admission::Permit;
use crate::endpoint::Flavor;
use crate::error::{ErrorKind, GatewayError, Origin};
use crate::routing::{MemberLease, Verdict};
use crate::sse::{completion_estimate_of_body, error_event, usage_of_body, SseTap};
use crate::usage::Outcome;

/// Non-streaming bodies larger than this are relayed but not parsed for `usage`.
const MAX_PARSED_BODY: usize = 16 * 1024 * 1024;

pub enum RelayMode {
    /// A 2xx event stream: tapped event by event.
    Stream { tap: SseTap, flavor: Flavor },
    /// Anything else: relayed as is; a 2xx JSON body is kept to read its `usage` at the end.
    Whole { kept: Vec<Bytes>, kept_len: usize, parse_usage: bool },
}

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

fn sleep_until(at: Option<std::time::Instant>) -> Option<Pin<Box<Sleep>>> {
    at.map(|at| Box::pin(tokio::time::sleep_until(at.into())))
}

pub struct RelayBody {
    upstream: Incoming,
    mode: RelayMode,
    idle_timeout: Duration,
    idle: Pin<Box<Sleep>>,
    /// First content token (streams) or whole response (others) must arrive before this.
    deadline: Option<Pin<Box<Sleep>>>,
    client_deadline: Option<Pin<Box<Sleep>>>,
    state: State,
    guard: UsageGuard,
    /// The member lease that passes the attempt's verdict to its health, and the pool slot.
    /// Fields drop in order: the member's count falls before the slot goes to the next waiter,
    /// so that waiter finds the member free instead of skipping to a fallback pool.
    held: (MemberLease, Permit),
}

impl RelayBody {
    pub fn new(
        upstream: Incoming,
        mode: RelayMode,
        timers: Timers,
        guard: UsageGuard,
        held: (MemberLease, Permit),
    ) -> Self {
        Self {
            upstream,
            mode,
            idle_timeout: timers.idle,
            idle: Box::pin(tokio::time::sleep(timers.idle)),
            deadline: sleep_until(timers.first_token.or(timers.total)),
            client_deadline: sleep_until(timers.client_deadline),
            state: State::Relaying,
            guard,
            held,
        }
    }

    /// The upstream failed mid-body. Streams end with an SSE error event (the status line is
    /// long gone); other bodies are aborted so the client sees a truncated response, not a
    /// complete-looking one.
    fn fail(
        &mut self,
        kind: ErrorKind,
        outcome: Outcome,
        message: &str,
    ) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
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
            RelayMode::Whole { .. } => {
                self.guard.finish(outcome);
                self.state = State::Done;
                Poll::Ready(Some(Err(GatewayError::new(kind, message.to_string()))))
            }
        }
    }

    /// The upstream body ended.
    fn end(&mut self) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
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
        }
        self.poll_closing()
    }

    /// A whole body went through: read its usage and emit the event.
    fn complete_whole(&mut self) {
        if let RelayMode::Whole { kept, kept_len, parse_usage } = &mut self.mode {
            if *parse_usage && *kept_len <= MAX_PARSED_BODY {
                let joined = match kept.as_slice() {
                    [single] => single.clone(),
                    chunks => Bytes::from(chunks.concat()),
                };
                kept.clear();
                let usage = usage_of_body(&joined);
                let estimate = match usage {
                    Some(_) => 0,
                    None => completion_estimate_of_body(&joined).unwrap_or(0),
                };
                if let Some(trace) = self.guard.trace() {
                    trace.usage = usage;
                    trace.relayed_tokens = estimate;
                }
            }
        }
        self.guard.finish(Outcome::Complete);
    }

    fn poll_closing(&mut self) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
        match std::mem::replace(&mut self.state, State::Done) {
            State::Closing(Some(bytes)) => Poll::Ready(Some(Ok(Frame::data(bytes)))),
            _ => Poll::Ready(None),
        }
    }
}

impl Body for RelayBody {
    type Data = Bytes;
    type Error = GatewayError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
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
                    this.idle.as_mut().reset(now + this.idle_timeout);
                    match &mut this.mode {
                        RelayMode::Stream { tap, .. } => {
                            let fed = tap.feed(data);
                            let stats = tap.stats;
                            if let Some(trace) = this.guard.trace() {
                                if fed.content && trace.first_token_at.is_none() {
                                    trace.first_token_at = Some(now.into_std());
                                }
                                trace.relayed_tokens = stats.content_events;
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
                        RelayMode::Whole { kept, kept_len, parse_usage } => {
                            if *parse_usage && *kept_len <= MAX_PARSED_BODY {
                                *kept_len += data.len();
                                kept.push(data.clone());
                            }
                            // With a Content-Length the server stops polling after the last
                            // byte, so the end must be noticed here, not at `None`.
                            if this.upstream.is_end_stream() {
                                this.complete_whole();
                                this.state = State::Done;
                            }
                            return Poll::Ready(Some(Ok(Frame::data(data))));
                        }
                    }
                }
                Poll::Ready(Some(Err(e))) => {
                    let message = format!("the upstream connection failed mid-response: {e}");
                    return this.fail(ErrorKind::UpstreamProtocol, Outcome::UpstreamError, &message);
                }
                Poll::Ready(None) => return this.end(),
                Poll::Pending => {
                    if let Some(deadline) = this.deadline.as_mut() {
                        if deadline.as_mut().poll(cx).is_ready() {
                            let what = match this.mode {
                                RelayMode::Stream { .. } => "the first token",
                                RelayMode::Whole { .. } => "the whole response",
                            };
                            let message = format!("the upstream did not send {what} in time");
                            return this.fail(ErrorKind::UpstreamTimeout, Outcome::Timeout, &message);
                        }
                    }
                    if let Some(deadline) = this.client_deadline.as_mut() {
                        if deadline.as_mut().poll(cx).is_ready() {
                            let message = "the request's deadline passed before the response ended";
                            return this.fail(ErrorKind::DeadlineExceeded, Outcome::Timeout, message);
                        }
                    }
                    if this.idle.as_mut().poll(cx).is_ready() {
                        let message = format!("the upstream sent nothing for {} ms", this.idle_timeout.as_millis());
                        return this.fail(ErrorKind::UpstreamTimeout, Outcome::Timeout, &message);
                    }
                    return Poll::Pending;
                }
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
