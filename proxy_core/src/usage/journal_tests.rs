//! The journal: replay, torn tails, checksums, progress records, and appends from many threads
//! across segment rotations.

use std::collections::HashSet;
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::journal::{Journal, SEGMENT_BYTES};
use super::segment::{decode, encode, segment_id, HEADER, KIND_END};
use crate::private_fs;

fn payload(seq: u64, id: &str) -> Vec<u8> {
    format!(r#"{{"seq":{seq},"request_id":"{id}"}}"#).into_bytes()
}

#[derive(Deserialize)]
struct RequestIdOnly {
    request_id: String,
}

/// Bills an unfinished request as `interrupted`, with the relayed count of its progress record.
fn interrupted(begin: &[u8], progress: Option<&[u8]>, seq: u64) -> Option<Vec<u8>> {
    let id: RequestIdOnly = serde_json::from_slice(begin).ok()?;
    let relayed = progress
        .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
        .and_then(|p| p["relayed"].as_u64())
        .unwrap_or(0);
    let text =
        format!(r#"{{"seq":{seq},"request_id":"{}","outcome":"interrupted","relayed":{relayed}}}"#, id.request_id);
    Some(text.into_bytes())
}

fn tmp(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("sluicegate-journal-{name}-{}-{}", std::process::id(), fastrand::u32(..)));
    let _ = fs::remove_dir_all(&dir);
    dir
}

fn texts(events: &[(u64, bytes::Bytes)]) -> Vec<String> {
    events.iter().map(|(_, b)| String::from_utf8(b.to_vec()).unwrap()).collect()
}

#[test]
fn unacked_events_replay_and_unfinished_requests_become_interrupted() {
    let dir = tmp("replay");
    {
        let (j, replay) = Journal::open(&dir, interrupted).unwrap();
        assert!(replay.events.is_empty());
        let s = replay.next_seq;
        let t1 = j.begin(&payload(s, "a")).unwrap();
        let _t2 = j.begin(&payload(s, "b")).unwrap();
        j.end(s, &payload(s, "a"), Some(t1)).unwrap();
        let t3 = j.begin(&payload(s + 1, "c")).unwrap();
        j.end(s + 1, &payload(s + 1, "c"), Some(t3)).unwrap();
        j.sync().unwrap();
        j.ack(s).unwrap();
        // dropped without ending "b": the process died
    }
    let (j, replay) = Journal::open(&dir, interrupted).unwrap();
    let texts = texts(&replay.events);
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
fn an_interrupted_stream_is_billed_from_its_latest_progress_record() {
    let dir = tmp("progress");
    {
        let (j, replay) = Journal::open(&dir, interrupted).unwrap();
        let s = replay.next_seq;
        let mut t = j.begin(&payload(s, "streaming")).unwrap();
        j.progress(&mut t, br#"{"request_id":"streaming","relayed":16}"#).unwrap();
        j.progress(&mut t, br#"{"request_id":"streaming","relayed":32}"#).unwrap();
        let mut done = j.begin(&payload(s, "done")).unwrap();
        j.progress(&mut done, br#"{"request_id":"done","relayed":16}"#).unwrap();
        j.end(s, &payload(s, "done"), Some(done)).unwrap();
        // No sync: a kill -9 leaves the page cache, which is what the files read back here.
    }
    let (_, replay) = Journal::open(&dir, interrupted).unwrap();
    let texts = texts(&replay.events);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts[0].contains(r#""request_id":"done""#) && !texts[0].contains("interrupted"));
    assert!(texts[1].contains(r#""request_id":"streaming""#) && texts[1].contains(r#""relayed":32"#));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_segment_holding_an_open_requests_records_outlives_its_acknowledgement() {
    let dir = tmp("rotation");
    let (j, replay) = Journal::open(&dir, interrupted).unwrap();
    let mut seq = replay.next_seq;
    let mut open = j.begin(&payload(seq, "long")).unwrap();
    j.progress(&mut open, br#"{"request_id":"long","relayed":1}"#).unwrap();
    // Fill two segments with finished requests, rotating as the syncer does.
    let filler = format!(r#"{{"seq":0,"request_id":"f","pad":"{}"}}"#, "x".repeat(64 * 1024));
    for _ in 0..2 {
        let mut written = 0;
        while written < SEGMENT_BYTES {
            let t = j.begin(filler.as_bytes()).unwrap();
            j.end(seq, &payload(seq, "f"), Some(t)).unwrap();
            written += (filler.len() + 2 * HEADER + payload(seq, "f").len()) as u64;
            seq += 1;
        }
        j.sync().unwrap();
    }
    j.sync().unwrap();
    j.ack(seq - 1).unwrap();
    // The first segment holds the open request's begin and progress: it stays.
    assert!(j.segments() >= 2, "{}", j.segments());
    j.progress(&mut open, br#"{"request_id":"long","relayed":2}"#).unwrap();
    j.end(seq, &payload(seq, "long"), Some(open)).unwrap();
    j.sync().unwrap();
    j.ack(seq).unwrap();
    assert_eq!(j.segments(), 1, "every finished segment is deleted");
    drop(j);
    let (_, replay) = Journal::open(&dir, interrupted).unwrap();
    assert!(replay.events.is_empty());
    let _ = fs::remove_dir_all(&dir);
}

/// Four threads append begin, progress and end records while another rotates and syncs: every
/// request is found once at replay, with its own end, whatever segment each record landed in.
#[test]
fn appends_from_many_threads_across_rotations_replay_whole() {
    let dir = tmp("threads");
    let (j, replay) = Journal::open(&dir, interrupted).unwrap();
    let j = Arc::new(j);
    let next = Arc::new(std::sync::atomic::AtomicU64::new(replay.next_seq));
    let pad = "y".repeat(16 * 1024);
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (j, next, pad) = (j.clone(), next.clone(), pad.clone());
            std::thread::spawn(move || {
                for i in 0..400 {
                    let id = format!("w{w}-{i}");
                    let mut t =
                        j.begin(format!(r#"{{"seq":0,"request_id":"{id}","pad":"{pad}"}}"#).as_bytes()).unwrap();
                    j.progress(&mut t, format!(r#"{{"request_id":"{id}","relayed":3}}"#).as_bytes()).unwrap();
                    if i % 10 != 9 {
                        let seq = next.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                        j.end(seq, &payload(seq, &id), Some(t)).unwrap();
                    }
                }
            })
        })
        .collect();
    while !writers.iter().all(|w| w.is_finished()) {
        j.sync().unwrap();
    }
    for w in writers {
        w.join().unwrap();
    }
    j.sync().unwrap();
    assert!(j.segments() > 1, "the test rotates");
    drop(j);
    let (_, replay) = Journal::open(&dir, interrupted).unwrap();
    let mut seen = HashSet::new();
    for text in texts(&replay.events) {
        let id: RequestIdOnly = serde_json::from_str(&text).unwrap();
        assert!(seen.insert(id.request_id.clone()), "twice: {}", id.request_id);
        assert_eq!(text.contains("interrupted"), id.request_id.ends_with('9'), "{text}");
        if text.contains("interrupted") {
            assert!(text.contains(r#""relayed":3"#), "{text}");
        }
    }
    assert_eq!(seen.len(), 1600);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_torn_tail_is_cut_and_the_rest_survives() {
    let dir = tmp("torn");
    {
        let (j, replay) = Journal::open(&dir, interrupted).unwrap();
        let mut seq = replay.next_seq;
        for id in ["a", "b"] {
            let t = j.begin(&payload(seq, id)).unwrap();
            j.end(seq + 1, &payload(seq + 1, id), Some(t)).unwrap();
            seq += 2;
        }
        j.sync().unwrap();
    }
    let newest = newest_segment(&dir);
    let len = fs::metadata(&newest).unwrap().len();
    // Tear the last record in half, as a crash in the middle of a write would.
    OpenOptions::new().write(true).open(&newest).unwrap().set_len(len - 5).unwrap();
    let (_, replay) = Journal::open(&dir, interrupted).unwrap();
    let texts = texts(&replay.events);
    assert_eq!(texts.len(), 2);
    assert!(texts[0].contains(r#""request_id":"a""#) && !texts[0].contains("interrupted"));
    assert!(texts[1].contains(r#""request_id":"b""#) && texts[1].contains("interrupted"));
    let _ = fs::remove_dir_all(&dir);
}

fn newest_segment(dir: &Path) -> PathBuf {
    fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| segment_id(p).is_some() && fs::metadata(p).map(|m| m.len() > 0).unwrap_or(false))
        .max()
        .unwrap()
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
            let ticket = j.begin(&begin).unwrap();
            offset += HEADER + begin.len();
            let begin_end = offset;
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
        (written, newest_segment(dir), acked)
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
            fs::write(dir.join(super::super::segment::segment_name(1)), &bytes).unwrap();
            let _ = Journal::open(&dir, interrupted);
            let _ = fs::remove_dir_all(&dir);
        }
    }
}
