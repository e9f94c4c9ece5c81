//! The primitives the lock-free hand-offs are built from, as loom's under the `loom` feature so
//! that `make loom` model-checks those structures (loom explores every interleaving of the
//! atomics and parks it knows about; std's it cannot see). Normal builds get std's, unchanged.

#[cfg(not(feature = "loom"))]
pub use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

#[cfg(feature = "loom")]
pub use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// A cell whose accesses the caller orders itself (loom checks that they never overlap).
#[cfg(not(feature = "loom"))]
pub struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(feature = "loom"))]
impl<T> UnsafeCell<T> {
    pub const fn new(value: T) -> Self {
        Self(std::cell::UnsafeCell::new(value))
    }

    pub fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

#[cfg(feature = "loom")]
pub use loom::cell::UnsafeCell;

/// Park the calling thread until unparked or `timeout`. Under loom the timeout is ignored: a
/// wake-up that never comes shows as a deadlock.
pub fn park_timeout(timeout: Duration) {
    #[cfg(not(feature = "loom"))]
    std::thread::park_timeout(timeout);
    #[cfg(feature = "loom")]
    {
        let _ = timeout;
        loom::thread::park();
    }
}

/// Inside a retry loop: let the other thread finish what it started.
pub fn spin_hint() {
    #[cfg(not(feature = "loom"))]
    std::hint::spin_loop();
    #[cfg(feature = "loom")]
    loom::thread::yield_now();
}

/// The thread a structure's consumer parks on, for the producer that wakes it. Registering is a
/// load when the same thread registers again (the usual case: one syncer, one drainer thread).
#[cfg(not(feature = "loom"))]
#[derive(Default)]
pub struct HandleCell(arc_swap::ArcSwapOption<std::thread::Thread>);

#[cfg(not(feature = "loom"))]
impl HandleCell {
    pub fn register(&self) {
        let me = std::thread::current();
        let known = self.0.load();
        if known.as_ref().is_none_or(|t| t.id() != me.id()) {
            self.0.store(Some(std::sync::Arc::new(me)));
        }
    }

    pub fn unpark(&self) {
        if let Some(thread) = self.0.load().as_ref() {
            thread.unpark();
        }
    }
}

/// Under loom the handle sits behind loom's lock: what is checked is the flag protocol around
/// it, not this cell.
#[cfg(feature = "loom")]
#[derive(Default)]
pub struct HandleCell(loom::sync::Mutex<Option<loom::thread::Thread>>);

#[cfg(feature = "loom")]
impl HandleCell {
    pub fn register(&self) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(loom::thread::current());
        }
    }

    pub fn unpark(&self) {
        if let Ok(slot) = self.0.lock() {
            if let Some(thread) = slot.as_ref() {
                thread.unpark();
            }
        }
    }
}
