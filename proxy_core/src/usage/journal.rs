//! The durable usage journal: append-only segment files of checksummed records.
//!
//! Two kinds of record: a *begin* record, written when a request is about to reach its first
//! upstream, and an *end* record (the usage event), written when it ends. Writes go to the page
//! cache under a short lock (a process killed with -9 loses nothing written); a syncer thread
//! makes them durable with one `fdatasync` per batch (group commit) on a duplicate handle, outside
//! the lock. Events are handed to the control plane only once synced, and a segment is deleted
//! only when every end record in it is acknowledged and every begin record in it has its end.
//!
//! At start the journal is replayed: a torn tail is cut off, end records not yet acknowledged are
//! handed out again (the control plane inserts idempotently by request id), and a begin record
//! without an end (the process died mid-request) becomes an `interrupted` event.
//!
//! Record: `len: u32 LE | crc32(kind ++ payload): u32 LE | kind: u8 | payload` (JSON).

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde::Deserialize;

use crate::private_fs;

const KIND_BEGIN: u8 = 1;
const KIND_END: u8 = 2;
const HEADER: usize = 9;
/// Segments roll over at this size.
const SEGMENT_BYTES: u64 = 16 * 1024 * 1024;
const ACK_FILE: &str = "acked";

fn segment_name(id: u64) -> String {
    format!("usage-{id:020}.log")
}

fn segment_id(path: &Path) -> Option<u64> {
    path.file_name()?.to_str()?.strip_prefix("usage-")?.strip_suffix(".log")?.parse().ok()
}

fn encode(kind: u8, payload: &[u8]) -> Vec<u8> {
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
fn decode(data: &[u8]) -> (Vec<(u8, &[u8])>, usize) {
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
        if hasher.finalize() != crc || !matches!(kind, KIND_BEGIN | KIND_END) {
            break;
        }
        records.push((kind, payload));
        at += HEADER + len;
    }
    (records, at)
}

#[derive(Debug, Default, Clone, Copy)]
struct SegmentInfo {
    open_begins: u64,
    last_end_seq: u64,
}

/// Which segment holds a request's begin record.
#[derive(Debug, Clone, Copy)]
pub struct Ticket {
    segment: u64,
}

struct State {
    file: File,
    segment: u64,
    written: u64,
    next_seq: u64,
    segments: BTreeMap<u64, SegmentInfo>,
    /// Rotated-out files not yet synced.
    unsynced: Vec<File>,
    dirty: bool,
    acked: u64,
}

pub struct Journal {
    dir: PathBuf,
    state: Mutex<State>,
    /// Held for the journal's lifetime: one process per journal directory.
    _lock: File,
}

/// What a replay found: events to hand out again in order, and the next sequence number.
pub struct Replay {
    pub events: Vec<(u64, Bytes)>,
    pub next_seq: u64,
}

#[derive(Deserialize)]
struct RequestIdOnly {
    request_id: String,
}

#[derive(Deserialize)]
struct WithSeq {
    seq: u64,
}

fn open_segment(dir: &Path, id: u64) -> io::Result<File> {
    private_fs::options().create(true).append(true).open(dir.join(segment_name(id)))
}

