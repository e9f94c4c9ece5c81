//! The accept loop: TCP_NODELAY (a token per write must not wait for Nagle), HTTP/1.1 and h2 on
//! one port, a header-read timeout, a connection cap far above any benchmark, graceful drain on
//! stop. Each connection carries an `Abort` switch its handler finds in the request extensions.

use std::convert::Infallible;
use std::future::Future;
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

use super::abort::{Abort, AbortableStream};

/// Open connections at most; beyond it, accepting waits for one to close.
const MAX_CONNECTIONS: usize = 100_000;
const MAX_H2_STREAMS: u32 = 100_000;
/// Time allowed for a request's head to arrive once its first byte did.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

fn builder() -> auto::Builder<TokioExecutor> {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(HEADER_READ_TIMEOUT).keep_alive(true);
    builder.http2().timer(TokioTimer::new()).max_concurrent_streams(MAX_H2_STREAMS);
    builder
}

/// Serve until `stop` carries a grace period; then stop accepting, let open requests finish
/// within the grace, and return (connections still open are dropped with the runtime).
pub async fn serve<H, Fut, B>(listener: TcpListener, handler: H, mut stop: watch::Receiver<Option<Duration>>)
where
    H: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Response<B>, Infallible>> + Send + 'static,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let builder = builder();
    let graceful = GracefulShutdown::new();
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            permit = permits.clone().acquire_owned() => match permit {
                Ok(permit) => tokio::select! {
                    accepted = listener.accept() => accepted.map(|pair| (pair, permit)),
                    _ = stop.changed() => break,
                },
                Err(_) => break,
            },
            _ = stop.changed() => break,
        };
        let ((stream, _peer), permit) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // EMFILE and friends: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let abort = Abort::default();
        let service = {
            let (handler, abort) = (handler.clone(), abort.clone());
            service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(abort.clone());
                handler(req)
            })
        };
        let io = TokioIo::new(AbortableStream::new(stream, abort));
        let connection = graceful.watch(builder.serve_connection(io, service).into_owned());
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
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
