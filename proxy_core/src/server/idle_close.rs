//! Closing a connection that has nothing left to answer once the server stops.
//!
//! hyper's graceful shutdown of an HTTP/2 connection sends GOAWAY and a PING, and closes only
//! after the client acknowledges that PING. A client that does not read its idle connection (a
//! synchronous SDK's pooled connection between calls, a stuck peer) never acknowledges it, so
//! the connection, and with it the whole stop, waited for the grace period with no request in
//! flight. HTTP/1.1 closes an idle connection at once; what it needs is only that a request in
//! flight is never cut.
//!
//! So each connection counts its requests from the moment the handler is called until the
//! response body is done with (sent, or dropped by a reset). Once the server stops and the count
//! is zero, the client gets `CLOSE_WAIT` to take the GOAWAY and close cleanly; if the count is
//! still zero then, the connection is dropped.
//!
//! What it costs a request: two uncontended atomic operations on the count, and one relaxed
//! load of the stopping flag each time the connection is polled. The stop is not awaited (a
//! `watch` or `Notify` would take its waiters' lock at every poll of every connection): the
//! graceful shutdown that follows the flag wakes every connection, and a stopping connection
//! then looks at its count on a timer of its own, once each `CLOSE_WAIT`: a connection whose
//! answers end closes by itself (HTTP/1.1, and HTTP/2 with a client that reads), so the timer
//! serves only the silent HTTP/2 client, and 10,000 streams in flight at a stop cost 10,000
//! wake-ups a second, not fifty times that.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::Sleep;

/// How long a connection without requests in flight is given, after the stop, to close itself
/// (a client that reads acknowledges the PING within a round trip, then hyper closes); also how
/// often a stopping connection with requests in flight looks at its count again.
pub const CLOSE_WAIT: Duration = Duration::from_secs(1);

/// The requests of one connection whose answers are not done yet.
#[derive(Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    /// Counts one request until the returned guard is dropped.
    pub fn begin(&self) -> Answering {
        self.0.fetch_add(1, Ordering::Relaxed);
        Answering(self.0.clone())
    }

    fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

