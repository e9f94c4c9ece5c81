//! The structured access log: one JSON line per request, written by its own thread so the
//! request path only hands over bytes it already has. A routed request's line is its usage event
//! (ids, tenant, key prefix, endpoint, model, upstream, status, outcome, every latency stage,
//! tokens, cost); a request refused before routing gets a short line with its reason. No line
//! carries a secret: keys appear only by their public prefix.
//!
//! The log is not billing: when the writer falls behind by `CAPACITY` lines, new lines are
//! dropped and counted rather than slowing requests down.

use std::io::{BufWriter, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, SyncSender, TrySendError};
use std::thread::JoinHandle;

use bytes::Bytes;
use serde::Serialize;

const CAPACITY: usize = 65_536;

pub struct AccessLog {
    tx: Option<SyncSender<Bytes>>,
    writer: Option<JoinHandle<()>>,
    pub dropped: AtomicU64,
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

impl AccessLog {
    /// `target` is a file path (appended to) or `-` for standard error.
    pub fn open(target: &str) -> std::io::Result<AccessLog> {
        let out: Box<dyn Write + Send> = if target == "-" {
            Box::new(std::io::stderr())
        } else {
            Box::new(crate::private_fs::options().create(true).append(true).open(target)?)
        };
        let (tx, rx) = mpsc::sync_channel::<Bytes>(CAPACITY);
        let writer = std::thread::Builder::new().name("sluicegate-access-log".into()).spawn(move || {
            let mut out = BufWriter::new(out);
            while let Ok(line) = rx.recv() {
                let _ = out.write_all(&line).and_then(|_| out.write_all(b"\n"));
                while let Ok(line) = rx.try_recv() {
                    let _ = out.write_all(&line).and_then(|_| out.write_all(b"\n"));
                }
                let _ = out.flush();
            }
        })?;
        Ok(AccessLog { tx: Some(tx), writer: Some(writer), dropped: AtomicU64::new(0) })
    }

    pub fn write(&self, line: Bytes) {
        if let Some(tx) = &self.tx {
            if let Err(TrySendError::Full(_)) = tx.try_send(line) {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn refusal(&self, refusal: &Refusal<'_>) {
        if let Ok(line) = serde_json::to_vec(refusal) {
            self.write(Bytes::from(line));
        }
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
