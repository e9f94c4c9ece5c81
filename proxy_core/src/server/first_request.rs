//! A deadline from accept to a connection's first request.
//!
//! hyper's header-read timeout starts only once the HTTP/1-or-2 detection in front of it has
//! seen enough bytes, and that detection waits for ever: a socket that never sends a byte (or
//! sends one and stops) would hold its connection permit for good, with no key needed. This
//! wrapper drops the connection (closing the socket) if no request reached the service within
//! the deadline; after the first request, hyper's own timeouts take over. On a TLS port the
//! handshake comes first and spends from the same deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
#[cfg(test)]
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::time::Sleep;

/// Set by the service when a request arrives.
#[derive(Clone, Default)]
pub struct Started(Arc<AtomicBool>);

impl Started {
    pub fn mark(&self) {
        if !self.0.load(Ordering::Relaxed) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The connection timed out before its first request.
#[derive(Debug)]
pub struct NoRequestInTime;

pin_project! {
    pub struct FirstRequestDeadline<F> {
        #[pin]
        connection: F,
        started: Started,
        // `None` once a request arrived: the timer is no longer polled or kept.
        deadline: Option<Pin<Box<Sleep>>>,
    }
}

impl<F> FirstRequestDeadline<F> {
    #[cfg(test)]
    pub fn new(connection: F, started: Started, within: Duration) -> Self {
        Self::until(connection, started, tokio::time::Instant::now() + within)
    }

    /// The deadline as an instant: a TLS handshake before the connection spent from it already.
    pub fn until(connection: F, started: Started, deadline: tokio::time::Instant) -> Self {
        Self { connection, started, deadline: Some(Box::pin(tokio::time::sleep_until(deadline))) }
    }
}

impl<F: Future> Future for FirstRequestDeadline<F> {
    type Output = Result<F::Output, NoRequestInTime>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.connection.poll(cx) {
            return Poll::Ready(Ok(out));
        }
        if this.started.is_set() {
            *this.deadline = None;
        }
        match this.deadline.as_mut().map(|deadline| deadline.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Err(NoRequestInTime)),
            _ => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_without_a_request_ends_at_the_deadline() {
        let started = Started::default();
        let silent = std::future::pending::<()>();
        let out = FirstRequestDeadline::new(silent, started, Duration::from_secs(5)).await;
        assert!(out.is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn after_the_first_request_the_connection_may_live_on() {
        let started = Started::default();
        let marker = started.clone();
        let connection = async move {
            tokio::time::sleep(Duration::from_secs(1)).await;
            marker.mark();
            tokio::time::sleep(Duration::from_secs(60)).await;
            7
        };
        let out = FirstRequestDeadline::new(connection, started, Duration::from_secs(5)).await;
        assert_eq!(out.ok(), Some(7));
    }
}
