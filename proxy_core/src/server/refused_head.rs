//! A request head hyper refused, carried from its answer to the connection's observer.
//!
//! hyper answers a head it cannot parse before any handler runs, through the process-wide hook
//! `set_parse_error_answer`, which is told nothing of the connection. So that such a request
//! still reaches the access log and the refusal counts under the request id its answer carried,
//! the task serving each connection holds its observer (`watch`), and the answer tells it what
//! it said (`note`). That happens while the answer is built, before a byte of it is written: a
//! client that has read the answer finds the refusal counted.

use std::future::Future;
use std::sync::Arc;

use crate::error::ErrorKind;

/// What the answer to a refused head said.
#[derive(Debug, Clone)]
pub struct RefusedHead {
    pub request_id: Arc<str>,
    pub kind: ErrorKind,
    /// When it was answered, in Unix seconds.
    pub ts: f64,
}

/// Told of every refused head, as its answer is built.
pub type OnRefusedHead = Arc<dyn Fn(&RefusedHead) + Send + Sync>;

tokio::task_local! {
    static OBSERVER: OnRefusedHead;
}

/// Tell the observer of the connection this task serves; outside `watch` (the hook called on
/// its own) it goes nowhere.
pub fn note(head: &RefusedHead) {
    let _ = OBSERVER.try_with(|observer| observer(head));
}

/// Serve `connection` so that `note` reaches `observer`.
pub fn watch<F: Future>(connection: F, observer: OnRefusedHead) -> impl Future<Output = F::Output> {
    OBSERVER.scope(observer, connection)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    fn head(id: &str) -> RefusedHead {
        RefusedHead { request_id: id.into(), kind: ErrorKind::InvalidRequest, ts: 1.0 }
    }

    /// An observer, and what it was told.
    fn recorder() -> (OnRefusedHead, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let observer: OnRefusedHead = Arc::new(move |h| record.lock().unwrap().push(h.request_id.to_string()));
        (observer, seen)
    }

    #[tokio::test]
    async fn a_note_reaches_the_observer_of_its_own_connection_only() {
        let (first_observer, first) = recorder();
        let (second_observer, second) = recorder();
        let one = watch(async { note(&head("req_a")) }, first_observer);
        let two = watch(async {}, second_observer);
        tokio::join!(one, two);
        assert_eq!(*first.lock().unwrap(), ["req_a"]);
        assert!(second.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_note_across_an_await_reaches_the_observer_at_once() {
        let (observer, seen) = recorder();
        let told = seen.clone();
        let connection = watch(
            async move {
                tokio::task::yield_now().await;
                note(&head("req_b"));
                // Told before the connection goes on (before its answer is written).
                assert_eq!(*told.lock().unwrap(), ["req_b"]);
            },
            observer,
        );
        tokio::spawn(connection).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), ["req_b"]);
    }

    #[test]
    fn a_note_outside_a_connection_goes_nowhere() {
        note(&head("req_d"));
    }
}
