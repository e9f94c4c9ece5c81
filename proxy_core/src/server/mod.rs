//! The data plane's accept loop: connection caps (in all and per client address), TCP_NODELAY, HTTP/1.1 and h2 on one port, a deadline from accept to the
//! first request (a TLS handshake included), the header-read timeout, lingering close, and graceful
//! drain on stop (a connection with nothing in flight is closed soon after the stop).

mod client_caps;
mod first_request;
mod idle_close;
mod linger;
pub mod refused_head;

use client_caps::ClientCaps;
use linger::LingeringStream;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use first_request::{FirstRequestDeadline, NoRequestInTime, Started};
use idle_close::{CloseWhenIdle, CountedBody, InFlight, Stopping, CLOSE_WAIT};
use refused_head::OnRefusedHead;

use crate::tls::Tls;

/// The largest request head (request line and headers) the data port takes: hyper's HTTP/1 read
/// buffer is capped at it, so a head that has not ended within it gets 431 before it is parsed.
/// That cap is not exact: a read fills the buffer's whole capacity, which on a connection whose
/// buffer grew for an earlier request can be twice this, so the handler checks a parsed head's
/// size against it too (`proxy::handler`).
pub const MAX_HEAD_BYTES: usize = 8192;

/// What an open connection holds until it ends: its place in the caps, counted as open.
struct Held {
    counters: Arc<ConnCounters>,
    _place: client_caps::ClientPlace,
    _permit: tokio::sync::OwnedSemaphorePermit,
}

impl Drop for Held {
    fn drop(&mut self) {
        self.counters.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One accepted connection, before its bytes are read.
struct Conn {
    builder: Arc<auto::Builder<TokioExecutor>>,
    watcher: hyper_util::server::graceful::Watcher,
    /// From accept to the whole head of the first request (a TLS handshake included).
    deadline: tokio::time::Instant,
    held: Held,
    on_refused_head: OnRefusedHead,
    stopping: Stopping,
}

impl Conn {
    async fn serve<IO, H, Fut, B>(self, io: IO, handler: H)
    where
        IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
        H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Started::default();
        let in_flight = InFlight::default();
        let service = {
            let started = started.clone();
            let in_flight = in_flight.clone();
            // The request's future is boxed: hyper keeps its slot for the service's future
            // (sized to it) for the connection's whole life, so unboxed every open stream would
            // carry it long after its future finished. The handler's future is made inside the
            // box, not moved into it: a future is copied whole (all of its states) at each move.
            service_fn(move |req| {
                started.mark();
                let answering = in_flight.begin();
                let handler = handler.clone();
                Box::pin(async move {
                    let response = handler(req).await?;
                    Ok::<_, Infallible>(response.map(|body| CountedBody::new(body, answering)))
                })
            })
        };
        let connection = self.builder.serve_connection(TokioIo::new(io), service).into_owned();
        // Pinned here, not moved into the await: the connection (and its socket) is dropped
        // only after its outcome is counted, so a client that sees the close sees the count.
        let connection = refused_head::watch(self.watcher.watch(connection), self.on_refused_head);
        let watched = FirstRequestDeadline::until(connection, started, self.deadline);
        // Once the server stops, a connection with nothing in flight is given `CLOSE_WAIT` to
        // close itself, then dropped (`idle_close.rs`: an HTTP/2 client that does not read
        // would hold the stop for the whole grace).
        let watched = std::pin::pin!(CloseWhenIdle::new(watched, self.stopping, in_flight, CLOSE_WAIT));
        match watched.await.unwrap_or(Ok(Ok(()))) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                if e.downcast_ref::<hyper::Error>().is_some_and(hyper::Error::is_parse) {
                    self.held.counters.malformed_heads.fetch_add(1, Ordering::Relaxed);
                }
                tracing::debug!(error = %e, "connection ended with an error");
            }
            Err(NoRequestInTime) => {
                self.held.counters.first_request_timeouts.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

#[derive(Debug, Clone)]
pub struct ConnSettings {
    /// Time allowed to receive a request's headers (slowloris guard), and from accept to the
    /// whole head of a connection's first request.
    pub header_read_timeout: Duration,
    pub max_connections: usize,
    /// Connections one client address (an IPv6 /64) may hold open; 0 = no cap.
    pub max_connections_per_client: u32,
    pub h2_max_concurrent_streams: u32,
}

impl Default for ConnSettings {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(5),
            max_connections: 25_000,
            max_connections_per_client: 4_096,
            h2_max_concurrent_streams: 100,
        }
    }
}

#[derive(Default)]
pub struct ConnCounters {
    pub accepted: AtomicU64,
    pub open: AtomicU64,
    /// Connections closed at once because their client address held its cap.
    pub refused_per_client: AtomicU64,
    /// Connections closed because no request arrived within the header-read timeout.
    pub first_request_timeouts: AtomicU64,
    /// Connections whose request head could not be parsed: answered 400, 414 or 431 by hyper
    /// (with the body `set_parse_error_answer` gave it) and closed.
    pub malformed_heads: AtomicU64,
}

/// `None` while serving; `Some(grace)` asks the loop to stop.
pub type StopSignal = watch::Receiver<Option<Duration>>;

/// Bind with SO_REUSEADDR and a deep backlog; the caller turns it into a tokio listener.
pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    let domain = socket2::Domain::for_address(addr);
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    Ok(socket.into())
}

fn builder(settings: &ConnSettings) -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout)
        .keep_alive(true)
        .max_buf_size(MAX_HEAD_BYTES);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.h2_max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    builder
}

