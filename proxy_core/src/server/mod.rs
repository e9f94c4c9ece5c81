//! The data plane's accept loop: connection caps (in all and per client address), TCP_NODELAY, HTTP/1.1 and h2 on one port, a deadline from accept to the
//! first request, the header-read timeout, lingering close, and graceful drain on stop.

mod client_caps;
mod first_request;
mod linger;

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
        .max_buf_size(8192);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.h2_max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    builder
}

/// Serve until `stop` carries a grace period; then stop accepting, let open requests finish
/// within the grace, and return (connections still open are dropped with the runtime).
pub async fn serve<H, Fut, B>(
    listener: TcpListener,
    settings: ConnSettings,
    counters: Arc<ConnCounters>,
    handler: H,
    mut stop: StopSignal,
) where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = builder(&settings);
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(settings.max_connections));
    let client_caps = ClientCaps::new(settings.max_connections_per_client);
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
        counters.accepted.fetch_add(1, Ordering::Relaxed);
        let Some(place) = client_caps.admit(peer.ip()) else {
            // Closed at once, before a byte is read: the client holds its share already.
            counters.refused_per_client.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let _ = stream.set_nodelay(true);
        counters.open.fetch_add(1, Ordering::Relaxed);
        let started = Started::default();
        let service = {
            let started = started.clone();
            let handler = handler.clone();
            service_fn(move |req| {
                started.mark();
                handler(req)
            })
        };
        let io = TokioIo::new(LingeringStream::new(stream));
        let connection = builder.serve_connection(io, service).into_owned();
        let watched = FirstRequestDeadline::new(graceful.watch(connection), started, settings.header_read_timeout);
        let counters = counters.clone();
        tokio::spawn(async move {
            match watched.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::debug!(error = %e, "connection ended with an error"),
                Err(NoRequestInTime) => {
                    counters.first_request_timeouts.fetch_add(1, Ordering::Relaxed);
                }
            }
            counters.open.fetch_sub(1, Ordering::Relaxed);
            drop(place);
            drop(permit);
        });
    }
    drop(listener);
    let grace = (*stop.borrow()).unwrap_or(Duration::ZERO);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(grace) => {
            tracing::info!(grace_ms = grace.as_millis() as u64, "grace period over; closing remaining connections");
        }
    }
}