impl Journal {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Open (creating) the journal in `dir` and replay it. `interrupted` turns an unfinished
    /// request's begin record into the usage event that bills it.
    pub fn open(dir: &Path, interrupted: impl Fn(&[u8], u64) -> Option<Vec<u8>>) -> io::Result<(Journal, Replay)> {
        private_fs::create_dir(dir)?;
        let lock = private_fs::options().create(true).truncate(false).write(true).open(dir.join("lock"))?;
        lock.try_lock()
            .map_err(|_| io::Error::new(io::ErrorKind::WouldBlock, "another process holds this usage journal"))?;
        let acked: u64 = fs::read_to_string(dir.join(ACK_FILE)).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        let mut ids: Vec<u64> =
            fs::read_dir(dir)?.filter_map(|e| e.ok()).filter_map(|e| segment_id(&e.path())).collect();
        ids.sort_unstable();
        let mut segments = BTreeMap::new();
        let mut open: HashMap<String, (u64, Vec<u8>)> = HashMap::new();
        let mut ends: Vec<(u64, Bytes)> = Vec::new();
        let mut max_seq = acked;
        for (i, id) in ids.iter().enumerate() {
            let path = dir.join(segment_name(*id));
            private_fs::narrow(&path)?;
            let data = fs::read(&path)?;
            let (records, good) = decode(&data);
            if good < data.len() {
                if i + 1 == ids.len() {
                    tracing::warn!(segment = %path.display(), kept = good, lost = data.len() - good, "usage journal: cut a torn tail");
                    OpenOptions::new().write(true).open(&path)?.set_len(good as u64)?;
                } else {
                    tracing::error!(segment = %path.display(), offset = good, "usage journal: damaged record; the rest of this segment is skipped");
                }
            }
            let mut info = SegmentInfo::default();
            for (kind, payload) in records {
                let Ok(seq) = serde_json::from_slice::<WithSeq>(payload).map(|w| w.seq) else {
                    continue;
                };
                max_seq = max_seq.max(seq);
                let Ok(request) = serde_json::from_slice::<RequestIdOnly>(payload).map(|r| r.request_id) else {
                    continue;
                };
                if kind == KIND_BEGIN {
                    open.insert(request, (*id, payload.to_vec()));
                } else {
                    open.remove(&request);
                    info.last_end_seq = info.last_end_seq.max(seq);
                    if seq > acked {
                        ends.push((seq, Bytes::copy_from_slice(payload)));
                    }
                }
            }
            segments.insert(*id, info);
        }
        let next_id = max_seq + 1;
        let file = open_segment(dir, next_id)?;
        segments.insert(next_id, SegmentInfo::default());
        let journal = Journal {
            _lock: lock,
            dir: dir.to_path_buf(),
            state: Mutex::new(State {
                file,
                segment: next_id,
                written: 0,
                next_seq: next_id,
                segments,
                unsynced: Vec::new(),
                dirty: false,
                acked,
            }),
        };
        ends.sort_by_key(|(seq, _)| *seq);
        let mut orphans: Vec<Vec<u8>> = open.into_values().map(|(_, begin)| begin).collect();
        orphans.sort();
        let mut next_seq = next_id;
        for begin in orphans {
            if let Some(event) = interrupted(&begin, next_seq) {
                journal.append(next_seq, KIND_END, &event, None)?;
                ends.push((next_seq, Bytes::from(event)));
                next_seq += 1;
            }
        }
        journal.sync()?;
        journal.prune();
        Ok((journal, Replay { events: ends, next_seq }))
    }

    /// Append one record; `seq` must grow with each call (the caller serializes them).
    fn append(&self, seq: u64, kind: u8, payload: &[u8], ticket: Option<Ticket>) -> io::Result<u64> {
        let record = encode(kind, payload);
        let mut state = self.lock();
        state.next_seq = state.next_seq.max(seq + 1);
        if state.written >= SEGMENT_BYTES {
            // Roll over: the old file is synced by the syncer before anything later is handed out.
            let id = seq;
            let file = open_segment(&self.dir, id)?;
            let old = std::mem::replace(&mut state.file, file);
            state.unsynced.push(old);
            state.segment = id;
            state.written = 0;
            state.segments.insert(id, SegmentInfo::default());
        }
        state.file.write_all(&record)?;
        state.written += record.len() as u64;
        state.dirty = true;
        let segment = state.segment;
        match kind {
            KIND_BEGIN => {
                if let Some(info) = state.segments.get_mut(&segment) {
                    info.open_begins += 1;
                }
            }
            _ => {
                if let Some(info) = state.segments.get_mut(&segment) {
                    info.last_end_seq = info.last_end_seq.max(seq);
                }
                if let Some(t) = ticket {
                    if let Some(info) = state.segments.get_mut(&t.segment) {
                        info.open_begins = info.open_begins.saturating_sub(1);
                    }
                }
            }
        }
        Ok(segment)
    }

    /// Write a request's begin record (the payload carries `seq` and `request_id`).
    pub fn begin(&self, seq: u64, payload: &[u8]) -> io::Result<Ticket> {
        self.append(seq, KIND_BEGIN, payload, None).map(|segment| Ticket { segment })
    }

    /// Write a request's usage event (the payload carries `seq` and `request_id`).
    pub fn end(&self, seq: u64, payload: &[u8], ticket: Option<Ticket>) -> io::Result<()> {
        self.append(seq, KIND_END, payload, ticket).map(|_| ())
    }

    /// Make everything written before this call durable. On failure nothing is taken as synced:
    /// the next call syncs it all again.
    pub fn sync(&self) -> io::Result<()> {
        let (mut rotated, current) = {
            let mut state = self.lock();
            if !state.dirty && state.unsynced.is_empty() {
                return Ok(());
            }
            let current = state.file.try_clone()?;
            state.dirty = false;
            (std::mem::take(&mut state.unsynced), current)
        };
        let mut result = Ok(());
        while let Some(old) = rotated.first() {
            result = old.sync_data();
            if result.is_err() {
                break;
            }
            rotated.remove(0);
        }
        if result.is_ok() {
            result = current.sync_data();
        }
        if result.is_err() {
            let mut state = self.lock();
            state.dirty = true;
            rotated.append(&mut state.unsynced);
            state.unsynced = rotated;
        }
        result
    }