/// Serve until `stop` carries a grace period; then stop accepting, let open requests finish
/// within the grace, and return (connections still open are dropped with the runtime). With
/// `tls`, every connection is a TLS one: the handshake runs in the connection's own task (never
/// in the accept loop) and spends from the same deadline as the first request. A request head
/// hyper refused (no handler saw it) is told to `on_refused_head` as its answer is built.
pub async fn serve<H, Fut, B>(
    listener: TcpListener,
    settings: ConnSettings,
    counters: Arc<ConnCounters>,
    tls: Option<Arc<Tls>>,
    handler: H,
    on_refused_head: OnRefusedHead,
    mut stop: StopSignal,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = Arc::new(builder(&settings));
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(settings.max_connections));
    let client_caps = ClientCaps::new(settings.max_connections_per_client);
    let stopping = Stopping::default();
    loop {
        let permit = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(p) => p,
                Err(_) => break,
            },
            _ = stop.changed() => break,
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.changed() => break,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let accepted_at = std::time::Instant::now();
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        let Some(place) = client_caps.admit(peer.ip()) else {
            // Closed at once, before a byte is read: the client holds its share already.
            counters.refused_per_client.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let _ = stream.set_nodelay(true);
        counters.open.fetch_add(1, Ordering::Relaxed);
        let conn = Conn {
            builder: builder.clone(),
            watcher: graceful.watcher(),
            deadline: tokio::time::Instant::now() + settings.header_read_timeout,
            held: Held { counters: counters.clone(), _place: place, _permit: permit },
            on_refused_head: on_refused_head.clone(),
            stopping: stopping.clone(),
        };
        let handler = handler.clone();
        let stream = LingeringStream::new(stream, stop.clone());
        match &tls {
            None => {
                tokio::spawn(conn.serve(stream, handler));
            }
            Some(tls) => {
                let tls = tls.clone();
                tokio::spawn(async move {
                    let handshake =
                        crate::tls::accept(&tls.acceptor, &tls.handshakes, stream, accepted_at, conn.deadline);
                    if let Some(stream) = handshake.await {
                        conn.serve(stream, handler).await;
                    }
                });
            }
        }
    }
    drop(listener);
    // Before the graceful shutdown wakes every connection, so each sees it is stopping.
    stopping.set();
    let grace = (*stop.borrow()).unwrap_or(Duration::ZERO);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => {
            tracing::info!(grace_ms = grace.as_millis() as u64, "grace period over; closing remaining connections");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use tokio::net::TcpStream;

    /// A server whose answers take `x-delay-ms`, its address, its stop signal and its task.
    async fn start() -> (SocketAddr, watch::Sender<Option<Duration>>, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::from_std(bind("127.0.0.1:0".parse().expect("an address")).expect("bind"))
            .expect("a tokio listener");
        let addr = listener.local_addr().expect("its address");
        let (stop, stop_rx) = watch::channel(None);
        let handler = |req: Request<Incoming>| async move {
            let delay = req.headers().get("x-delay-ms").and_then(|v| v.to_str().ok()?.parse().ok()).unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"answered"))))
        };
        let on_refused_head: OnRefusedHead = Arc::new(|_| {});
        let settings = ConnSettings::default();
        let serving = serve(listener, settings, Arc::default(), None, handler, on_refused_head, stop_rx);
        (addr, stop, tokio::spawn(serving))
    }

    async fn h2_client(addr: SocketAddr) -> hyper::client::conn::http2::SendRequest<Full<Bytes>> {
        let stream = TcpStream::connect(addr).await.expect("connect");
        let (sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream)).await.expect("h2");
        tokio::spawn(connection);
        sender
    }

    fn request(delay_ms: u64) -> Request<Full<Bytes>> {
        Request::builder()
            .uri("http://localhost/")
            .header("x-delay-ms", delay_ms.to_string())
            .body(Full::default())
            .expect("a request")
    }

    #[tokio::test]
    async fn an_h2_request_in_flight_at_the_stop_is_answered_and_waited_for() {
        let (addr, stop, serving) = start().await;
        let mut client = h2_client(addr).await;
        let slow = CLOSE_WAIT * 2;
        let answering = tokio::spawn(client.send_request(request(slow.as_millis() as u64)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let stopped = std::time::Instant::now();
        stop.send_replace(Some(Duration::from_secs(20)));
        let answer = answering.await.expect("joined").expect("answered despite the stop");
        let body = answer.into_body().collect().await.expect("the whole body").to_bytes();
        assert_eq!(body, Bytes::from_static(b"answered"));
        serving.await.expect("the server ends");
        let took = stopped.elapsed();
        assert!(took >= slow - Duration::from_millis(150), "{took:?}");
        assert!(took < Duration::from_secs(10), "{took:?}");
    }

    #[tokio::test]
    async fn an_idle_h2_connection_whose_client_does_not_read_ends_soon_after_the_stop() {
        let (addr, stop, serving) = start().await;
        // The preface, an empty SETTINGS frame and one request (`GET /`, HPACK by hand), then
        // nothing is read or written: the answer, the GOAWAY and the PING go unread.
        let mut idle = TcpStream::connect(addr).await.expect("connect");
        let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
        let headers = b"\0\0\x0e\x01\x05\0\0\0\x01\x82\x86\x84\x41\x09localhost";
        tokio::io::AsyncWriteExt::write_all(&mut idle, &[&preface[..], &headers[..]].concat()).await.expect("sent");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let stopped = std::time::Instant::now();
        stop.send_replace(Some(Duration::from_secs(20)));
        serving.await.expect("the server ends");
        let took = stopped.elapsed();
        assert!(took >= CLOSE_WAIT, "given its close wait first: {took:?}");
        assert!(took < CLOSE_WAIT + Duration::from_secs(2), "{took:?}");
    }
}
