//! Hand-off of usage events from the request path to the control plane's drainer.
//!
//! With a journal, an event is written to it (page cache, under the sink's lock so sequence
//! numbers, file order and queue order agree), becomes *ready* once the syncer has made it
//! durable, is *handed out* by `drain`, and is forgotten when the control plane acknowledges it
//! (`ack`) after its database commit. Without a journal (tests, embedded use) events are ready at
//! once and leave on `drain`.
//!
//! The request path never blocks here beyond that short lock: admission asks `has_room()` first
//! and refuses billable work while too many events wait for acknowledgement or the journal
//! cannot be written, so no accepted request's event is ever dropped.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::begin::{interrupted_event, BeginRecord};
use super::event::UsageEvent;
use super::journal::{Journal, Ticket};

#[derive(Default)]
struct Queues {
    next_seq: u64,
    /// Written to the journal, not yet synced.
    pending: VecDeque<(u64, Bytes)>,
    /// Durable (or journal-less), not yet handed out.
    ready: VecDeque<(u64, Bytes)>,
    /// Handed out, not yet acknowledged.
    handed: VecDeque<u64>,
}

impl Queues {
    fn unacked(&self) -> usize {
        self.pending.len() + self.ready.len() + self.handed.len()
    }
}

pub struct UsageSink {
    journal: Option<Journal>,
    queues: Mutex<Queues>,
    /// Signals the syncer (new pending events) and drainers (new ready events).
    changed: Condvar,
    capacity: usize,
    /// How long the syncer lets records gather before one `fdatasync` makes them durable.
    sync_interval: Duration,
    failed: AtomicBool,
    stopping: AtomicBool,
}

impl UsageSink {
    /// An in-memory sink.
    pub fn new(capacity: usize) -> Self {
        Self {
            journal: None,
            queues: Mutex::new(Queues { next_seq: 1, ..Queues::default() }),
            changed: Condvar::new(),
            capacity: capacity.max(1),
            sync_interval: Duration::ZERO,
            failed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        }
    }

    /// A journaled sink in `dir`, replayed: unacknowledged and interrupted events are ready.
    /// Written records are made durable together every `sync_interval` (group commit).
    pub fn with_journal(capacity: usize, dir: &Path, sync_interval: Duration) -> std::io::Result<Self> {
        let (journal, replay) = Journal::open(dir, interrupted_event)?;
        let sink = Self::new(capacity);
        {
            let mut q = sink.lock();
            q.next_seq = replay.next_seq;
            q.ready.extend(replay.events);
        }
        if let Some(first) = sink.lock().ready.front() {
            tracing::info!(first_seq = first.0, "usage journal replayed; events wait for the drainer");
        }
        Ok(Self { journal: Some(journal), sync_interval, ..sink })
    }

    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Events not yet acknowledged (waiting to be synced, drained or acknowledged).
    pub fn pending(&self) -> usize {
        self.lock().unacked()
    }

    pub fn journal_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Whether a new billable request may start. Requests already admitted may push the backlog
    /// past `capacity` (by at most the number in flight); none of their events is dropped.
    pub fn has_room(&self) -> bool {
        !self.journal_failed() && self.pending() < self.capacity
    }

