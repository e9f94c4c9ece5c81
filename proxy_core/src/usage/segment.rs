//! One segment file of the usage journal, and its records.
//!
//! Record: `len: u32 LE | crc32(kind ++ payload): u32 LE | kind: u8 | payload` (JSON). A segment
//! is allocated whole when it is created and appended to through a memory mapping (`mapped.rs`):
//! each record gets its own range by one atomic add, with no lock of ours. A writer counts itself
//! in `writers` for the length of its copy; rotation seals a segment and waits for those writers,
//! so that nothing is written to a segment after its last sync.
//!
//! Reading one back, the bytes after the last record are zeros (allocated, never written), and a
//! crash mid-copy leaves a torn range with whole records after it: `decode` skips both.

use std::io;
use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use super::mapped::MappedFile;

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

fn checksum(kind: u8, payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&[kind]);
    hasher.update(payload);
    hasher.finalize()
}

/// The header of a record of `kind` carrying `payload`.
pub fn header(kind: u8, payload: &[u8]) -> [u8; HEADER] {
    let mut out = [0; HEADER];
    out[..4].copy_from_slice(&u32::try_from(payload.len()).unwrap_or(u32::MAX).to_le_bytes());
    out[4..8].copy_from_slice(&checksum(kind, payload).to_le_bytes());
    out[8] = kind;
    out
}

#[cfg(test)]
pub fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
    [&header(kind, payload)[..], payload].concat()
}

/// The record starting at `at`, if a whole one does (an empty payload is never written).
fn record_at(data: &[u8], at: usize) -> Option<(u8, &[u8])> {
    let head = data.get(at..at.checked_add(HEADER)?)?;
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    let kind = head[8];
    if len == 0 || !matches!(kind, KIND_BEGIN | KIND_END | KIND_PROGRESS) {
        return None;
    }
    let payload = data.get(at + HEADER..(at + HEADER).checked_add(len)?)?;
    (checksum(kind, payload) == crc).then_some((kind, payload))
}

/// The first offset at or after `at` where a whole record starts. A record's length field is
/// never all zeros, so a run of zeros is skipped to three bytes before its end.
fn next_record(data: &[u8], mut at: usize) -> Option<usize> {
    while at + HEADER <= data.len() {
        if record_at(data, at).is_some() {
            return Some(at);
        }
        if data[at] == 0 {
            let run = data[at..].iter().position(|b| *b != 0)?;
            at = (at + run).saturating_sub(3).max(at + 1);
        } else {
            at += 1;
        }
    }
    None
}

/// What one segment file holds.
pub struct Decoded<'a> {
    /// Its whole records, in file order.
    pub records: Vec<(u8, &'a [u8])>,
    /// Ranges holding no whole record (torn by a crash mid-copy, or damaged), skipped; the
    /// zeros after the last record are not among them.
    pub damaged: Vec<Range<usize>>,
}

pub fn decode(data: &[u8]) -> Decoded<'_> {
    let mut records = Vec::new();
    let mut damaged = Vec::new();
    let mut at = 0;
    while at < data.len() {
        if let Some((kind, payload)) = record_at(data, at) {
            records.push((kind, payload));
            at += HEADER + payload.len();
            continue;
        }
        match next_record(data, at + 1) {
            Some(next) => {
                damaged.push(at..next);
                at = next;
            }
            None => {
                let end = data.iter().rposition(|b| *b != 0).map_or(at, |last| (last + 1).max(at));
                if end > at {
                    damaged.push(at..end);
                }
                break;
            }
        }
    }
    Decoded { records, damaged }
}

pub struct Segment {
    pub id: u64,
    /// None for a segment found at start: it is read back, never appended to.
    file: Option<MappedFile>,
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
    /// A new segment file in `dir`, of `bytes` allocated, to append to.
    pub fn create(dir: &Path, id: u64, bytes: usize) -> io::Result<Self> {
        let file = MappedFile::create(&dir.join(segment_name(id)), bytes)?;
        Ok(Self::new(id, Some(file), 0))
    }

    fn new(id: u64, file: Option<MappedFile>, last_end_seq: u64) -> Self {
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
    pub fn replayed(id: u64, last_end_seq: u64) -> Self {
        let segment = Self::new(id, None, last_end_seq);
        segment.sealed.store(true, Ordering::Release);
        segment
    }

    /// Append `record`; `note` runs first (inside the write's window, so that rotation and
    /// pruning see its bookkeeping). `Ok(false)`: the segment is sealed, try the current one.
    pub fn append(&self, kind: u8, payload: &[u8], note: impl FnOnce(&Segment)) -> io::Result<bool> {
        self.writers.fetch_add(1, Ordering::SeqCst);
        let Some(file) = self.file.as_ref().filter(|_| !self.sealed.load(Ordering::SeqCst)) else {
            self.writers.fetch_sub(1, Ordering::SeqCst);
            return Ok(false);
        };
        note(self);
        let result = file.append(&header(kind, payload), payload);
        if result.is_ok() {
            self.written.fetch_add((HEADER + payload.len()) as u64, Ordering::Release);
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
        let Some(file) = &self.file else {
            return Ok(());
        };
        if self.synced.load(Ordering::Acquire) < written {
            // Its pages unmapped first: the sync then write-protects none of them one by one
            // (`MappedFile::unmap_below`). A sealed segment takes no more records: all can go.
            file.unmap_below(usize::try_from(written).unwrap_or(usize::MAX), self.is_sealed());
            file.sync_data()?;
            self.synced.fetch_max(written, Ordering::AcqRel);
        }
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
