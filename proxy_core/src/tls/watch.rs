//! The file watch: the certificate and key files' identity (device, inode, size, mtime; through
//! symlinks, as certbot's `live/` names are) checked every interval on the core's runtime, off
//! the request path. A change is reloaded once the files have stood still for one interval: an
//! ACME client writes the chain and the key one after the other, and reading between the two
//! writes would refuse a pair that is only half new.

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::store::CertStore;

/// What identifies a file's content without reading it; `None` when it cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

pub fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: meta.dev(),
        ino: meta.ino(),
        len: meta.len(),
        mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
    })
}

pub type Stamps = (Option<Stamp>, Option<Stamp>);

/// The watch's memory between checks.
#[derive(Debug)]
pub struct Watch {
    /// The stamps last loaded (or refused): nothing to do while the files show them.
    settled: Stamps,
    /// Stamps seen once, different from `settled`: reloaded if the next check shows them again.
    moving: Option<Stamps>,
}

impl Watch {
    pub fn new(settled: Stamps) -> Self {
        Self { settled, moving: None }
    }

    /// One check: `true` when the files changed and then stood still, so a reload is due. A
    /// refused reload is not retried until the files change again (one log line per change).
    pub fn observe(&mut self, now: Stamps) -> bool {
        if now == self.settled {
            self.moving = None;
            return false;
        }
        if self.moving == Some(now) {
            self.settled = now;
            self.moving = None;
            return true;
        }
        self.moving = Some(now);
        false
    }
}

fn stamps(store: &CertStore) -> Stamps {
    (stamp(&store.cert_file), stamp(&store.key_file))
}

/// Check every `interval` until the runtime ends; lives and dies with the core's runtime.
pub async fn run(store: Arc<CertStore>, interval: Duration) {
    let first = {
        let store = store.clone();
        tokio::task::spawn_blocking(move || stamps(&store)).await.unwrap_or((None, None))
    };
    let mut watch = Watch::new(first);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        let store = store.clone();
        let checked = tokio::task::spawn_blocking(move || {
            let now = stamps(&store);
            (now, store)
        })
        .await;
        let Ok((now, store)) = checked else { continue };
        if watch.observe(now) {
            // Reading and parsing the files is blocking work: off the runtime's workers. The
            // store logs and counts the outcome.
            let _ = tokio::task::spawn_blocking(move || store.reload()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ino: u64) -> Option<Stamp> {
        Some(Stamp { dev: 1, ino, len: 10, mtime_ns: 5 })
    }

    #[test]
    fn a_change_is_reloaded_once_it_stood_still_for_one_check() {
        let mut watch = Watch::new((s(1), s(2)));
        assert!(!watch.observe((s(1), s(2))));
        // The chain is replaced, the key not yet: wait.
        assert!(!watch.observe((s(3), s(2))));
        // The key follows: still moving.
        assert!(!watch.observe((s(3), s(4))));
        // Both stood still for a check: reload, once.
        assert!(watch.observe((s(3), s(4))));
        assert!(!watch.observe((s(3), s(4))));
    }

    #[test]
    fn a_file_gone_for_a_moment_and_back_as_it_was_is_no_change() {
        let mut watch = Watch::new((s(1), s(2)));
        assert!(!watch.observe((None, s(2))));
        assert!(!watch.observe((s(1), s(2))));
        assert!(!watch.observe((s(1), s(2))));
    }

    #[test]
    fn a_missing_file_that_stays_missing_is_reported_once() {
        let mut watch = Watch::new((s(1), s(2)));
        assert!(!watch.observe((None, s(2))));
        // The reload will be refused (unreadable): asked once, not at every check after.
        assert!(watch.observe((None, s(2))));
        assert!(!watch.observe((None, s(2))));
        assert!(!watch.observe((None, s(2))));
    }

    #[test]
    fn stamps_follow_a_replaced_file() {
        let dir = std::env::temp_dir().join(format!("sluicegate-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cert.pem");
        std::fs::write(&path, b"one").unwrap();
        let before = stamp(&path);
        // Replaced as ACME clients do: a new file renamed over the old name.
        let next = dir.join("cert.pem.new");
        std::fs::write(&next, b"two!").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert_ne!(before, stamp(&path));
        assert_eq!(stamp(&dir.join("absent.pem")), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
