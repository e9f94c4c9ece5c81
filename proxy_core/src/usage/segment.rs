//! One segment file of the usage journal, and its records.
//!
//! Record: `len: u32 LE | crc32(kind ++ payload): u32 LE | kind: u8 | payload` (JSON). A segment is
//! opened for appending (`O_APPEND`): each record is one `write` at the end of the file, so the
//! kernel keeps records whole and in one order whatever thread writes them, with no lock of ours.
//! A writer counts itself in `writers` for the length of its write; rotation seals a segment and
//! waits for those writers, so that nothing is written to a segment after its last sync.

use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use crate::private_fs;

pub const KIND_BEGIN: u8 = 1;
pub const KIND_END: u8 = 2;
/// What a streaming request had relayed so far (its latest one supersedes the earlier ones).
pub const KIND_PROGRESS: u8 = 3;
pub const HEADER: usize = 9;

pub fn segment_name(id: u64) -> String {
    format!("usage-{id:020}.log")
}

pub fn segment_id(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.strip_prefix("usage-")?.strip_suffix(".log")?.parse().ok()
}

pub fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(payload);
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&hasher.finalize().to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
    out
}

/// Records of one segment file, up to the first damaged one (and where that was).
pub fn decode(data: &[u8]) -> (Vec<(u8, &[u8])>, usize) {
    let mut records = Vec::new();
    let mut at = 0;
    while data.len() - at >= HEADER {
        let len = u32::from_le_bytes([data[at], data[at + 1], data[at + 2], data[at + 3]]) as usize;
        let crc = u32::from_le_bytes([data[at + 4], data[at + 5], data[at + 6], data[at + 7]]);
        let kind = data[at + 8];
        let Some(payload) = data.get(at + HEADER..at + HEADER + len) else {
            break;
        };
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&[kind]);
        hasher.update(payload);
        if hasher.finalize() != crc || !matches!(kind, KIND_BEGIN | KIND_END | KIND_PROGRESS) {
            break;
        }
        records.push((kind, payload));
        at += HEADER + len;
    }
    (records, at)
}

pub fn open_file(dir: &Path, id: u64) -> io::Result<File> {
    private_fs::options().create(true).append(true).open(dir.join(segment_name(id)))
}

pub struct Segment {
    pub id: u64,
    file: File,
    /// Bytes appended by finished writes.
    written: AtomicU64,
    /// Bytes known durable (set by the syncer).
    synced: AtomicU64,
    /// Writes under way.
    writers: AtomicUsize,
    /// No write starts on a sealed segment; rotation seals the old one.
    sealed: AtomicBool,
    /// Records in it still needed at a replay: begin records whose request has not ended, and
    /// the latest progress record of each of those requests.
    open: AtomicU64,
    /// The highest sequence number of an end record in it.
    last_end_seq: AtomicU64,
}

impl Segment {
    pub fn new(id: u64, file: File, last_end_seq: u64) -> Self {
        Self {
            id,
            file,
            written: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            writers: AtomicUsize::new(0),
            sealed: AtomicBool::new(false),
            open: AtomicU64::new(0),
            last_end_seq: AtomicU64::new(last_end_seq),
        }
    }

    /// A replayed segment: complete, durable, read only.
    pub fn replayed(id: u64, file: File, last_end_seq: u64) -> Self {
        let segment = Self::new(id, file, last_end_seq);
        segment.sealed.store(true, Ordering::Release);
        segment
    }

    /// Append `record`; `note` runs first (inside the write's window, so that rotation and
    /// pruning see its bookkeeping). `Ok(false)`: the segment is sealed, try the current one.
    pub fn append(&self, record: &[u8], note: impl FnOnce(&Segment)) -> io::Result<bool> {
        self.writers.fetch_add(1, Ordering::SeqCst);
        if self.sealed.load(Ordering::SeqCst) {
            self.writers.fetch_sub(1, Ordering::SeqCst);
            return Ok(false);
        }
        note(self);
        let result = (&self.file).write_all(record);
        if result.is_ok() {
            self.written.fetch_add(record.len() as u64, Ordering::Release);
        }
        self.writers.fetch_sub(1, Ordering::SeqCst);
        result.map(|()| true)
    }

    /// No write starts from now on; returns once those under way have finished.
    pub fn seal(&self) {
        self.sealed.store(true, Ordering::SeqCst);
        while self.writers.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }

    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    pub fn is_sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }

    /// Make what was written before this call durable.
    pub fn sync(&self) -> io::Result<()> {
        let written = self.written();
        if self.synced.load(Ordering::Acquire) >= written {
            return Ok(());
        }
        self.file.sync_data()?;
        self.synced.fetch_max(written, Ordering::AcqRel);
        Ok(())
    }

    pub fn needs_sync(&self) -> bool {
        self.synced.load(Ordering::Acquire) < self.written()
    }

    pub fn hold(&self) {
        self.open.fetch_add(1, Ordering::AcqRel);
    }

    pub fn release(&self) {
        let _ = self.open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| Some(n.saturating_sub(1)));
    }

    pub fn ended(&self, seq: u64) {
        self.last_end_seq.fetch_max(seq, Ordering::AcqRel);
    }

    /// Nothing in it is needed any more: sealed, written by no one, every begin ended and every
    /// end acknowledged.
    pub fn finished(&self, acked: u64) -> bool {
        self.is_sealed()
            && self.writers.load(Ordering::SeqCst) == 0
            && self.open.load(Ordering::Acquire) == 0
            && self.last_end_seq.load(Ordering::Acquire) <= acked
    }
}
