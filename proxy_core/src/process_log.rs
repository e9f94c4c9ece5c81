//! The process log: where the core's `tracing` events and the control plane's Python log
//! records go. Standard error by default; with a file, one `LogFile` (reopened on SIGHUP,
//! optionally rotated by size) shared by both writers, so the two never rotate one file apart.
//! Each event is written as one chunk under the file's mutex: lines from the two sides never
//! interleave inside a line. Never on the request path: the core logs there only on failures.

use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock, PoisonError};

use crate::log_file::{LogFile, Rotation};

static FILE: OnceLock<Mutex<LogFile>> = OnceLock::new();

/// Send the process log to `path` from now on (once per process).
pub fn use_file(path: PathBuf, rotation: Option<Rotation>) -> io::Result<()> {
    let file = LogFile::open(path, rotation)?;
    FILE.set(Mutex::new(file)).map_err(|_| io::Error::other("the process log file is set already"))
}

/// Append whole lines; standard error when no file is set.
pub fn write(chunk: &[u8]) -> io::Result<()> {
    match FILE.get() {
        Some(file) => file.lock().unwrap_or_else(PoisonError::into_inner).write_chunk(chunk),
        None => io::stderr().lock().write_all(chunk),
    }
}

/// Reopen the file under its name (SIGHUP); nothing without a file.
pub fn reopen() -> io::Result<()> {
    match FILE.get() {
        Some(file) => file.lock().unwrap_or_else(PoisonError::into_inner).reopen(),
        None => Ok(()),
    }
}

/// `tracing_subscriber`'s writer: each event formatted into a buffer, written whole on drop.
#[derive(Default)]
pub struct EventWriter {
    buffer: Vec<u8>,
}

impl Write for EventWriter {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.buffer.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for EventWriter {
    fn drop(&mut self) {
        if !self.buffer.is_empty() {
            // Nowhere left to report a failed log write.
            let _ = write(&self.buffer);
        }
    }
}

pub fn event_writer() -> EventWriter {
    EventWriter::default()
}
