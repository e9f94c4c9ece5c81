//! A server on its own tokio runtime: started and stopped from any thread (Python calls these
//! with the GIL released), joined completely on stop so no thread outlives it.

use std::future::Future;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::runtime::{Runtime, RuntimeFlavor};
use tokio::sync::{oneshot, watch};

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
///
/// One worker gets tokio's single-threaded scheduler, driven by a thread of the server's own
/// (`Served::start`); more get the multi-threaded one, whose workers steal from each other. With
/// one worker there is nothing to steal from, and the multi-threaded scheduler's hand-offs cost
/// the data plane about a sixth of its CPU per request (bench/README.md, 2026-12-07).
pub fn build_runtime(workers: usize, thread_name: &str, slice: Option<Duration>) -> Result<Runtime, StartError> {
    let mut builder = if single_threaded(workers) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut builder = tokio::runtime::Builder::new_multi_thread();
        if workers > 0 {
            builder.worker_threads(workers);
        }
        builder
    };
    // The thread name and slice also reach the blocking pool's threads.
    builder.enable_all().thread_name(thread_name);
    if let Some(slice) = slice {
        builder.on_thread_start(move || crate::sched::set_thread_slice(slice));
    }
    builder.build().map_err(StartError::Runtime)
}

/// Whether `workers` (0: one per CPU) means one worker thread.
fn single_threaded(workers: usize) -> bool {
    let workers = match workers {
        0 => std::thread::available_parallelism().map_or(1, usize::from),
        n => n,
    };
    workers == 1
}

/// The thread that drives a single-threaded runtime: it runs the runtime's tasks until told to
/// let go, which `Served::stop_with` does once the server has ended (or until the `Served` is
/// dropped).
struct Driver {
    let_go: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Driver {
    fn spawn(runtime: Arc<Runtime>, name: &str, slice: Option<Duration>) -> std::io::Result<Driver> {
        let (let_go, told) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new().name(name.to_owned()).spawn(move || {
            if let Some(slice) = slice {
                crate::sched::set_thread_slice(slice);
            }
            runtime.block_on(async move {
                let _ = told.await;
            });
        })?;
        Ok(Driver { let_go, thread })
    }

    fn let_go(self) {
        let _ = self.let_go.send(());
        let _ = self.thread.join();
    }
}

pub struct Served {
    runtime: Arc<Runtime>,
    /// With one worker, the thread that drives the runtime.
    driver: Option<Driver>,
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
        let runtime = Arc::new(build_runtime(workers, thread_name, slice)?);
        let bind_error = |source| StartError::Bind { addr, source };
        let std_listener = server::bind(addr).map_err(bind_error)?;
        let bound = std_listener.local_addr().map_err(bind_error)?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(std_listener).map_err(bind_error)?
        };
        let (stop, stop_rx) = watch::channel(None);
        let task = runtime.spawn(serve(listener, stop_rx));
        let driver = if runtime.handle().runtime_flavor() == RuntimeFlavor::CurrentThread {
            Some(Driver::spawn(runtime.clone(), thread_name, slice).map_err(StartError::Runtime)?)
        } else {
            None
        };
        Ok(Served { runtime, driver, stop, task, addr: bound })
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
        // On a single-threaded runtime this future is polled here while the driver runs the
        // tasks, which is why the driver lets go only after it.
        self.runtime.block_on(async move {
            let _ = tokio::time::timeout(grace + Duration::from_secs(1), task).await;
            if let Some(last) = last {
                let _ = tokio::time::timeout(Duration::from_secs(3), last).await;
            }
        });
        if let Some(driver) = self.driver {
            driver.let_go();
        }
        // The driver, joined above, held the only other reference.
        if let Ok(runtime) = Arc::try_unwrap(self.runtime) {
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::sync::atomic::{AtomicBool, Ordering};
    use tokio::io::AsyncWriteExt;

    /// Threads of this process whose name is `name`.
    fn threads_named(name: &str) -> usize {
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
        tasks
            .filter_map(Result::ok)
            .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| comm.trim() == name))
            .count()
    }

    /// Wait up to two seconds for `count` threads named `name`; how many there are then.
    fn wait_for_threads(name: &str, count: usize) -> usize {
        let deadline = std::time::Instant::now() + Duration::from_secs(2);
        while threads_named(name) != count && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        threads_named(name)
    }

    /// A server that greets each connection, started with `workers` and stopped with a last
    /// step: it serves on a thread per worker, runs the last step, leaves no thread behind, and
    /// its runtime's flavour is returned.
    fn serve_and_stop(workers: usize, name: &str) -> RuntimeFlavor {
        let flavor = Arc::new(std::sync::Mutex::new(None));
        let seen = flavor.clone();
        let served = Served::start(workers, name, None, "127.0.0.1:0", |listener, mut stop| async move {
            *seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(tokio::runtime::Handle::current().runtime_flavor());
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((mut socket, _)) = accepted {
                            tokio::spawn(async move { let _ = socket.write_all(b"hi").await; });
                        }
                    }
                    _ = stop.wait_for(Option::is_some) => return,
                }
            }
        })
        .expect("a server on a fresh runtime starts");
        for _ in 0..3 {
            let mut greeting = String::new();
            let mut client = std::net::TcpStream::connect(served.addr).expect("the server accepts");
            client.read_to_string(&mut greeting).expect("the greeting arrives");
            assert_eq!(greeting, "hi");
        }
        assert_eq!(wait_for_threads(name, workers), workers, "a thread per worker");
        let last_ran = Arc::new(AtomicBool::new(false));
        let flag = last_ran.clone();
        served.stop_with(Duration::from_secs(1), Some(async move { flag.store(true, Ordering::SeqCst) }));
        assert!(last_ran.load(Ordering::SeqCst), "the last step runs before the runtime is shut down");
        // A joined thread leaves /proc a moment after its join returns.
        assert_eq!(wait_for_threads(name, 0), 0, "no thread outlives the stop");
        let flavor = flavor.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        flavor.expect("the server ran")
    }

    #[test]
    fn one_worker_is_a_single_threaded_runtime_on_a_thread_joined_on_stop() {
        assert_eq!(serve_and_stop(1, "sg-rt-one"), RuntimeFlavor::CurrentThread);
    }

    #[test]
    fn several_workers_share_the_multi_threaded_scheduler_and_are_joined_on_stop() {
        assert_eq!(serve_and_stop(2, "sg-rt-two"), RuntimeFlavor::MultiThread);
    }

    #[test]
    fn one_worker_per_cpu_on_one_cpu_is_single_threaded() {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(single_threaded(0), cpus == 1);
        assert!(single_threaded(1));
        assert!(!single_threaded(3));
    }
}
