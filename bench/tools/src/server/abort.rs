//! Ending an HTTP/1.1 response abruptly without losing what was already handed over.
//!
//! A response body that fails makes hyper drop the connection at once, with whatever it still
//! holds in its write buffer: the frames the body yielded just before the failure, when they came
//! in the same turn of hyper's write loop (they do whenever their deadlines have already passed,
//! as under CPU load), never reach the client. A simulator that records "3 tokens sent, then cut"
//! must have put those 3 tokens on the wire. So the body trips the connection's `Abort` switch
//! and waits; the connection fails at its next flush, which hyper makes only once its buffer is
//! written to the socket. The close that follows is a plain FIN after every byte written before,
//! without the chunked body's last chunk: what a client sees when an upstream dies mid-answer.
//!
//! The switch ends the whole connection, so it is for HTTP/1.1 only (one response at a time);
//! on h2 a failed body resets its own stream.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// One connection's abort switch, found in each request's extensions.
#[derive(Debug, Clone, Default)]
pub struct Abort(Arc<AtomicBool>);

impl Abort {
    /// Fail the connection once everything written so far has been flushed to the socket.
    pub fn trip(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub fn is_tripped(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// A client connection that fails its flush once its `Abort` is tripped.
pub struct AbortableStream {
    inner: TcpStream,
    abort: Abort,
}

impl AbortableStream {
    pub fn new(inner: TcpStream, abort: Abort) -> Self {
        Self { inner, abort }
    }
}

impl AsyncRead for AbortableStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for AbortableStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    /// hyper flushes the socket after its own buffer is written out, so a tripped switch seen
    /// here means every byte handed over before the trip is in the kernel's send queue.
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(Pin::new(&mut self.inner).poll_flush(cx))?;
        if self.abort.is_tripped() {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "response aborted")));
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[tokio::test]
    async fn a_tripped_switch_fails_the_flush_after_the_bytes_written_before_it() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let abort = Abort::default();
        let mut server = AbortableStream::new(server, abort.clone());
        server.write_all(b"before").await.unwrap();
        server.flush().await.unwrap();
        abort.trip();
        server.write_all(b" and after").await.unwrap();
        let err = server.flush().await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
        drop(server);
        let mut seen = String::new();
        client.read_to_string(&mut seen).await.unwrap();
        assert_eq!(seen, "before and after");
    }
}
