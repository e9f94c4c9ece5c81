//! A segment file appended to through a shared memory mapping: a record's range is reserved by
//! one atomic add and the record copied into the page cache, with no system call (a request
//! journals two records; as `write`s to a file opened `O_APPEND` they cost a microsecond or more
//! each; see ARCHITECTURE.md, "Journal cost").
//!
//! What the `write`s gave stays true:
//! - **kill -9 loses nothing copied**: the pages are the file's page cache (`MAP_SHARED`); the
//!   kernel writes them back whether or not the process lives.
//! - **durable on sync**: `fdatasync` on Linux writes back pages dirtied through a mapping too.
//! - **a full disk is an error, not a signal**: the file's blocks are allocated when it is
//!   created (`posix_fallocate`), so a store into the mapping never needs a block the disk has
//!   not got (that would be SIGBUS). A record past the mapped size (a segment the syncer rolled
//!   over late) goes to the file with `pwrite` at its reserved offset, and may fail as a write.
//! - **records whole and in order**: each has its own reserved range; a request's records are
//!   reserved in the order its task writes them. A process killed mid-copy leaves one torn range
//!   with whole records after it, which the replay skips (`segment::decode`).
//!
//! Nothing reads through the mapping: the replay reads the file. What stays a signal: an I/O
//! error reading back a page the kernel evicted while a writer was still copying into it.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::private_fs;

pub struct MappedFile {
    file: File,
    base: NonNull<u8>,
    mapped: usize,
    /// Bytes reserved so far: where the next record goes.
    end: AtomicUsize,
    /// Below this offset the pages have been unmapped.
    unmapped: AtomicUsize,
}

// SAFETY: the mapping is memory every thread may store to; `append` gives each caller a range of
// its own (one `fetch_add`), and nothing reads it through the mapping.
unsafe impl Send for MappedFile {}
unsafe impl Sync for MappedFile {}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(1)
}

impl MappedFile {
    /// Create `path` (it must not exist) with `mapped` bytes allocated on disk, and map them.
    pub fn create(path: &Path, mapped: usize) -> io::Result<Self> {
        let file = private_fs::options().read(true).write(true).create_new(true).open(path)?;
        Self::map(file, path, mapped)
    }

    #[cfg(target_os = "linux")]
    fn map(file: File, path: &Path, mapped: usize) -> io::Result<Self> {
        let size = libc::off_t::try_from(mapped).map_err(|_| io::Error::other("segment size out of range"))?;
        // SAFETY: a plain call on a descriptor this function owns.
        let failed = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, size) };
        if failed != 0 {
            return Err(io::Error::from_raw_os_error(failed));
        }
        // SAFETY: a new shared mapping of `mapped` bytes of a file that has them; it lives until
        // `drop` unmaps it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                mapped,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        let Some(base) = NonNull::new(base.cast::<u8>()).filter(|_| base != libc::MAP_FAILED) else {
            // A file system that cannot map files (some network and FUSE ones): every record
            // goes by `pwrite`, as past the mapped bytes.
            tracing::warn!(error = %io::Error::last_os_error(), path = %path.display(), "usage journal: the segment cannot be memory mapped; appending with writes");
            return Ok(Self::unmapped(file));
        };
        Ok(Self { file, base, mapped, end: AtomicUsize::new(0), unmapped: AtomicUsize::new(0) })
    }

    /// Elsewhere no block is allocated ahead (no `posix_fallocate`), so nothing is mapped: a
    /// store into a mapping could meet a full disk as a signal.
    #[cfg(not(target_os = "linux"))]
    fn map(file: File, _path: &Path, _mapped: usize) -> io::Result<Self> {
        Ok(Self::unmapped(file))
    }

    fn unmapped(file: File) -> Self {
        Self { file, base: NonNull::dangling(), mapped: 0, end: AtomicUsize::new(0), unmapped: AtomicUsize::new(0) }
    }

    /// Append one record, `header` then `payload`, at the next free offset.
    pub fn append(&self, header: &[u8], payload: &[u8]) -> io::Result<()> {
        let len = header.len() + payload.len();
        let at = self.end.fetch_add(len, Ordering::Relaxed);
        if at.checked_add(len).is_some_and(|stop| stop <= self.mapped) {
            // SAFETY: `at..at + len` lies inside the mapping, and the `fetch_add` above gave it to
            // this call alone: no other thread touches these bytes.
            unsafe {
                let to = self.base.as_ptr().add(at);
                std::ptr::copy_nonoverlapping(header.as_ptr(), to, header.len());
                std::ptr::copy_nonoverlapping(payload.as_ptr(), to.add(header.len()), payload.len());
            }
            return Ok(());
        }
        // Past the mapped bytes: ordinary writes grow the file (the page cache keeps them
        // coherent with the mapping).
        self.file.write_all_at(header, at as u64)?;
        self.file.write_all_at(payload, (at + header.len()) as u64)
    }

    /// Make every record copied before this call durable.
    pub fn sync_data(&self) -> io::Result<()> {
        self.file.sync_data()
    }

    /// Unmap the whole pages below `offset` (all of them with `all`): their data stays in the
    /// file's page cache, dirty pages stay dirty, and a later store into one maps it again.
    ///
    /// Called before each sync: `fdatasync` write-protects every dirty page still mapped, to see
    /// the next store, with a TLB shootdown each (an interrupt of every CPU running the process;
    /// a third of all CPU time in `perf` of the journal's micro-benchmark), where one `madvise`
    /// unmaps them all with one. It also keeps the journal's pages out of the process's RSS.
    pub fn unmap_below(&self, offset: usize, all: bool) {
        if self.mapped == 0 {
            return;
        }
        let page = page_size();
        let upto = if all { self.mapped } else { offset.min(self.mapped) / page * page };
        let from = self.unmapped.load(Ordering::Acquire);
        if upto <= from {
            return;
        }
        // SAFETY: `from..upto` lies inside the mapping and is page aligned. MADV_DONTNEED on a
        // shared file mapping drops page table entries only (their dirty bits go to the pages),
        // so a writer still copying into one of these pages faults it back in and loses nothing.
        let failed = unsafe { libc::madvise(self.base.as_ptr().add(from).cast(), upto - from, libc::MADV_DONTNEED) };
        if failed == 0 {
            self.unmapped.fetch_max(upto, Ordering::AcqRel);
        }
    }
}

