//! The ground-truth record: one JSON line per request, appended by a writer thread so request
//! tasks never block on the file. Lines are flushed as they are written.

use std::fs::OpenOptions;
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::parts::UsageParts;

/// Seconds since the Unix epoch: the record's timestamps, comparable with other processes' logs.
pub fn unix_now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

#[derive(Debug, Clone, Serialize)]
pub struct RecordLine {
    pub request_id: String,
    pub endpoint: &'static str,
    pub model: String,
    pub stream: bool,
    pub status: u16,
    pub prompt_tokens: u64,
    /// Tokens handed to the connection (for a disconnect: those sent before it was noticed).
    pub completion_tokens: u64,
    /// The parts of the counts the answer reported (`x-sim-usage`).
    pub usage_parts: UsageParts,
    /// `complete`, `client_disconnected`, `cut`, `cut_done`, `status`, `bad_request`.
    pub outcome: &'static str,
    pub faults: Vec<String>,
    pub queue_ms: f64,
    pub started_at: f64,
    pub ended_at: f64,
}

pub struct Recorder {
    tx: Option<mpsc::Sender<RecordLine>>,
    writer: Option<JoinHandle<()>>,
}

impl Recorder {
    pub fn open(path: &Path) -> std::io::Result<Recorder> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        let (tx, rx) = mpsc::channel::<RecordLine>();
        let writer = std::thread::Builder::new().name("sluicegate-sim-record".into()).spawn(move || {
            let mut out = LineWriter::new(file);
            for line in rx {
                if let Ok(mut text) = serde_json::to_vec(&line) {
                    text.push(b'\n');
                    if let Err(e) = out.write_all(&text) {
                        tracing::error!(error = %e, "could not write the record file");
                    }
                }
            }
            let _ = out.flush();
        })?;
        Ok(Recorder { tx: Some(tx), writer: Some(writer) })
    }

    pub fn sender(&self) -> Option<mpsc::Sender<RecordLine>> {
        self.tx.clone()
    }

    /// Flush and close: waits for every line sent so far.
    pub fn close(mut self) {
        self.tx.take();
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}
