//! Opening the usage journal: every segment read back, torn records skipped, unacknowledged end
//! records handed out again, and each request left open (a begin record without its end) billed
//! as `interrupted` from its latest progress record.
//!
//! Replay depends on no order between requests: end records are handed out by sequence number,
//! and a request's own records (begin, progress, end) are in the order its one thread wrote
//! them, whichever segment each landed in (segments are read oldest first).

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;

use super::journal::{Journal, ACK_FILE};
use super::segment::{decode, segment_id, segment_name, Segment, KIND_BEGIN, KIND_END, KIND_PROGRESS};
use crate::private_fs;

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
    #[serde(default)]
    seq: u64,
}

/// A request whose end the journal has not seen.
struct Unfinished {
    begin: Vec<u8>,
    progress: Option<Vec<u8>>,
}

/// Turns an unfinished request (its begin record and latest progress record) into the usage
/// event that bills it, as event `seq`.
pub trait Interrupted: Fn(&[u8], Option<&[u8]>, u64) -> Option<Vec<u8>> {}
impl<F: Fn(&[u8], Option<&[u8]>, u64) -> Option<Vec<u8>>> Interrupted for F {}

impl Journal {
    /// Open (creating) the journal in `dir` and replay it.
    pub fn open(dir: &Path, interrupted: impl Interrupted) -> io::Result<(Journal, Replay)> {
        private_fs::create_dir(dir)?;
        let lock = private_fs::options().create(true).truncate(false).write(true).open(dir.join("lock"))?;
        lock.try_lock()
            .map_err(|_| io::Error::new(io::ErrorKind::WouldBlock, "another process holds this usage journal"))?;
        let acked: u64 = fs::read_to_string(dir.join(ACK_FILE)).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        let mut ids: Vec<u64> =
            fs::read_dir(dir)?.filter_map(|e| e.ok()).filter_map(|e| segment_id(&e.path())).collect();
        ids.sort_unstable();
        let mut segments = Vec::new();
        let mut open: HashMap<String, Unfinished> = HashMap::new();
        let mut ends: Vec<(u64, Bytes)> = Vec::new();
        let mut max_seq = acked;
        for id in &ids {
            let path = dir.join(segment_name(*id));
            private_fs::narrow(&path)?;
            let data = fs::read(&path)?;
            let decoded = decode(&data);
            for torn in &decoded.damaged {
                // A crash mid-copy tears one record a writer had under way; the records after
                // it are whole.
                tracing::warn!(segment = %path.display(), offset = torn.start, bytes = torn.len(), "usage journal: skipped a torn or damaged record");
            }
            let mut last_end_seq = 0;
            for (kind, payload) in decoded.records {
                let Ok(request) = serde_json::from_slice::<RequestIdOnly>(payload).map(|r| r.request_id) else {
                    continue;
                };
                let seq = serde_json::from_slice::<WithSeq>(payload).map_or(0, |w| w.seq);
                max_seq = max_seq.max(seq);
                match kind {
                    KIND_BEGIN => {
                        open.insert(request, Unfinished { begin: payload.to_vec(), progress: None });
                    }
                    KIND_PROGRESS => {
                        if let Some(unfinished) = open.get_mut(&request) {
                            unfinished.progress = Some(payload.to_vec());
                        }
                    }
                    KIND_END => {
                        open.remove(&request);
                        last_end_seq = last_end_seq.max(seq);
                        if seq > acked {
                            ends.push((seq, Bytes::copy_from_slice(payload)));
                        }
                    }
                    _ => {}
                }
            }
            segments.push(Arc::new(Segment::replayed(*id, last_end_seq)));
        }
        let journal = Journal::new(dir, lock, segments, acked, max_seq + 1)?;
        ends.sort_by_key(|(seq, _)| *seq);
        let mut orphans: Vec<Unfinished> = open.into_values().collect();
        orphans.sort_by(|a, b| a.begin.cmp(&b.begin));
        let mut next_seq = max_seq + 1;
        for orphan in orphans {
            if let Some(event) = interrupted(&orphan.begin, orphan.progress.as_deref(), next_seq) {
                // Journaled itself: acknowledging it lets the begin's segment go.
                journal.end(next_seq, &event, None)?;
                ends.push((next_seq, Bytes::from(event)));
                next_seq += 1;
            }
        }
        journal.sync()?;
        Ok((journal, Replay { events: ends, next_seq }))
    }
}