impl Drop for MappedFile {
    fn drop(&mut self) {
        if self.mapped == 0 {
            return;
        }
        // SAFETY: the mapping made in `create`; no `&self` outlives `drop`.
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.mapped);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("sg-mapped-{name}-{}-{}", std::process::id(), fastrand::u32(..)))
    }

    /// Threads append at once, some records past the mapped bytes: the file holds every record
    /// whole, each at its own offset.
    #[test]
    fn appends_from_many_threads_land_whole_in_and_past_the_mapping() {
        let path = tmp("threads");
        let file = Arc::new(MappedFile::create(&path, 64 * 1024).unwrap());
        let threads: Vec<_> = (0..4u8)
            .map(|t| {
                let file = file.clone();
                std::thread::spawn(move || {
                    for i in 0..500u16 {
                        let body = vec![b'a' + t; 40 + usize::from(i % 7)];
                        file.append(&[0xFF, t], &body).unwrap();
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        file.unmap_below(usize::MAX, true);
        file.sync_data().unwrap();
        let data = std::fs::read(&path).unwrap();
        assert!(data.len() > 64 * 1024, "some records went past the mapping");
        let (mut at, mut seen) = (0, [0usize; 4]);
        while at < data.len() {
            assert_eq!(data[at], 0xFF, "a record starts at {at}");
            let t = data[at + 1];
            let len = data[at + 2..].iter().take_while(|b| **b == b'a' + t).count();
            assert!((40..47).contains(&len), "record of thread {t} at {at} is {len} bytes");
            seen[usize::from(t)] += 1;
            at += 2 + len;
        }
        assert_eq!(seen, [500; 4]);
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn unmapped_pages_keep_their_data_and_take_stores_again() {
        let path = tmp("unmap");
        let file = MappedFile::create(&path, 64 * 4096).unwrap();
        let chunk = vec![7u8; 4096];
        for _ in 0..10 {
            file.append(&[], &chunk).unwrap();
        }
        file.unmap_below(4 * 4096 + 100, false);
        assert_eq!(file.unmapped.load(Ordering::Acquire), 4 * 4096, "whole pages only");
        file.unmap_below(4096, false);
        assert_eq!(file.unmapped.load(Ordering::Acquire), 4 * 4096);
        file.append(&[], &chunk).unwrap();
        file.unmap_below(0, true);
        file.append(&[], &chunk).unwrap();
        file.sync_data().unwrap();
        let data = std::fs::read(&path).unwrap();
        assert!(data[..12 * 4096].iter().all(|b| *b == 7));
        assert!(data[12 * 4096..].iter().all(|b| *b == 0));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn without_a_mapping_records_go_by_writes() {
        let path = tmp("unmapped");
        let file = MappedFile::create(&path, 8192).unwrap();
        let file = MappedFile::unmapped(file.file.try_clone().unwrap());
        file.append(b"ab", b"cd").unwrap();
        file.append(b"e", b"f").unwrap();
        file.unmap_below(usize::MAX, true);
        file.sync_data().unwrap();
        let data = std::fs::read(&path).unwrap();
        assert_eq!(&data[..6], b"abcdef");
        assert!(data[6..].iter().all(|b| *b == 0));
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn an_existing_file_is_refused() {
        let path = tmp("exists");
        std::fs::write(&path, b"records").unwrap();
        assert!(MappedFile::create(&path, 4096).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"records");
        let _ = std::fs::remove_file(&path);
    }
}
