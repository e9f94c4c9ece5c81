//! A concurrency cap as one atomic counter; the guard gives the slot back when dropped.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

#[derive(Default)]
pub struct Concurrency {
    current: AtomicU32,
}

pub struct Slot {
    owner: Arc<Concurrency>,
}

impl Concurrency {
    pub fn current(&self) -> u32 {
        self.current.load(Ordering::Relaxed)
    }

    /// Take a slot if fewer than `max` are taken.
    pub fn try_acquire(self: &Arc<Self>, max: u32) -> Option<Slot> {
        self.current
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| (c < max).then_some(c + 1))
            .ok()
            .map(|_| Slot { owner: self.clone() })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.owner.current.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_capped_and_returned() {
        let c = Arc::new(Concurrency::default());
        let a = c.try_acquire(2).unwrap();
        let _b = c.try_acquire(2).unwrap();
        assert!(c.try_acquire(2).is_none());
        drop(a);
        assert!(c.try_acquire(2).is_some());
        assert_eq!(c.current(), 1);
    }
}
