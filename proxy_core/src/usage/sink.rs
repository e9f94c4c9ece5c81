//! Hand-off of usage events from the request path to the control plane's drainer, with no lock.
//!
//! On the request path an event takes the next sequence number (one atomic add), is appended to
//! the journal by the request's own thread (page cache; `journal.rs`), and is pushed onto the
//! `pending` ring. The syncer thread takes a batch off the ring, makes the journal durable with
//! one `fdatasync`, and moves the batch to the `ready` ring in sequence order (a number taken
//! but not pushed yet holds back the ones after it until it arrives), so that the control
//! plane's acknowledgement of "everything up to `seq`" is always true of what it was handed.
//! Without a journal (tests, embedded use) events are handed out from `pending` directly.
//!
//! Nothing on the request path waits: admission asks `has_room()` first and refuses billable
//! work while too many events wait for acknowledgement, the ring is three quarters full, or the
//! journal cannot be written, so no accepted request's event is ever dropped. A sleeper (the
//! syncer, a drainer) is woken by the one push that finds it asleep: once per batch.

use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use bytes::Bytes;

use super::begin::{interrupted_event, BeginRecord, ProgressRecord};
use super::event::UsageEvent;
use super::journal::{Journal, Ticket};
use super::ring::{PushError, Ring};

/// The pending ring of a journaled sink: events of one commit interval (and of an `fdatasync`
/// that takes long) wait there; 64k of them is two seconds at 30k requests per second.
const JOURNALED_RING: usize = 1 << 16;
/// Without a journal the ring holds every event not yet drained, up to the backlog bound.
const MEMORY_RING_MAX: usize = 1 << 18;
/// How long the syncer sleeps when nothing arrives (begin and progress records written
/// meanwhile are synced then).
const IDLE_SYNC: Duration = Duration::from_secs(1);
/// How many recent events' charges the sink remembers for quota adoption (`charges_after`).
pub const CHARGE_LOG: usize = 1 << 16;

type Entry = (u64, Bytes);

/// Room reserved up front for a progress record's JSON (about 150 bytes), so that encoding it
/// does not grow its buffer step by step.
const PROGRESS_BYTES: usize = 256;

/// What one recorded event charged, for the quotas of its key and tenant: the spend the core
/// knows of before the control plane's ledger has it.
#[derive(Debug)]
pub struct Charge {
    pub seq: u64,
    pub key_id: Arc<str>,
    pub tenant_id: Arc<str>,
    /// Unix seconds at arrival: the quota period the ledger counts the request in.
    pub started_at: f64,
    /// Unix seconds when the request ended (its event was recorded then).
    pub ended_at: f64,
    pub tokens: u64,
    pub cost_micros: u64,
}

/// The syncer's own state: events taken off the ring, ordered, not yet on the ready ring.
struct Syncer {
    /// Taken, not yet covered by a successful sync.
    unsynced: Vec<Entry>,
    /// Synced, waiting for a lower sequence number.
    reorder: BTreeMap<u64, Bytes>,
    next_release: u64,
    /// Released in order, waiting for room on the ready ring.
    overflow: VecDeque<Entry>,
}

pub struct UsageSink {
    journal: Option<Journal>,
    pending: Ring<Entry>,
    ready: Ring<Entry>,
    /// Events found in the journal at start, handed out before any other.
    replayed: Ring<Entry>,
    replayed_seqs: Vec<u64>,
    /// Sequence number of the first event recorded by this process; those below were replayed.
    first_live: u64,
    next_seq: AtomicU64,
    /// Highest sequence number handed out (an acknowledgement never goes past it).
    handed: AtomicU64,
    /// Without a journal: events handed out (they leave on `drain`).
    drained: AtomicU64,
    /// The control plane's acknowledgement (kept without a journal too, for quota adoption).
    acked: AtomicU64,
    /// The charges of the last `CHARGE_LOG` events recorded, by sequence number.
    charges: Box<[ArcSwapOption<Charge>]>,
    capacity: usize,
    /// How long the syncer lets records gather before one `fdatasync` makes them durable.
    sync_interval: Duration,
    failed: AtomicBool,
}

