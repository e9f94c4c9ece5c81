//! The durable usage journal: append-only segment files of checksummed records.
//!
//! Three kinds of record: a *begin* record, written when a request is about to reach its first
//! upstream; *progress* records while a stream relays (what has gone to the client so far); and
//! the *end* record (the usage event) when it ends. Request handlers append to the current
//! segment themselves, in the page cache (a process killed with -9 loses nothing written), with
//! no lock of ours and no system call: each record is copied into its own range of the segment's
//! memory mapping (`mapped.rs`). The syncer
//! makes them durable with one `fdatasync` per batch (group commit), rolls segments over and
//! deletes those that hold nothing still needed: a segment goes when every end record in it is
//! acknowledged and no begin or latest progress record in it belongs to a request still open.
//!
//! At start the journal is replayed (`replay.rs`): torn records are skipped, end records not yet
//! acknowledged are handed out again (the control plane inserts idempotently by request id), and
//! a begin record without an end (the process died mid-request) becomes an `interrupted` event,
//! billed from its latest progress record.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::segment::{segment_name, Segment, KIND_BEGIN, KIND_END, KIND_PROGRESS};
use crate::private_fs;

/// Segments roll over at about this size; each is allocated (and mapped) at this size when it is
/// created, and grows past it by ordinary writes only when the syncer rolls it over late.
pub const SEGMENT_BYTES: u64 = 16 * 1024 * 1024;
pub const ACK_FILE: &str = "acked";

/// What the journal holds of one request in flight: the segments its begin record and its
/// latest progress record are in (each kept until the request ends).
pub struct Ticket {
    begin: Arc<Segment>,
    progress: Option<Arc<Segment>>,
}

pub struct Journal {
    dir: PathBuf,
    current: ArcSwap<Segment>,
    /// Every segment on disk, oldest first.
    segments: ArcSwap<Vec<Arc<Segment>>>,
    acked: AtomicU64,
    /// Above every sequence number written so far (names the next segment).
    next_seq: AtomicU64,
    /// One `sync` at a time (the syncer's; tests call it directly).
    syncing: AtomicBool,
    /// Bytes of the segments already deleted, for `bytes_written`.
    retired_bytes: AtomicU64,
    /// Held for the journal's lifetime: one process per journal directory.
    _lock: File,
}

