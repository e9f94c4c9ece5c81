//! A server on its own tokio runtime: started and stopped from any thread (Python calls these
//! with the GIL released), joined completely on stop so no thread outlives it.

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::server::{self, StopSignal};

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("invalid listen address {0:?}")]
    InvalidAddress(String),
    #[error("could not listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("could not start the runtime: {0}")]
    Runtime(std::io::Error),
}

pub fn resolve(addr: &str) -> Result<SocketAddr, StartError> {
    addr.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| StartError::InvalidAddress(addr.to_string()))
}

/// A runtime of `workers` threads (0: one per CPU), each asking for a scheduler `slice` of its
/// own when one is given (`sched.rs`).
pub fn build_runtime(
    workers: usize,
    thread_name: &str,
    slice: Option<Duration>,
) -> Result<tokio::runtime::Runtime, StartError> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    builder.enable_all().thread_name(thread_name);
    if workers > 0 {
        builder.worker_threads(workers);
    }
    if let Some(slice) = slice {
        builder.on_thread_start(move || crate::sched::set_thread_slice(slice));
    }
    builder.build().map_err(StartError::Runtime)
}

pub struct Served {
    runtime: tokio::runtime::Runtime,
    stop: watch::Sender<Option<Duration>>,
    task: tokio::task::JoinHandle<()>,
    pub addr: SocketAddr,
}

impl Served {
    /// Bind `listen` and spawn `serve(listener, stop)` on a fresh runtime.
    pub fn start<F, Fut>(
        workers: usize,
        thread_name: &str,
        slice: Option<Duration>,
        listen: &str,
        serve: F,
    ) -> Result<Served, StartError>
    where
        F: FnOnce(TcpListener, StopSignal) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let addr = resolve(listen)?;
        let runtime = build_runtime(workers, thread_name, slice)?;
        let bind_error = |source| StartError::Bind { addr, source };
        let std_listener = server::bind(addr).map_err(bind_error)?;
        let bound = std_listener.local_addr().map_err(bind_error)?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(std_listener).map_err(bind_error)?
        };
        let (stop, stop_rx) = watch::channel(None);
        let task = runtime.spawn(serve(listener, stop_rx));
        Ok(Served { runtime, stop, task, addr: bound })
    }

    /// Run a future on this server's runtime from outside it.
    pub fn block_on<F: Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    /// Stop accepting, give open requests `grace`, then shut the runtime down and join it.
    pub fn stop(self, grace: Duration) {
        self.stop_with(grace, None::<std::future::Ready<()>>);
    }

    /// Stop as `stop` does, then run `last` on the runtime (bounded to a few seconds) before it is
    /// shut down: what a server must give back once no request runs any more.
    pub fn stop_with<F: Future<Output = ()>>(self, grace: Duration, last: Option<F>) {
        let _ = self.stop.send(Some(grace));
        let task = self.task;
        self.runtime.block_on(async move {
            let _ = tokio::time::timeout(grace + Duration::from_secs(1), task).await;
            if let Some(last) = last {
                let _ = tokio::time::timeout(Duration::from_secs(3), last).await;
            }
        });
        self.runtime.shutdown_timeout(Duration::from_secs(2));
    }
}
