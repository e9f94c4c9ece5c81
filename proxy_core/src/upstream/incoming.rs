//! The response body of either upstream client, as one type for the relay.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;

use super::error::BodyError;
use super::http1::Http1Body;

pub enum UpstreamIncoming {
    /// From hyper's client (TLS members, whose ALPN may pick HTTP/2, and HTTP/2 members).
    Hyper(Incoming),
    /// From the gateway's own HTTP/1.1 client (plain-HTTP members).
    Http1(Http1Body),
}

impl Body for UpstreamIncoming {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            UpstreamIncoming::Hyper(body) => {
                Pin::new(body).poll_frame(cx).map(|frame| frame.map(|f| f.map_err(|e| BodyError(e.to_string()))))
            }
            UpstreamIncoming::Http1(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            UpstreamIncoming::Hyper(body) => body.is_end_stream(),
            UpstreamIncoming::Http1(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            UpstreamIncoming::Hyper(body) => body.size_hint(),
            UpstreamIncoming::Http1(body) => body.size_hint(),
        }
    }
}