fn ring_size(capacity: usize, journaled: bool) -> usize {
    if journaled {
        JOURNALED_RING
    } else {
        // Room for the whole backlog below the three-quarter mark `has_room` stops at.
        (capacity.saturating_mul(4) / 3 + 1).clamp(1024, MEMORY_RING_MAX)
    }
}

impl UsageSink {
    /// An in-memory sink.
    pub fn new(capacity: usize) -> Self {
        Self::build(capacity.max(1), None, Vec::new(), 1, Duration::ZERO)
    }

    /// A journaled sink in `dir`, replayed: unacknowledged and interrupted events are ready.
    /// Written records are made durable together every `sync_interval` (group commit).
    pub fn with_journal(capacity: usize, dir: &Path, sync_interval: Duration) -> std::io::Result<Self> {
        let (journal, replay) = Journal::open(dir, interrupted_event)?;
        if let Some((first, _)) = replay.events.first() {
            tracing::info!(first_seq = first, "usage journal replayed; events wait for the drainer");
        }
        Ok(Self::build(capacity.max(1), Some(journal), replay.events, replay.next_seq, sync_interval))
    }

    fn build(
        capacity: usize,
        journal: Option<Journal>,
        replay: Vec<Entry>,
        first_live: u64,
        sync_interval: Duration,
    ) -> Self {
        let replayed = Ring::new(replay.len());
        let replayed_seqs: Vec<u64> = replay.iter().map(|(seq, _)| *seq).collect();
        for entry in replay {
            // Sized for all of them; a full ring cannot happen.
            let _ = replayed.push(entry);
        }
        let journaled = journal.is_some();
        Self {
            pending: Ring::new(ring_size(capacity, journaled)),
            ready: Ring::new(if journaled { JOURNALED_RING } else { 2 }),
            replayed,
            replayed_seqs,
            first_live,
            next_seq: AtomicU64::new(first_live),
            handed: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            acked: AtomicU64::new(journal.as_ref().map_or(0, Journal::acked)),
            charges: (0..CHARGE_LOG).map(|_| ArcSwapOption::empty()).collect(),
            journal,
            capacity,
            sync_interval,
            failed: AtomicBool::new(false),
        }
    }

    /// Events not yet acknowledged (being written, waiting to be synced, drained or
    /// acknowledged); without a journal, not yet drained.
    pub fn pending(&self) -> usize {
        let taken = self.next_seq.load(Ordering::Acquire) - self.first_live;
        let Some(journal) = &self.journal else {
            return taken.saturating_sub(self.drained.load(Ordering::Acquire)) as usize;
        };
        let acked = journal.acked();
        let replayed = self.replayed_seqs.len() - self.replayed_seqs.partition_point(|s| *s <= acked);
        let live_acked = if acked >= self.first_live { (acked - self.first_live + 1).min(taken) } else { 0 };
        replayed + (taken - live_acked) as usize
    }

    pub fn journal_failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Whether a new billable request may start. Requests already admitted may push the backlog
    /// past `capacity` (by at most the number in flight); none of their events is dropped.
    pub fn has_room(&self) -> bool {
        let ring = self.pending.capacity();
        !self.journal_failed() && self.pending() < self.capacity && self.pending.len() < ring - ring / 4
    }

    fn journal_error(&self, e: &std::io::Error) {
        if !self.failed.swap(true, Ordering::Relaxed) {
            tracing::error!(error = %e, "usage journal write failed; billable requests are refused until it recovers");
        }
    }

    /// Journal a request's begin record (the journal-less sink keeps nothing).
    pub fn begin(&self, record: impl FnOnce(u64) -> BeginRecord) -> Option<Ticket> {
        let journal = self.journal.as_ref()?;
        let bytes = record(self.next_seq.load(Ordering::Relaxed)).to_json();
        match journal.begin(&bytes) {
            Ok(ticket) => Some(ticket),
            Err(e) => {
                self.journal_error(&e);
                None
            }
        }
    }

