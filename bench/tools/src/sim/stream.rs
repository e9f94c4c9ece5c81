//! One streamed response, paced by deadlines: the first token at arrival + queue + TTFT, token
//! `i+1` one inter-token gap after token `i`'s deadline (not after it was written), so scheduling
//! delays do not accumulate. Faults cut, stall or corrupt the stream at a chosen token; a cut
//! over HTTP/1.1 trips the connection's abort switch rather than failing the body, so the tokens
//! it recorded as sent are on the wire before the connection closes (see `server::Abort`).

use std::collections::VecDeque;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body::Frame;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use super::fault::FaultSet;
use super::handler::RecordGuard;
use super::timing::Timing;
use super::wire::StreamWire;
use crate::server::Abort;

enum Phase {
    Queue,
    Tokens(u32),
    Finish,
    Done,
}

pub struct StreamState {
    pub wire: StreamWire,
    pub timing: Timing,
    pub faults: FaultSet,
    pub tokens: u32,
    pub finish: &'static str,
    pub prompt_tokens: u64,
    pub compute: Option<Arc<Semaphore>>,
    pub record: RecordGuard,
    /// The connection's abort switch (HTTP/1.1); without one a cut fails the body (h2: a reset).
    abort: Option<Abort>,
    phase: Phase,
    queued: VecDeque<Bytes>,
    next_at: Instant,
    malformed_sent: bool,
    _permit: Option<OwnedSemaphorePermit>,
}

type Step = Option<(Result<Frame<Bytes>, io::Error>, StreamState)>;

impl StreamState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        wire: StreamWire,
        timing: Timing,
        faults: FaultSet,
        tokens: u32,
        finish: &'static str,
        prompt_tokens: u64,
        compute: Option<Arc<Semaphore>>,
        record: RecordGuard,
        abort: Option<Abort>,
    ) -> Self {
        Self {
            wire,
            timing,
            faults,
            tokens,
            finish,
            prompt_tokens,
            compute,
            record,
            abort,
            phase: Phase::Queue,
            queued: VecDeque::new(),
            next_at: Instant::now(),
            malformed_sent: false,
            _permit: None,
        }
    }

    fn with_usage(&self) -> bool {
        !self.faults.no_usage
    }

    fn gap(&mut self) -> Duration {
        match self.faults.drip_ms {
            Some(ms) => Duration::from_secs_f64(ms / 1000.0),
            None => self.timing.next_gap(),
        }
    }
}

pub async fn step(mut st: StreamState) -> Step {
    loop {
        if let Some(frame) = st.queued.pop_front() {
            return Some((Ok(Frame::data(frame)), st));
        }
        match st.phase {
            Phase::Queue => {
                let queued_at = Instant::now();
                if let Some(sem) = st.compute.clone() {
                    st._permit = Some(sem.acquire_owned().await.ok()?);
                }
                let now = Instant::now();
                st.record.line.queue_ms = now.duration_since(queued_at).as_secs_f64() * 1000.0;
                st.next_at = now + st.timing.first_token(st.prompt_tokens);
                let preamble = st.wire.preamble(st.prompt_tokens, st.with_usage());
                st.queued.extend(preamble);
                st.phase = Phase::Tokens(0);
            }
            Phase::Tokens(i) => {
                if i == st.tokens {
                    let epilogue = st.wire.epilogue(st.prompt_tokens, st.tokens, st.finish, st.with_usage());
                    st.queued.extend(epilogue);
                    st.phase = Phase::Finish;
                    continue;
                }
                // Faults strike at token i's deadline, after token i-1 went out whole.
                tokio::time::sleep_until(st.next_at).await;
                if let Some((after, done)) = st.faults.cut {
                    if after == i {
                        if done {
                            st.record.outcome = Some("cut_done");
                            let done_frame = st.wire.done();
                            st.queued.push_back(done_frame);
                            st.phase = Phase::Finish;
                            continue;
                        }
                        st.record.outcome = Some("cut");
                        st.phase = Phase::Done;
                        if let Some(abort) = &st.abort {
                            // The connection fails once the frames before this one are written;
                            // this body is dropped with it, writing the record.
                            abort.trip();
                            std::future::pending::<()>().await;
                        }
                        let error = io::Error::new(io::ErrorKind::ConnectionAborted, "simulated cut");
                        return Some((Err(error), st));
                    }
                }
                if st.faults.hang_after == Some(i) {
                    st.record.outcome_if_dropped = "hang";
                    std::future::pending::<()>().await;
                }
                if st.faults.malformed_after == Some(i) && !st.malformed_sent {
                    st.malformed_sent = true;
                    st.queued.push_back(st.wire.malformed());
                    continue;
                }
                let frame = st.wire.token(i);
                st.record.line.completion_tokens = u64::from(i) + 1;
                let gap = st.gap();
                st.next_at += gap;
                st.phase = Phase::Tokens(i + 1);
                return Some((Ok(Frame::data(frame)), st));
            }
            Phase::Finish => {
                st.record.outcome.get_or_insert("complete");
                st.phase = Phase::Done;
            }
            Phase::Done => return None,
        }
    }
}