    /// Everything up to `seq` is stored by the control plane: remember it and drop segments
    /// that hold nothing still needed.
    pub fn ack(&self, seq: u64) -> io::Result<()> {
        {
            let mut state = self.lock();
            if seq <= state.acked {
                return Ok(());
            }
            state.acked = seq;
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

    fn prune(&self) {
        let doomed: Vec<u64> = {
            let mut state = self.lock();
            let (current, acked) = (state.segment, state.acked);
            let doomed: Vec<u64> = state
                .segments
                .iter()
                .filter(|(id, info)| **id != current && info.open_begins == 0 && info.last_end_seq <= acked)
                .map(|(id, _)| *id)
                .collect();
            for id in &doomed {
                state.segments.remove(id);
            }
            doomed
        };
        for id in doomed {
            if let Err(e) = fs::remove_file(self.dir.join(segment_name(id))) {
                tracing::warn!(error = %e, segment = id, "usage journal: could not delete a finished segment");
            }
        }
    }

    /// Segment files on disk.
    #[cfg(test)]
    fn segments(&self) -> usize {
        self.lock().segments.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(seq: u64, id: &str) -> Vec<u8> {
        format!(r#"{{"seq":{seq},"request_id":"{id}"}}"#).into_bytes()
    }

    fn interrupted(begin: &[u8], seq: u64) -> Option<Vec<u8>> {
        let id: RequestIdOnly = serde_json::from_slice(begin).ok()?;
        Some(format!(r#"{{"seq":{seq},"request_id":"{}","outcome":"interrupted"}}"#, id.request_id).into_bytes())
    }

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluicegate-journal-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn unacked_events_replay_and_unfinished_requests_become_interrupted() {
        let dir = tmp("replay");
        {
            let (j, replay) = Journal::open(&dir, interrupted).unwrap();
            assert!(replay.events.is_empty());
            let mut seq = replay.next_seq;
            let mut next = || {
                seq += 1;
                seq - 1
            };
            let s = next();
            let t1 = j.begin(s, &payload(s, "a")).unwrap();
            let s = next();
            let _t2 = j.begin(s, &payload(s, "b")).unwrap();
            let end_a = next();
            j.end(end_a, &payload(end_a, "a"), Some(t1)).unwrap();
            let s = next();
            let t3 = j.begin(s, &payload(s, "c")).unwrap();
            let end_c = next();
            j.end(end_c, &payload(end_c, "c"), Some(t3)).unwrap();
            j.sync().unwrap();
            j.ack(end_a).unwrap();
            // dropped without ending "b": the process died
        }
        let (j, replay) = Journal::open(&dir, interrupted).unwrap();
        let texts: Vec<String> = replay.events.iter().map(|(_, b)| String::from_utf8(b.to_vec()).unwrap()).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(texts[0].contains(r#""request_id":"c""#));
        assert!(texts[1].contains(r#""request_id":"b""#) && texts[1].contains("interrupted"));
        // The interrupted event is itself journaled: acknowledging everything clears the disk.
        let last = replay.events.iter().map(|(s, _)| *s).max().unwrap();
        j.ack(last).unwrap();
        assert_eq!(j.segments(), 1);
        assert!(Journal::open(&dir, interrupted).is_err(), "one process per journal");
        drop(j);
        let (_, again) = Journal::open(&dir, interrupted).unwrap();
        assert!(again.events.is_empty());
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_tail_is_cut_and_the_rest_survives() {
        let dir = tmp("torn");
        {
            let (j, replay) = Journal::open(&dir, interrupted).unwrap();
            let mut seq = replay.next_seq;
            for id in ["a", "b"] {
                let t = j.begin(seq, &payload(seq, id)).unwrap();
                j.end(seq + 1, &payload(seq + 1, id), Some(t)).unwrap();
                seq += 2;
            }
            j.sync().unwrap();
        }
        let newest = fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .filter(|p| segment_id(p).is_some())
            .max()
            .unwrap();
        let len = fs::metadata(&newest).unwrap().len();
        // Tear the last record in half, as a crash in the middle of a write would.
        OpenOptions::new().write(true).open(&newest).unwrap().set_len(len - 5).unwrap();
        let (_, replay) = Journal::open(&dir, interrupted).unwrap();
        let texts: Vec<String> = replay.events.iter().map(|(_, b)| String::from_utf8(b.to_vec()).unwrap()).collect();
        assert_eq!(texts.len(), 2);
        assert!(texts[0].contains(r#""request_id":"a""#) && !texts[0].contains("interrupted"));
        assert!(texts[1].contains(r#""request_id":"b""#) && texts[1].contains("interrupted"));
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn records_are_checksummed() {
        let record = encode(KIND_END, b"{}");
        assert_eq!(decode(&record).0.len(), 1);
        let mut bad = record.clone();
        bad[HEADER] = b'[';
        assert_eq!(decode(&bad).0.len(), 0);
    }

    mod properties {
        use std::collections::HashSet;

        use proptest::prelude::*;

        use super::*;

        /// What one request left in the journal: its begin record's end offset, and its end
        /// record's (offset, seq) if it finished.
        struct Written {
            id: String,
            begin_end: usize,
            end: Option<(usize, u64)>,
        }

        fn write(dir: &Path, plan: &[bool], acks: usize) -> (Vec<Written>, PathBuf, u64) {
            let (j, replay) = Journal::open(dir, interrupted).unwrap();
            let mut seq = replay.next_seq;
            let mut offset = 0usize;
            let mut written = Vec::new();
            for (i, finished) in plan.iter().enumerate() {
                let id = format!("r{i}");
                let begin = payload(seq, &id);
                let ticket = j.begin(seq, &begin).unwrap();
                offset += HEADER + begin.len();
                let begin_end = offset;
                seq += 1;
                let end = if *finished {
                    let event = payload(seq, &id);
                    j.end(seq, &event, Some(ticket)).unwrap();
                    offset += HEADER + event.len();
                    seq += 1;
                    Some((offset, seq - 1))
                } else {
                    None
                };
                written.push(Written { id, begin_end, end });
            }
            j.sync().unwrap();
            let acked = written.iter().filter_map(|w| w.end).take(acks).map(|(_, s)| s).max().unwrap_or(0);
            if acked > 0 {
                j.ack(acked).unwrap();
            }
            let segment = fs::read_dir(dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| segment_id(p).is_some())
                .max_by_key(|p| fs::metadata(p).map(|m| m.len()).unwrap_or(0))
                .unwrap();
            (written, segment, acked)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(crate::test_cases(64)))]

            /// A journal torn or corrupted after what was acknowledged replays without panicking,
            /// bills no request twice, and loses only what lay at or after the damage.
            #[test]
            fn damage_loses_at_most_the_torn_tail(
                plan in prop::collection::vec(any::<bool>(), 1..30),
                acks in 0usize..10,
                at in any::<prop::sample::Index>(),
                flip in 1u8..=255,
                truncate in any::<bool>(),
            ) {
                let dir = std::env::temp_dir().join(format!("sg-journal-prop-{}", fastrand::u64(..)));
                let (written, segment, acked) = write(&dir, &plan, acks);
                let mut data = fs::read(&segment).unwrap();
                // Damage lands after the acknowledged records: those were synced before their
                // acknowledgement, so no torn write reaches them.
                let safe_from = written
                    .iter()
                    .filter_map(|w| w.end)
                    .filter(|(_, s)| *s <= acked)
                    .map(|(o, _)| o)
                    .max()
                    .unwrap_or(0);
                prop_assume!(data.len() > safe_from);
                let position = safe_from + at.index(data.len() - safe_from);
                if truncate {
                    data.truncate(position);
                } else {
                    data[position] ^= flip;
                }
                fs::write(&segment, &data).unwrap();

                let (_, replay) = Journal::open(&dir, interrupted).unwrap();
                let mut seen = HashSet::new();
                let mut expected = HashSet::new();
                for w in &written {
                    match w.end {
                        Some((end_at, seq)) if end_at <= position && seq > acked => {
                            expected.insert(format!("{}:end", w.id));
                        }
                        Some((end_at, _)) if end_at <= position => {}
                        _ if w.begin_end <= position => {
                            expected.insert(format!("{}:interrupted", w.id));
                        }
                        _ => {}
                    }
                }
                for (_, event) in &replay.events {
                    let text = String::from_utf8(event.to_vec()).unwrap();
                    let id: RequestIdOnly = serde_json::from_slice(event).unwrap();
                    prop_assert!(seen.insert(id.request_id.clone()), "billed twice: {}", id.request_id);
                    let kind = if text.contains("interrupted") { "interrupted" } else { "end" };
                    prop_assert!(expected.remove(&format!("{}:{kind}", id.request_id)), "unexpected {text}");
                }
                prop_assert!(expected.is_empty(), "lost before the damage: {expected:?}");
                let _ = fs::remove_dir_all(&dir);
            }

            /// Any bytes at all in a segment replay without a panic.
            #[test]
            fn arbitrary_segments_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
                let dir = std::env::temp_dir().join(format!("sg-journal-junk-{}", fastrand::u64(..)));
                private_fs::create_dir(&dir).unwrap();
                fs::write(dir.join(segment_name(1)), &bytes).unwrap();
                let _ = Journal::open(&dir, interrupted);
                let _ = fs::remove_dir_all(&dir);
            }
        }
    }
}