    /// Journal what a stream has relayed so far (no `fdatasync`: the next group commit takes
    /// it along; a kill -9 finds it in the page cache).
    pub fn progress(&self, ticket: &mut Ticket, record: &ProgressRecord) {
        let Some(journal) = &self.journal else {
            return;
        };
        let mut bytes = Vec::with_capacity(PROGRESS_BYTES);
        if serde_json::to_writer(&mut bytes, record).is_err() {
            return;
        }
        if let Err(e) = journal.progress(ticket, &bytes) {
            self.journal_error(&e);
        }
    }

    /// The commit interval: progress records are at least this far apart.
    pub fn sync_interval(&self) -> Duration {
        self.sync_interval
    }

    /// Record a request's usage event; returns its JSON when `want_line` (for the access log;
    /// a second handle on the bytes costs an allocation, so only then).
    pub fn record(&self, mut event: UsageEvent, ticket: Option<Ticket>, want_line: bool) -> Option<Bytes> {
        // Every number taken is pushed below: the syncer releases them in order.
        let seq = self.next_seq.fetch_add(1, Ordering::AcqRel);
        event.seq = seq;
        self.charges[seq as usize % CHARGE_LOG].store(Some(Arc::new(Charge {
            seq,
            key_id: event.key_id.clone(),
            tenant_id: event.tenant_id.clone(),
            started_at: event.started_at,
            ended_at: event.started_at + event.duration_ms / 1000.0,
            tokens: event.prompt_tokens + event.completion_tokens,
            cost_micros: event.cost_micros,
        })));
        let bytes = Bytes::from(event.to_json());
        if let Some(journal) = &self.journal {
            if let Err(e) = journal.end(seq, &bytes, ticket) {
                // Still hand it out from memory: losing it now would be worse.
                self.journal_error(&e);
            }
        }
        let line = want_line.then(|| bytes.clone());
        self.push_pending((seq, bytes));
        line
    }

