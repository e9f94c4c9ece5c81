//! Lingering close (nginx's `lingering_close`): when the server closes a connection, it first
//! shuts its own write side (the answer and a FIN reach the client), then reads and discards
//! what the client is still sending, for a bounded time and number of bytes, before it closes.
//!
//! Why: an answer sent before a request body was read (413, 431, 401) is followed by a close.
//! Closing a socket whose receive buffer still holds unread bytes makes the kernel send RST
//! instead of FIN, and a client that writes its whole body before it reads (most HTTP
//! libraries) then sees EPIPE or "connection reset" instead of the answer. Draining first lets
//! it read the answer. The bounds keep a client from holding the socket: it gets at most
//! `LINGER_TIME` and `LINGER_BYTES`, and the connection's permit stays held meanwhile.
//!
//! Once the server is stopping, a closing connection drains only what the client has already
//! sent and closes at the first wait: graceful shutdown closes every idle keep-alive
//! connection, whose client (any pooling SDK, any load balancer) sends nothing and keeps its
//! end open, so lingering on it would hold the stop for `LINGER_TIME` for no answer at all.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use super::StopSignal;

/// Longest time a closing connection keeps reading what the client still sends.
pub const LINGER_TIME: Duration = Duration::from_secs(3);
/// Most bytes read and discarded while lingering.
pub const LINGER_BYTES: u64 = 64 * 1024 * 1024;

enum Closing {
    Open,
    /// The write side is shut; reading until EOF, the deadline or the byte bound.
    Lingering {
        deadline: Pin<Box<Sleep>>,
        drained: u64,
        /// Ready once the server is stopping.
        stopping: Pin<Box<dyn Future<Output = ()> + Send>>,
    },
    Closed,
}

/// A client connection whose shutdown lingers (see the module comment).
pub struct LingeringStream {
    inner: TcpStream,
    closing: Closing,
    /// The server's stop signal (see the module comment).
    stop: StopSignal,
}

impl LingeringStream {
    pub fn new(inner: TcpStream, stop: StopSignal) -> Self {
        Self { inner, closing: Closing::Open, stop }
    }

    /// Drain what the client still sends; `Ready` when the lingering is over.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Closing::Lingering { deadline, drained, stopping } = &mut self.closing else {
            return Poll::Ready(());
        };
        let mut scratch = [0u8; 8192];
        loop {
            if *drained >= LINGER_BYTES || deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(());
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => return Poll::Ready(()),
                Poll::Ready(Ok(())) => *drained += buf.filled().len() as u64,
                Poll::Ready(Err(_)) => return Poll::Ready(()),
                Poll::Pending if stopping.as_mut().poll(cx).is_ready() => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl AsyncRead for LingeringStream {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for LingeringStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
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

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        loop {
            match this.closing {
                Closing::Open => {
                    ready!(Pin::new(&mut this.inner).poll_shutdown(cx))?;
                    let deadline = Box::pin(tokio::time::sleep(LINGER_TIME));
                    let mut stop = this.stop.clone();
                    let stopping = Box::pin(async move {
                        // A dropped sender: the server is gone, so it is stopping too.
                        let _ = stop.wait_for(Option::is_some).await;
                    });
                    this.closing = Closing::Lingering { deadline, drained: 0, stopping };
                }
                Closing::Lingering { .. } => {
                    ready!(this.poll_linger(cx));
                    this.closing = Closing::Closed;
                }
                Closing::Closed => return Poll::Ready(Ok(())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;
    use tokio::sync::watch;

    /// A server end, its client, and the server's stop signal (dropping it stops the server).
    async fn pair() -> (LingeringStream, TcpStream, watch::Sender<Option<Duration>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).await.unwrap();
        let (server, _) = listener.accept().await.unwrap();
        let (stop, stop_rx) = watch::channel(None);
        (LingeringStream::new(server, stop_rx), client, stop)
    }

    #[tokio::test]
    async fn shutdown_drains_what_the_client_still_sends_so_it_can_read_the_answer() {
        let (mut server, mut client, _stop) = pair().await;
        // The client is mid-upload when the server answers and closes.
        let writer = tokio::spawn(async move {
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..64 {
                if client.write_all(&chunk).await.is_err() {
                    return (client, false);
                }
            }
            (client, true)
        });
        server.write_all(b"HTTP/1.1 413 Payload Too Large\r\n\r\n").await.unwrap();
        server.shutdown().await.unwrap();
        drop(server);
        let (mut client, wrote_all) = writer.await.unwrap();
        assert!(wrote_all, "the upload was cut by a reset");
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 413"));
    }

    #[tokio::test(start_paused = true)]
    async fn lingering_ends_at_its_deadline_when_the_client_keeps_the_socket_open() {
        let (mut server, _client, _stop) = pair().await;
        let started = tokio::time::Instant::now();
        server.shutdown().await.unwrap();
        assert!(started.elapsed() >= LINGER_TIME);
        assert!(started.elapsed() < LINGER_TIME + Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_stopping_server_closes_an_idle_connection_without_lingering() {
        // An idle keep-alive client: it sends nothing and keeps its end open.
        let (mut server, mut client, stop) = pair().await;
        let started = std::time::Instant::now();
        let closing = tokio::spawn(async move {
            server.shutdown().await.unwrap();
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!closing.is_finished(), "it lingers while the server serves");
        stop.send(Some(Duration::from_secs(30))).unwrap();
        closing.await.unwrap();
        assert!(started.elapsed() < LINGER_TIME / 2, "took {:?}", started.elapsed());
        // The client sees a clean end of stream, not a reset.
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_stopping_server_still_drains_what_the_client_already_sent() {
        let (mut server, mut client, stop) = pair().await;
        stop.send(Some(Duration::from_secs(30))).unwrap();
        client.write_all(&[b'x'; 32 * 1024]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        server.write_all(b"HTTP/1.1 413 Payload Too Large\r\n\r\n").await.unwrap();
        server.shutdown().await.unwrap();
        drop(server);
        let mut answer = String::new();
        client.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 413"));
    }
}
