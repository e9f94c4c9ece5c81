//! A stream that must wait in a queue longer than `keepalive_ms` gets its headers at once and an
//! SSE comment every `keepalive_ms` while it waits, so clients with read timeouts do not give up.
//! Admission and forwarding then continue inside the body; a refusal or failure from here on can
//! only be told as an SSE error event (the status line went out), never as a silent end.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body::{Body, Frame};
use tokio::time::Sleep;

use super::relay::RelayBody;
use super::respond::ProxyBody;
use crate::endpoint::Flavor;
use crate::error::{ErrorKind, GatewayError};
use crate::sse::{error_event, KEEP_ALIVE};

pub type Pending = Pin<Box<dyn Future<Output = Result<Response<ProxyBody>, GatewayError>> + Send>>;

enum Stage {
    Waiting(Pending),
    Relaying(Box<RelayBody>),
    Done,
}

pub struct DeferredBody {
    stage: Stage,
    flavor: Flavor,
    every: Duration,
    keepalive: Pin<Box<Sleep>>,
    /// The first comment goes out at once: the request has already waited `every`.
    greeted: bool,
}

impl DeferredBody {
    pub fn new(pending: Pending, flavor: Flavor, every: Duration) -> Self {
        Self {
            stage: Stage::Waiting(pending),
            flavor,
            every,
            keepalive: Box::pin(tokio::time::sleep(every)),
            greeted: false,
        }
    }

    fn error(&mut self, error: &GatewayError) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
        self.stage = Stage::Done;
        Poll::Ready(Some(Ok(Frame::data(error_event(self.flavor, error.kind, &error.message)))))
    }
}

impl Body for DeferredBody {
    type Data = Bytes;
    type Error = GatewayError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, GatewayError>>> {
        let this = self.get_mut();
        if !this.greeted {
            this.greeted = true;
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE)))));
        }
        loop {
            let pending = match &mut this.stage {
                Stage::Done => return Poll::Ready(None),
                Stage::Relaying(relay) => return Pin::new(relay.as_mut()).poll_frame(cx),
                Stage::Waiting(pending) => pending,
            };
            match pending.as_mut().poll(cx) {
                Poll::Ready(Ok(response)) => {
                    let status = response.status();
                    match response.into_body() {
                        ProxyBody::Relay(relay) if status.is_success() => this.stage = Stage::Relaying(Box::new(relay)),
                        _ => {
                            let error = GatewayError::new(
                                ErrorKind::UpstreamProtocol,
                                format!("the upstream answered HTTP {}", status.as_u16()),
                            );
                            return this.error(&error);
                        }
                    }
                }
                Poll::Ready(Err(error)) => return this.error(&error),
                Poll::Pending => {
                    if this.keepalive.as_mut().poll(cx).is_ready() {
                        let next = tokio::time::Instant::now() + this.every;
                        this.keepalive.as_mut().reset(next);
                        return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(KEEP_ALIVE)))));
                    }
                    return Poll::Pending;
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.stage, Stage::Done)
    }
}
