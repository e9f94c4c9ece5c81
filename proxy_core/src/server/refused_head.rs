//! A request head hyper refused, carried from its answer to the connection's owner.
//!
//! hyper answers a head it cannot parse before any handler runs, through the process-wide hook
//! `set_parse_error_answer`, which is told nothing of the connection. So that such a request
//! still reaches the access log under the request id its answer carried, the answer notes what
//! it said in a slot of the task serving the connection (`note`), and `Conn::serve` hands the
//! slot's content to its observer once the connection has ended. A connection ends after its
//! first refused head, so a slot holds at most one.

use std::future::Future;
use std::sync::{Arc, OnceLock};

use crate::error::ErrorKind;

/// What the answer to a refused head said.
#[derive(Debug, Clone)]
pub struct RefusedHead {
    pub request_id: Arc<str>,
    pub kind: ErrorKind,
    /// When it was answered, in Unix seconds.
    pub ts: f64,
}

/// Told of every refused head, after its connection ended.
pub type OnRefusedHead = Arc<dyn Fn(&RefusedHead) + Send + Sync>;

type Slot = Arc<OnceLock<RefusedHead>>;

tokio::task_local! {
    static SLOT: Slot;
}

/// Note the refusal in the slot of the connection this task serves; outside `watch` (the hook
/// called on its own) it goes nowhere.
pub fn note(head: RefusedHead) {
    // A second refusal on one connection cannot happen (hyper closes it after the first); if it
    // did, the first stays.
    let _ = SLOT.try_with(|slot| slot.set(head));
}

/// Serve `connection` so that `note` reaches the slot returned beside it.
pub fn watch<F: Future>(connection: F) -> (impl Future<Output = F::Output>, Slot) {
    let slot = Slot::default();
    (SLOT.scope(slot.clone(), connection), slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(id: &str) -> RefusedHead {
        RefusedHead { request_id: id.into(), kind: ErrorKind::InvalidRequest, ts: 1.0 }
    }

    #[tokio::test]
    async fn a_note_reaches_the_slot_of_its_own_connection_only() {
        let (first, first_slot) = watch(async { note(head("req_a")) });
        let (second, second_slot) = watch(async {});
        let (_, ()) = tokio::join!(first, second);
        assert_eq!(first_slot.get().map(|h| &*h.request_id), Some("req_a"));
        assert!(second_slot.get().is_none());
    }

    #[tokio::test]
    async fn a_note_across_an_await_still_reaches_its_slot() {
        let (connection, slot) = watch(async {
            tokio::task::yield_now().await;
            note(head("req_b"));
            note(head("req_c"));
        });
        tokio::spawn(connection).await.unwrap();
        assert_eq!(slot.get().map(|h| &*h.request_id), Some("req_b"));
    }

    #[test]
    fn a_note_outside_a_connection_goes_nowhere() {
        note(head("req_d"));
    }
}