/// One request counted in flight; dropped with the response body (or the handler's future).
pub struct Answering(Arc<AtomicUsize>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A response body that keeps its request counted until hyper is done with it.
pub struct CountedBody<B> {
    body: B,
    _answering: Answering,
}

impl<B> CountedBody<B> {
    pub fn new(body: B, answering: Answering) -> Self {
        Self { body, _answering: answering }
    }
}

impl<B> Body for CountedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Set by the accept loop when it stops, before the graceful shutdown wakes the connections.
#[derive(Clone, Default)]
pub struct Stopping(Arc<AtomicBool>);

impl Stopping {
    pub fn set(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    fn is_set(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// What a stopping connection waits for.
enum Wait {
    /// Not armed yet.
    None,
    /// Nothing was in flight when this began: the connection's `CLOSE_WAIT`.
    Idle(Pin<Box<Sleep>>),
    /// Requests were in flight: look again after `close_wait`.
    Busy(Pin<Box<Sleep>>),
}

pin_project! {
    /// A connection that ends on its own, or is dropped once the server stopped and it has had
    /// nothing in flight for `close_wait` (then `None`).
    pub struct CloseWhenIdle<F> {
        #[pin]
        connection: F,
        stopping: Stopping,
        in_flight: InFlight,
        close_wait: Duration,
        wait: Wait,
    }
}

impl<F> CloseWhenIdle<F> {
    pub fn new(connection: F, stopping: Stopping, in_flight: InFlight, close_wait: Duration) -> Self {
        Self { connection, stopping, in_flight, close_wait, wait: Wait::None }
    }
}

impl<F: Future> Future for CloseWhenIdle<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(out) = this.connection.poll(cx) {
            return Poll::Ready(Some(out));
        }
        if !this.stopping.is_set() {
            return Poll::Pending;
        }
        loop {
            let sleep = match this.wait {
                Wait::None if this.in_flight.count() == 0 => {
                    *this.wait = Wait::Idle(Box::pin(tokio::time::sleep(*this.close_wait)));
                    continue;
                }
                Wait::None => {
                    *this.wait = Wait::Busy(Box::pin(tokio::time::sleep(*this.close_wait)));
                    continue;
                }
                Wait::Idle(sleep) | Wait::Busy(sleep) => sleep,
            };
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            if matches!(this.wait, Wait::Idle(_)) && this.in_flight.count() == 0 {
                return Poll::Ready(None);
            }
            // A request came within the close wait, or some are still in flight: wait again.
            *this.wait = Wait::None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use std::sync::Mutex;
    use std::task::Waker;

    /// A connection that never ends but can be woken, as hyper's graceful shutdown wakes one.
    #[derive(Clone, Default)]
    struct Connection(Arc<Mutex<Option<Waker>>>);

    impl Connection {
        fn wake(&self) {
            if let Some(waker) = self.0.lock().expect("not poisoned").take() {
                waker.wake();
            }
        }
    }

    impl Future for Connection {
        type Output = ();

        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            *self.0.lock().expect("not poisoned") = Some(cx.waker().clone());
            Poll::Pending
        }
    }

    fn stop(stopping: &Stopping, connection: &Connection) {
        stopping.set();
        connection.wake();
    }

    #[tokio::test(start_paused = true)]
    async fn waits_for_the_stop_then_for_the_answers_in_flight_then_for_the_close_wait() {
        let (connection, stopping, in_flight) = (Connection::default(), Stopping::default(), InFlight::default());
        let answering = in_flight.begin();
        let started = tokio::time::Instant::now();
        let watched = CloseWhenIdle::new(connection.clone(), stopping.clone(), in_flight.clone(), CLOSE_WAIT);
        let done = tokio::spawn(watched);
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert!(!done.is_finished(), "not before the stop");
        stop(&stopping, &connection);
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!done.is_finished(), "not while an answer is in flight");
        drop(answering);
        assert!(done.await.expect("the wait ends").is_none(), "closed by the wait");
        // The count is looked at each CLOSE_WAIT; once it is zero, a whole CLOSE_WAIT follows.
        let waited = started.elapsed();
        assert!(waited >= Duration::from_secs(15) + CLOSE_WAIT, "{waited:?}");
        assert!(waited <= Duration::from_secs(15) + CLOSE_WAIT * 2 + Duration::from_millis(10), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_arriving_within_the_close_wait_is_waited_for_again() {
        let (connection, stopping, in_flight) = (Connection::default(), Stopping::default(), InFlight::default());
        let done =
            tokio::spawn(CloseWhenIdle::new(connection.clone(), stopping.clone(), in_flight.clone(), CLOSE_WAIT));
        tokio::task::yield_now().await;
        stop(&stopping, &connection);
        tokio::time::sleep(CLOSE_WAIT / 2).await;
        let late = in_flight.begin();
        tokio::time::sleep(CLOSE_WAIT * 3).await;
        assert!(!done.is_finished(), "a request in flight keeps the connection");
        drop(late);
        assert!(done.await.expect("the wait ends").is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_ends_first_gives_its_own_outcome() {
        let stopping = Stopping::default();
        stopping.set();
        let ended = CloseWhenIdle::new(async { 7 }, stopping, InFlight::default(), CLOSE_WAIT);
        assert_eq!(ended.await, Some(7));
    }

    #[tokio::test]
    async fn the_body_keeps_its_request_counted_until_it_is_dropped() {
        let in_flight = InFlight::default();
        let mut body = CountedBody::new(Full::new(Bytes::from_static(b"answer")), in_flight.begin());
        assert_eq!(in_flight.count(), 1);
        let frame = body.frame().await.expect("a frame").expect("no error");
        assert_eq!(frame.into_data().expect("data"), Bytes::from_static(b"answer"));
        assert!(body.is_end_stream());
        assert_eq!(in_flight.count(), 1, "counted until hyper drops the body");
        drop(body);
        assert_eq!(in_flight.count(), 0);
    }
}
