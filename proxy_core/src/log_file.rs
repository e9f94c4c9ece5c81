//! A log file that can be reopened under its name and rotated by size, for the access log and
//! the process log.
//!
//! Reopen is logrotate's convention: the operator (or logrotate) renames the file, then sends
//! SIGHUP; lines written from then on go to a new file at the old name, and the renamed one is
//! complete and may be compressed. Rotation by size is for hosts without logrotate: before a
//! write would take the file past `max_bytes`, `name` becomes `name.1` (`name.1` becomes
//! `name.2`, ..., the oldest beyond `keep` is deleted) and a new `name` is started. Writes are
//! whole chunks of whole lines, appended with `O_APPEND`, so a line is never split between files.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Size-based rotation: at most `keep` rotated files beside the live one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    pub max_bytes: u64,
    pub keep: u32,
}

pub struct LogFile {
    path: PathBuf,
    file: File,
    /// Bytes in the live file (as found at open, plus what this process appended).
    size: u64,
    rotation: Option<Rotation>,
}

fn open_append(path: &Path) -> io::Result<(File, u64)> {
    let file = crate::private_fs::options().create(true).append(true).open(path)?;
    let size = file.metadata()?.len();
    Ok((file, size))
}

fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

impl LogFile {
    pub fn open(path: impl Into<PathBuf>, rotation: Option<Rotation>) -> io::Result<LogFile> {
        let path = path.into();
        let (file, size) = open_append(&path)?;
        Ok(LogFile { path, file, size, rotation })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `chunk` (whole lines), rotating first if it would take the file past its size.
    pub fn write_chunk(&mut self, chunk: &[u8]) -> io::Result<()> {
        if let Some(rotation) = self.rotation {
            if self.size > 0 && self.size + chunk.len() as u64 > rotation.max_bytes {
                self.rotate(rotation.keep)?;
            }
        }
        self.file.write_all(chunk)?;
        self.size += chunk.len() as u64;
        Ok(())
    }

    /// Open the file now at `path` (a new one if it was renamed away). On failure the file in
    /// use stays in use.
    pub fn reopen(&mut self) -> io::Result<()> {
        let (file, size) = open_append(&self.path)?;
        self.file = file;
        self.size = size;
        Ok(())
    }

    fn rotate(&mut self, keep: u32) -> io::Result<()> {
        let keep = keep.max(1);
        match std::fs::remove_file(numbered(&self.path, keep)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
        for n in (1..keep).rev() {
            match std::fs::rename(numbered(&self.path, n), numbered(&self.path, n + 1)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        std::fs::rename(&self.path, numbered(&self.path, 1))?;
        self.reopen()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("sluicegate-logfile-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn rotation_keeps_a_bounded_number_of_files_and_never_splits_a_chunk() {
        let dir = dir("rotate");
        let path = dir.join("access.log");
        let mut log = LogFile::open(&path, Some(Rotation { max_bytes: 10, keep: 2 })).unwrap();
        for line in ["aaaa\n", "bbbb\n", "cccc\n", "dddd\n", "eeee\n", "ffff\n", "gggg\n"] {
            log.write_chunk(line.as_bytes()).unwrap();
        }
        assert_eq!(read(&path), "gggg\n");
        assert_eq!(read(&numbered(&path, 1)), "eeee\nffff\n");
        assert_eq!(read(&numbered(&path, 2)), "cccc\ndddd\n");
        assert!(!numbered(&path, 3).exists(), "only `keep` rotated files are kept");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reopen_follows_a_rename_and_continues_an_existing_file() {
        let dir = dir("reopen");
        let path = dir.join("access.log");
        let mut log = LogFile::open(&path, None).unwrap();
        log.write_chunk(b"one\n").unwrap();
        std::fs::rename(&path, dir.join("access.log.old")).unwrap();
        // Until reopened, lines go to the renamed file (logrotate's `create` + SIGHUP).
        log.write_chunk(b"two\n").unwrap();
        log.reopen().unwrap();
        log.write_chunk(b"three\n").unwrap();
        assert_eq!(read(&dir.join("access.log.old")), "one\ntwo\n");
        assert_eq!(read(&path), "three\n");
        // Opening an existing file appends to it, and its size counts toward rotation.
        let mut again = LogFile::open(&path, Some(Rotation { max_bytes: 8, keep: 1 })).unwrap();
        again.write_chunk(b"four\n").unwrap();
        assert_eq!(read(&path), "four\n");
        assert_eq!(read(&numbered(&path, 1)), "three\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failed_reopen_keeps_the_file_in_use() {
        let dir = dir("failed");
        let path = dir.join("sub").join("access.log");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut log = LogFile::open(&path, None).unwrap();
        std::fs::rename(dir.join("sub"), dir.join("moved")).unwrap();
        assert!(log.reopen().is_err());
        log.write_chunk(b"still here\n").unwrap();
        assert_eq!(read(&dir.join("moved").join("access.log")), "still here\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