    /// Push onto the pending ring. It has room for the requests in flight when `has_room` last
    /// said yes; should it fill anyway (a stalled syncer), the request waits, it never drops.
    fn push_pending(&self, mut entry: Entry) {
        loop {
            match self.pending.push(entry) {
                Ok(()) => return,
                Err(PushError::Full(back)) => {
                    entry = back;
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(PushError::Closed((seq, _))) => {
                    // Only after the core stopped: the journal holds it for the next start.
                    tracing::warn!(seq, "usage event recorded after the syncer stopped; the journal keeps it");
                    return;
                }
            }
        }
    }

    pub fn is_journaled(&self) -> bool {
        self.journal.is_some()
    }

    /// Bytes this process appended to the journal (0 without one).
    pub fn journal_bytes(&self) -> u64 {
        self.journal.as_ref().map_or(0, Journal::bytes_written)
    }

    /// Up to `max` events (JSON), waiting up to `timeout` for the first. Replayed events all go
    /// before the first live one. One drainer at a time.
    pub fn drain(&self, max: usize, timeout: Duration) -> Vec<Bytes> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut out = Vec::new();
            let mut last = None;
            while out.len() < max {
                let next = match self.replayed.pop() {
                    Some(e) => Some(e),
                    None if !self.replayed.is_empty() => None,
                    None if self.journal.is_some() => self.ready.pop(),
                    None => self.pending.pop(),
                };
                let Some((seq, bytes)) = next else {
                    break;
                };
                last = Some(seq);
                out.push(bytes);
            }
            if let Some(seq) = last {
                self.handed.fetch_max(seq, Ordering::AcqRel);
                if self.journal.is_none() {
                    self.drained.fetch_add(out.len() as u64, Ordering::AcqRel);
                }
                return out;
            }
            let now = Instant::now();
            if now >= deadline {
                return out;
            }
            let source = if self.journal.is_some() { &self.ready } else { &self.pending };
            source.wait(deadline - now);
        }
    }

    /// The control plane has stored every event up to `seq` (never past what it was handed).
    pub fn ack(&self, seq: u64) -> std::io::Result<()> {
        let seq = seq.min(self.handed.load(Ordering::Acquire));
        self.acked.fetch_max(seq, Ordering::AcqRel);
        match &self.journal {
            Some(journal) => journal.ack(seq),
            None => Ok(()),
        }
    }

    /// Every event up to this sequence number is stored by the control plane.
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// How long the oldest event the control plane has not acknowledged has waited, in seconds
    /// (0 when none waits). Read from the charges kept for quota adoption; with more than
    /// `CHARGE_LOG` waiting, the oldest one still remembered gives a lower bound.
    pub fn oldest_pending_age(&self, now_unix: f64) -> f64 {
        if self.pending() == 0 {
            return 0.0;
        }
        let next = self.next_seq.load(Ordering::Acquire);
        let oldest = (self.acked() + 1).max(self.first_live).max(next.saturating_sub(CHARGE_LOG as u64));
        (oldest..next.min(oldest + 64))
            .find_map(|seq| {
                let slot = self.charges[seq as usize % CHARGE_LOG].load();
                slot.as_ref().filter(|c| c.seq == seq).map(|c| (now_unix - c.ended_at).max(0.0))
            })
            .unwrap_or(0.0)
    }

    /// Visit the charges of the recorded events numbered above `seq` (those the ledger may not
    /// have). Returns false when some of them are no longer remembered (more than `CHARGE_LOG`
    /// events recorded since): the visit then covers the most recent ones only.
    pub fn charges_after(&self, seq: u64, mut visit: impl FnMut(&Charge)) -> bool {
        let next = self.next_seq.load(Ordering::Acquire);
        for slot in self.charges.iter() {
            if let Some(charge) = slot.load().as_ref() {
                if charge.seq > seq {
                    visit(charge);
                }
            }
        }
        next.saturating_sub((seq + 1).max(self.first_live)) <= CHARGE_LOG as u64
    }

    /// The syncer's loop: group commit every `sync_interval` while events arrive. Each
    /// `fdatasync` costs the process's CPU (about 150 us here), so a few milliseconds between
    /// them keep it small per request; nothing on the request path waits for it, only the
    /// drainer's next batch does. Returns once `stop_syncer` was called and all is synced.
    pub fn run_syncer(&self) {
        let Some(journal) = &self.journal else {
            return;
        };
        let mut syncer = Syncer {
            unsynced: Vec::new(),
            reorder: BTreeMap::new(),
            next_release: self.first_live,
            overflow: VecDeque::new(),
        };
        loop {
            let stopping = self.pending.is_closed();
            if self.pending.is_empty() && syncer.unsynced.is_empty() && !stopping {
                // Asleep until the first event of the next batch (its push wakes this thread),
                // or soon if released events wait for room on the ready ring.
                let idle = if syncer.overflow.is_empty() {
                    IDLE_SYNC
                } else {
                    self.sync_interval.max(Duration::from_millis(1))
                };
                self.pending.wait(idle);
                if self.pending.is_empty() && !self.pending.is_closed() {
                    if journal.dirty() {
                        self.sync_cycle(journal, &mut syncer);
                    }
                    self.release(&mut syncer);
                    continue;
                }
            }
            if !stopping {
                // Let the batch gather: its first event waits one interval at most.
                std::thread::sleep(self.sync_interval);
            }
            self.sync_cycle(journal, &mut syncer);
            if stopping && self.pending.is_empty() && syncer.unsynced.is_empty() {
                return;
            }
        }
    }

    /// Take what is pending, make the journal durable, release in order.
    fn sync_cycle(&self, journal: &Journal, syncer: &mut Syncer) {
        // Every event taken here was written before it was pushed: the sync covers it.
        while let Some(entry) = self.pending.pop() {
            syncer.unsynced.push(entry);
        }
        match journal.sync() {
            Ok(()) => {
                self.failed.store(false, Ordering::Relaxed);
                syncer.reorder.extend(syncer.unsynced.drain(..));
                self.release(syncer);
            }
            Err(e) => self.journal_error(&e),
        }
    }

    fn release(&self, syncer: &mut Syncer) {
        while let Some(bytes) = syncer.reorder.remove(&syncer.next_release) {
            syncer.overflow.push_back((syncer.next_release, bytes));
            syncer.next_release += 1;
        }
        while let Some(entry) = syncer.overflow.pop_front() {
            if let Err(PushError::Full(entry) | PushError::Closed(entry)) = self.ready.push(entry) {
                syncer.overflow.push_front(entry);
                return;
            }
        }
    }

    pub fn stop_syncer(&self) {
        self.pending.close();
    }
}
