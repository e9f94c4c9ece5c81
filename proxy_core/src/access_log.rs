//! The structured access log: one JSON line per request, written by its own thread so the
//! request path only hands over bytes it already has. A routed request's line is its usage event
//! (ids, tenant, key prefix, endpoint, model, upstream, status, outcome, every latency stage,
//! tokens, cost); a request refused before routing gets a short line with its reason. No line
//! carries a secret: keys appear only by their public prefix.
//!
//! The log is not billing: when the writer falls behind by `CAPACITY` lines, new lines are
//! dropped and counted rather than slowing requests down. Every line is counted once: written
//! (it reached the file), dropped (the writer was behind) or failed (the write was refused, a
//! full disk). The file reopens under its name when asked (SIGHUP) and may rotate by size
//! (`log_file.rs`); the writer thread holds the file only while it writes a batch, so a reopen
//! waits at most for one batch.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use bytes::Bytes;
use serde::Serialize;

use crate::log_file::{LogFile, Rotation};
use crate::metrics::FamilySnapshot;

const CAPACITY: usize = 65_536;
/// A batch is written with one `write` once it holds this much (or the queue is empty).
const CHUNK: usize = 64 * 1024;

enum Out {
    Stderr,
    File(LogFile),
}

impl Out {
    fn write_chunk(&mut self, chunk: &[u8]) -> std::io::Result<()> {
        match self {
            Out::Stderr => std::io::stderr().lock().write_all(chunk),
            Out::File(file) => file.write_chunk(chunk),
        }
    }
}

#[derive(Default)]
struct Counts {
    written: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

pub struct AccessLog {
    target: String,
    tx: Option<SyncSender<Bytes>>,
    writer: Option<JoinHandle<()>>,
    out: Arc<Mutex<Out>>,
    counts: Arc<Counts>,
}

/// The line of a request answered before routing.
#[derive(Serialize)]
pub struct Refusal<'a> {
    pub ts: f64,
    pub request_id: &'a str,
    pub endpoint: &'a str,
    pub status: u16,
    pub outcome: &'static str,
    pub error_code: &'static str,
    pub reason: &'static str,
    pub duration_ms: f64,
}

fn flush(out: &Mutex<Out>, counts: &Counts, chunk: &mut Vec<u8>, lines: &mut u64) {
    if *lines == 0 {
        return;
    }
    let result = out.lock().unwrap_or_else(PoisonError::into_inner).write_chunk(chunk);
    match result {
        Ok(()) => counts.written.fetch_add(*lines, Ordering::Relaxed),
        Err(e) => {
            tracing::warn!(error = %e, lines = *lines, "access log write failed; lines lost");
            counts.failed.fetch_add(*lines, Ordering::Relaxed)
        }
    };
    chunk.clear();
    *lines = 0;
}

fn run_writer(rx: Receiver<Bytes>, out: Arc<Mutex<Out>>, counts: Arc<Counts>) {
    let mut chunk = Vec::with_capacity(CHUNK + 4096);
    let mut lines = 0u64;
    while let Ok(first) = rx.recv() {
        let mut next = Some(first);
        while let Some(line) = next.take() {
            chunk.extend_from_slice(&line);
            chunk.push(b'\n');
            lines += 1;
            if chunk.len() >= CHUNK {
                flush(&out, &counts, &mut chunk, &mut lines);
            }
            next = rx.try_recv().ok();
        }
        flush(&out, &counts, &mut chunk, &mut lines);
    }
}

impl AccessLog {
    /// `target` is a file path (appended to) or `-` for standard error; `rotation` applies to
    /// a file only.
    pub fn open(target: &str, rotation: Option<Rotation>) -> std::io::Result<AccessLog> {
        let out = if target == "-" { Out::Stderr } else { Out::File(LogFile::open(target, rotation)?) };
        let out = Arc::new(Mutex::new(out));
        let counts = Arc::new(Counts::default());
        let (tx, rx) = mpsc::sync_channel::<Bytes>(CAPACITY);
        let writer = {
            let (out, counts) = (out.clone(), counts.clone());
            std::thread::Builder::new()
                .name("sluicegate-access-log".into())
                .spawn(move || run_writer(rx, out, counts))?
        };
        Ok(AccessLog { target: target.to_string(), tx: Some(tx), writer: Some(writer), out, counts })
    }

    pub fn target(&self) -> &str {
        &self.target
    }

    pub fn write(&self, line: Bytes) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) = tx.try_send(line) {
                self.counts.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn refusal(&self, refusal: &Refusal<'_>) {
        if let Ok(line) = serde_json::to_vec(refusal) {
            self.write(Bytes::from(line));
        }
    }

    /// Reopen the file under its name; standard error needs nothing. On failure the file in use
    /// stays in use.
    pub fn reopen(&self) -> std::io::Result<()> {
        match &mut *self.out.lock().unwrap_or_else(PoisonError::into_inner) {
            Out::Stderr => Ok(()),
            Out::File(file) => file.reopen(),
        }
    }

    /// (written, dropped, failed) lines so far.
    pub fn counts(&self) -> (u64, u64, u64) {
        let c = &self.counts;
        (c.written.load(Ordering::Relaxed), c.dropped.load(Ordering::Relaxed), c.failed.load(Ordering::Relaxed))
    }

    pub fn metric_families(&self) -> Vec<FamilySnapshot> {
        let (written, dropped, failed) = self.counts();
        vec![
            FamilySnapshot::counter(
                "sluicegate_access_log_lines_total",
                "Access log lines written to the log (handed to the kernel).",
                written as f64,
            ),
            FamilySnapshot::counter(
                "sluicegate_access_log_dropped_total",
                "Access log lines dropped because the writer fell behind.",
                dropped as f64,
            ),
            FamilySnapshot::counter(
                "sluicegate_access_log_write_failures_total",
                "Access log lines lost because writing them failed (a full disk, a removed directory).",
                failed as f64,
            ),
        ]
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_is_counted_once_across_a_reopen() {
        let dir = std::env::temp_dir().join(format!("sluicegate-access-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("access.log");
        let log = AccessLog::open(path.to_str().unwrap(), None).unwrap();
        for i in 0..500 {
            log.write(Bytes::from(format!("{{\"n\":{i}}}")));
            if i == 250 {
                std::fs::rename(&path, dir.join("access.log.1")).unwrap();
                log.reopen().unwrap();
            }
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while log.counts().0 + log.counts().1 < 500 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let (written, dropped, failed) = log.counts();
        let lines = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default().lines().count() as u64;
        assert_eq!(written + dropped + failed, 500);
        assert_eq!(lines(&path) + lines(&dir.join("access.log.1")), written);
        assert!(lines(&path) > 0, "lines after the reopen went to the new file");
        drop(log);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