impl Journal {
    pub(super) fn new(
        dir: &Path,
        lock: File,
        segments: Vec<Arc<Segment>>,
        acked: u64,
        next_seq: u64,
    ) -> io::Result<Self> {
        let id = segments.iter().map(|s| s.id + 1).max().unwrap_or(1).max(next_seq);
        let current = Arc::new(Segment::create(dir, id, SEGMENT_BYTES as usize)?);
        let mut all = segments;
        all.push(current.clone());
        Ok(Self {
            dir: dir.to_path_buf(),
            current: ArcSwap::new(current),
            segments: ArcSwap::from_pointee(all),
            acked: AtomicU64::new(acked),
            next_seq: AtomicU64::new(next_seq.max(id)),
            syncing: AtomicBool::new(false),
            retired_bytes: AtomicU64::new(0),
            _lock: lock,
        })
    }

    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Acquire)
    }

    /// Append to the current segment (the next one if rotation sealed it meanwhile); `note`
    /// does the record's bookkeeping in the segment it lands in.
    fn append(&self, kind: u8, payload: &[u8], note: impl Fn(&Segment)) -> io::Result<Arc<Segment>> {
        loop {
            let segment = self.current.load_full();
            if segment.append(kind, payload, &note)? {
                return Ok(segment);
            }
        }
    }

    /// Write a request's begin record (the payload carries `seq` and `request_id`).
    pub fn begin(&self, payload: &[u8]) -> io::Result<Ticket> {
        let begin = self.append(KIND_BEGIN, payload, Segment::hold)?;
        Ok(Ticket { begin, progress: None })
    }

    /// Write what a request has relayed so far; it supersedes its earlier progress records.
    pub fn progress(&self, ticket: &mut Ticket, payload: &[u8]) -> io::Result<()> {
        let segment = self.append(KIND_PROGRESS, payload, Segment::hold)?;
        if let Some(earlier) = ticket.progress.replace(segment) {
            earlier.release();
        }
        Ok(())
    }

    /// Write a request's usage event (the payload carries `seq` and `request_id`).
    pub fn end(&self, seq: u64, payload: &[u8], ticket: Option<Ticket>) -> io::Result<()> {
        self.next_seq.fetch_max(seq + 1, Ordering::AcqRel);
        let written = self.append(KIND_END, payload, |segment| segment.ended(seq));
        // A failed write keeps the begin (and progress) records: the event is handed out from
        // memory, and should the process die before it is stored, the replay bills the request
        // from them (the ledger inserts by request id, so never twice).
        if written.is_ok() {
            if let Some(ticket) = ticket {
                ticket.begin.release();
                if let Some(progress) = ticket.progress {
                    progress.release();
                }
            }
        }
        written.map(|_| ())
    }

    /// Roll over to a new segment once the current one is full. Called by the syncer.
    fn rotate(&self) -> io::Result<()> {
        let old = self.current.load_full();
        if old.written() < SEGMENT_BYTES {
            return Ok(());
        }
        let id = self.next_seq.load(Ordering::Acquire).max(old.id + 1);
        let fresh = Arc::new(Segment::create(&self.dir, id, SEGMENT_BYTES as usize)?);
        self.next_seq.fetch_max(id + 1, Ordering::AcqRel);
        self.segments.rcu(|all| {
            let mut all = Vec::clone(all);
            all.push(fresh.clone());
            all
        });
        self.current.store(fresh);
        // Writers that took the old one finish there; the sync below then covers them.
        old.seal();
        Ok(())
    }

    /// Make everything written before this call durable (rolling over first if the current
    /// segment is full). On failure nothing is taken as synced: the next call syncs it all
    /// again. One call at a time; a concurrent one returns at once.
    pub fn sync(&self) -> io::Result<()> {
        if self.syncing.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = self.sync_all();
        self.syncing.store(false, Ordering::Release);
        result
    }

    fn sync_all(&self) -> io::Result<()> {
        self.rotate()?;
        let segments = self.segments.load_full();
        // Sealed ones first: records of a batch may sit in the segment just rotated out.
        for segment in segments.iter().filter(|s| s.is_sealed()) {
            segment.sync()?;
        }
        self.current.load().sync()?;
        self.prune();
        Ok(())
    }

    /// Whether anything written is not durable yet.
    pub fn dirty(&self) -> bool {
        self.segments.load().iter().any(|s| s.needs_sync())
    }

    /// Everything up to `seq` is stored by the control plane: remember it and drop segments
    /// that hold nothing still needed.
    pub fn ack(&self, seq: u64) -> io::Result<()> {
        if self.acked.fetch_max(seq, Ordering::AcqRel) >= seq {
            return Ok(());
        }
        let tmp = self.dir.join(format!("{ACK_FILE}.tmp"));
        private_fs::options()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&tmp)?
            .write_all(seq.to_string().as_bytes())?;
        fs::rename(&tmp, self.dir.join(ACK_FILE))?;
        self.prune();
        Ok(())
    }

    /// Delete the finished segments. The list is replaced by compare-and-swap, so that of two
    /// callers at once each deletes only what its own swap removed.
    fn prune(&self) {
        let acked = self.acked();
        loop {
            let seen = self.segments.load_full();
            let (doomed, kept): (Vec<_>, Vec<_>) = seen.iter().cloned().partition(|s| s.finished(acked));
            if doomed.is_empty() {
                return;
            }
            let before = self.segments.compare_and_swap(&seen, Arc::new(kept));
            if !Arc::ptr_eq(&before, &seen) {
                continue;
            }
            for segment in doomed {
                self.retired_bytes.fetch_add(segment.written(), Ordering::AcqRel);
                if let Err(e) = fs::remove_file(self.dir.join(segment_name(segment.id))) {
                    tracing::warn!(error = %e, segment = segment.id, "usage journal: could not delete a finished segment");
                }
            }
            return;
        }
    }

    /// Bytes appended by this process (records of every kind), for the metrics.
    pub fn bytes_written(&self) -> u64 {
        self.retired_bytes.load(Ordering::Acquire) + self.segments.load().iter().map(|s| s.written()).sum::<u64>()
    }

    /// Segment files on disk.
    #[cfg(test)]
    pub(super) fn segments(&self) -> usize {
        self.segments.load().len()
    }
}
