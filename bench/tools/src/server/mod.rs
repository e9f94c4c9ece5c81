//! The simulator's HTTP server: its own runtime, accept loop and connection settings, sized for a
//! benchmark's upstream (many connections, many h2 streams), without the gateway's defences
//! against hostile clients (per-address caps, lingering close), which a test upstream does not
//! need and which the gateway is measured against.

mod abort;
mod accept;

pub use abort::{Abort, AbortableStream};

use std::convert::Infallible;
use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid listen address {0:?}")]
    InvalidAddress(String),
    #[error("could not listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("could not start the runtime: {0}")]
    Runtime(std::io::Error),
}

/// A multi-threaded runtime with `workers` threads (0: one per CPU).
pub fn runtime(workers: usize, thread_name: &str) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all().thread_name(thread_name);
    if workers > 0 {
        builder.worker_threads(workers);
    }
    builder.build()
}

/// SO_REUSEADDR (a restarted simulator gets its port back at once) and a deep backlog (a
/// benchmark opens hundreds of connections at once). Needs a runtime context.
fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() { TcpSocket::new_v4()? } else { TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(4096)
}

/// A server on its own runtime, started and stopped from any thread (Python calls these with the
/// GIL released) and joined completely on stop, so no thread outlives it.
pub struct Served {
    runtime: tokio::runtime::Runtime,
    stop: watch::Sender<Option<Duration>>,
    task: tokio::task::JoinHandle<()>,
    pub addr: SocketAddr,
}

impl Served {
    /// Listen on `listen` (`host:port`; port 0 picks a free one) and answer with `handler`.
    pub fn start<H, Fut, B>(
        workers: usize,
        thread_name: &str,
        listen_on: &str,
        handler: H,
    ) -> Result<Served, StartError>
    where
        H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let addr = listen_on
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| StartError::InvalidAddress(listen_on.to_string()))?;
        let runtime = runtime(workers, thread_name).map_err(StartError::Runtime)?;
        let bind_error = |source| StartError::Bind { addr, source };
        let listener = {
            let _entered = runtime.enter();
            listen(addr).map_err(bind_error)?
        };
        let bound = listener.local_addr().map_err(bind_error)?;
        let (stop, stop_rx) = watch::channel(None);
        let task = runtime.spawn(accept::serve(listener, handler, stop_rx));
        Ok(Served { runtime, stop, task, addr: bound })
    }

    /// Stop accepting, give open requests `grace`, then shut the runtime down and join it.
    pub fn stop(self, grace: Duration) {
        let _ = self.stop.send(Some(grace));
        let task = self.task;
        self.runtime.block_on(async move {
            let _ = tokio::time::timeout(grace + Duration::from_secs(1), task).await;
        });
        self.runtime.shutdown_timeout(Duration::from_secs(2));
    }
}
