//! The journal: replay, torn records, checksums, progress records, and appends from many threads
//! across segment rotations.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;

use super::journal::{Journal, SEGMENT_BYTES};
use super::segment::{decode, encode, segment_id, HEADER, KIND_BEGIN, KIND_END};
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

/// Two finished requests, synced; returns the newest segment and where its records end.
fn two_finished_requests(dir: &Path) -> (PathBuf, usize) {
    let (j, replay) = Journal::open(dir, interrupted).unwrap();
    let mut seq = replay.next_seq;
    for id in ["a", "b"] {
        let t = j.begin(&payload(seq, id)).unwrap();
        j.end(seq + 1, &payload(seq + 1, id), Some(t)).unwrap();
        seq += 2;
    }
    j.sync().unwrap();
    drop(j);
    let newest = newest_segment(dir);
    let data = fs::read(&newest).unwrap();
    assert_eq!(data.len() as u64, SEGMENT_BYTES, "a segment is allocated whole");
    let end = data.iter().rposition(|b| *b != 0).unwrap() + 1;
    (newest, end)
}

#[test]
fn a_torn_last_record_bills_its_request_from_the_begin() {
    let dir = tmp("torn");
    let (newest, end) = two_finished_requests(&dir);
    // The last record's copy cut short, as a kill in the middle of it leaves it.
    let mut data = fs::read(&newest).unwrap();
    data[end - 5..end].fill(0);
    fs::write(&newest, &data).unwrap();
    let (_, replay) = Journal::open(&dir, interrupted).unwrap();
    let texts = texts(&replay.events);
    assert_eq!(texts.len(), 2);
    assert!(texts[0].contains(r#""request_id":"a""#) && !texts[0].contains("interrupted"));
    assert!(texts[1].contains(r#""request_id":"b""#) && texts[1].contains("interrupted"));
    let _ = fs::remove_dir_all(&dir);
}

/// A writer killed mid-copy leaves its range torn while records reserved after it are whole:
/// the replay skips the torn range and keeps them.
#[test]
fn records_after_a_torn_one_survive() {
    let dir = tmp("hole");
    let (newest, _) = two_finished_requests(&dir);
    let mut data = fs::read(&newest).unwrap();
    let first = decode(&data).records[0].1.len();
    // Request a's begin record: its header written, its payload not yet.
    data[HEADER..HEADER + first].fill(0);
    fs::write(&newest, &data).unwrap();
    let (_, replay) = Journal::open(&dir, interrupted).unwrap();
    let texts = texts(&replay.events);
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(texts.iter().all(|t| !t.contains("interrupted")), "{texts:?}");
    assert!(texts[0].contains(r#""request_id":"a""#) && texts[1].contains(r#""request_id":"b""#));
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
    let decoded = decode(&record);
    assert_eq!((decoded.records.len(), decoded.damaged.len()), (1, 0));
    let mut bad = record.clone();
    bad[HEADER] = b'[';
    let decoded = decode(&bad);
    assert_eq!(decoded.records.len(), 0);
    assert_eq!(decoded.damaged, vec![0..record.len()]);
}

#[test]
fn zeros_after_the_records_are_no_damage_and_runs_of_them_are_skipped() {
    let record = encode(KIND_END, b"{}");
    // A record whose length's low byte is zero, right after a zero run.
    let long = encode(KIND_BEGIN, &[b' '; 256]);
    assert_eq!(long[0], 0);
    let data = [&record[..], &[0; 1000], &long, &record, &[0; 5000]].concat();
    let decoded = decode(&data);
    assert_eq!(decoded.records.len(), 3);
    assert_eq!(decoded.damaged, vec![record.len()..record.len() + 1000]);
    assert!(decode(&[0; 4096]).records.is_empty() && decode(&[0; 4096]).damaged.is_empty());
}

mod properties {
    use std::collections::HashSet;
    use std::ops::Range;
    use std::os::unix::fs::FileExt;

    use proptest::prelude::*;

    use super::*;

    /// What one request left in the journal: where its begin record lies, and where its end
    /// record lies and its seq if it finished.
    struct Written {
        id: String,
        begin: Range<usize>,
        end: Option<(Range<usize>, u64)>,
    }

    /// Returns the requests, the segment they are in, where its records end, and the last
    /// sequence number acknowledged.
    fn write(dir: &Path, plan: &[bool], acks: usize) -> (Vec<Written>, PathBuf, usize, u64) {
        let (j, replay) = Journal::open(dir, interrupted).unwrap();
        let mut seq = replay.next_seq;
        let mut offset = 0usize;
        let mut written = Vec::new();
        for (i, finished) in plan.iter().enumerate() {
            let id = format!("r{i}");
            let begin = payload(seq, &id);
            let ticket = j.begin(&begin).unwrap();
            let begin = offset..offset + HEADER + begin.len();
            offset = begin.end;
            let end = if *finished {
                let event = payload(seq, &id);
                j.end(seq, &event, Some(ticket)).unwrap();
                let end = offset..offset + HEADER + event.len();
                offset = end.end;
                seq += 1;
                Some((end, seq - 1))
            } else {
                None
            };
            written.push(Written { id, begin, end });
        }
        j.sync().unwrap();
        let acked = written.iter().filter_map(|w| w.end.as_ref()).take(acks).map(|(_, s)| *s).max().unwrap_or(0);
        if acked > 0 {
            j.ack(acked).unwrap();
        }
        (written, newest_segment(dir), offset, acked)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(crate::test_cases(64)))]

        /// A journal torn or corrupted after what was acknowledged replays without panicking,
        /// bills no request twice, and loses only the records the damage reached: a request
        /// whose end record was lost is billed from its begin record.
        #[test]
        fn damage_loses_only_the_records_it_reaches(
            plan in prop::collection::vec(any::<bool>(), 1..30),
            acks in 0usize..10,
            at in any::<prop::sample::Index>(),
            flip in 1u8..=255,
            truncate in any::<bool>(),
        ) {
            let dir = std::env::temp_dir().join(format!("sg-journal-prop-{}", fastrand::u64(..)));
            let (written, segment, records_end, acked) = write(&dir, &plan, acks);
            // Damage lands after the acknowledged records: those were synced before their
            // acknowledgement, so no torn write reaches them.
            let safe_from = written
                .iter()
                .filter_map(|w| w.end.as_ref())
                .filter(|(_, s)| *s <= acked)
                .map(|(r, _)| r.end)
                .max()
                .unwrap_or(0);
            prop_assume!(records_end > safe_from);
            let position = safe_from + at.index(records_end - safe_from);
            let file = fs::OpenOptions::new().read(true).write(true).open(&segment).unwrap();
            if truncate {
                file.set_len(position as u64).unwrap();
            } else {
                let mut byte = [0u8];
                file.read_exact_at(&mut byte, position as u64).unwrap();
                file.write_all_at(&[byte[0] ^ flip], position as u64).unwrap();
            }
            drop(file);
            let intact = |r: &Range<usize>| if truncate { r.end <= position } else { !r.contains(&position) };

            let (_, replay) = Journal::open(&dir, interrupted).unwrap();
            let mut seen = HashSet::new();
            let mut expected = HashSet::new();
            for w in &written {
                match &w.end {
                    Some((end, seq)) if intact(end) && *seq > acked => {
                        expected.insert(format!("{}:end", w.id));
                    }
                    Some((end, _)) if intact(end) => {}
                    _ if intact(&w.begin) => {
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
            prop_assert!(expected.is_empty(), "lost: {expected:?}");
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