    fn journal_error(&self, e: &std::io::Error) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            tracing::error!(error = %e, "usage journal write failed; billable requests are refused until it recovers");
        }
    }

    /// Journal a request's begin record (the journal-less sink keeps nothing).
    pub fn begin(&self, record: impl FnOnce(u64) -> BeginRecord) -> Option<Ticket> {
        let journal = self.journal.as_ref()?;
        let mut q = self.lock();
        let seq = q.next_seq;
        q.next_seq += 1;
        let bytes = serde_json::to_vec(&record(seq)).ok()?;
        match journal.begin(seq, &bytes) {
            Ok(ticket) => Some(ticket),
            Err(e) => {
                drop(q);
                self.journal_error(&e);
                None
            }
        }
    }

    /// Record a request's usage event; returns its JSON (for the access log).
    pub fn record(&self, mut event: UsageEvent, ticket: Option<Ticket>) -> Option<Bytes> {
        let mut q = self.lock();
        let seq = q.next_seq;
        q.next_seq += 1;
        event.seq = seq;
        let bytes = match serde_json::to_vec(&event) {
            Ok(b) => Bytes::from(b),
            Err(e) => {
                tracing::error!(error = %e, request_id = %event.request_id, "usage event could not be encoded");
                return None;
            }
        };
        let line = bytes.clone();
        let first = match &self.journal {
            Some(journal) => {
                if let Err(e) = journal.end(seq, &bytes, ticket) {
                    // Still hand it out from memory: losing it now would be worse.
                    self.journal_error(&e);
                }
                let first = q.pending.is_empty();
                q.pending.push_back((seq, bytes));
                first
            }
            None => {
                let first = q.ready.is_empty();
                q.ready.push_back((seq, bytes));
                first
            }
        };
        drop(q);
        // Only the first event of a batch wakes anyone: the syncer sleeps only while nothing is
        // pending, a drainer waits only while nothing is ready. A wake-up per event would cost
        // the data plane a futex call and a context switch per request.
        if first {
            self.changed.notify_all();
        }
        Some(line)
    }

    /// Make written events durable and ready. Called by the syncer thread.
    pub fn sync_once(&self) {
        let Some(journal) = &self.journal else {
            return;
        };
        let n = self.lock().pending.len();
        if n == 0 {
            return;
        }
        match journal.sync() {
            Ok(()) => {
                self.failed.store(false, Ordering::Relaxed);
                let mut q = self.lock();
                let synced: Vec<_> = q.pending.drain(..n).collect();
                q.ready.extend(synced);
                drop(q);
                self.changed.notify_all();
            }
            Err(e) => self.journal_error(&e),
        }
    }

    /// The syncer's loop: group commit every `sync_interval` while events arrive. Each
    /// `fdatasync` costs the process's CPU (about 150 us here), so a few milliseconds between
    /// them keep it small per request; nothing on the request path waits for it, only the
    /// drainer's next batch does.
    pub fn run_syncer(&self) {
        while !self.stopping.load(Ordering::Relaxed) {
            let idle = {
                let q = self.lock();
                if q.pending.is_empty() {
                    // Woken by the first event written (or to stop); the timeout only re-checks.
                    let (q, _) =
                        self.changed.wait_timeout(q, Duration::from_millis(50)).unwrap_or_else(PoisonError::into_inner);
                    q.pending.is_empty()
                } else {
                    false
                }
            };
            if !idle {
                // Let the batch gather: the first event of it waits one interval at most.
                std::thread::sleep(self.sync_interval);
                self.sync_once();
            }
        }
        self.sync_once();
    }

    pub fn stop_syncer(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.changed.notify_all();
    }

    pub fn is_journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Up to `max` ready events (JSON), waiting up to `timeout` for the first.
    pub fn drain(&self, max: usize, timeout: Duration) -> Vec<Bytes> {
        let deadline = Instant::now() + timeout;
        let mut q = self.lock();
        while q.ready.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return Vec::new();
            }
            q = self.changed.wait_timeout(q, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
        let n = max.min(q.ready.len());
        let taken: Vec<(u64, Bytes)> = q.ready.drain(..n).collect();
        if self.journal.is_some() {
            q.handed.extend(taken.iter().map(|(seq, _)| *seq));
        }
        taken.into_iter().map(|(_, bytes)| bytes).collect()
    }

    /// The control plane has stored every event up to `seq`.
    pub fn ack(&self, seq: u64) -> std::io::Result<()> {
        {
            let mut q = self.lock();
            while q.handed.front().is_some_and(|s| *s <= seq) {
                q.handed.pop_front();
            }
        }
        match &self.journal {
            Some(journal) => journal.ack(seq),
            None => Ok(()),
        }
    }
}
