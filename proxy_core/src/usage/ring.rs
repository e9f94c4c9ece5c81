//! A bounded multi-producer multi-consumer ring (D. Vyukov's algorithm, as in crossbeam's
//! `ArrayQueue`) with two additions the usage hand-off needs, kept in the tail word so that they
//! are ordered with every push by the same read-modify-write:
//!
//! - **close**: once closed, no push succeeds (the value comes back to its owner) and pops drain
//!   what is left;
//! - **a sleeping consumer**: a consumer with nothing to pop sets `SLEEP` in the tail and parks;
//!   the one push that clears the bit unparks it. Every other push is a CAS and a load, so a
//!   sleeper is woken once per batch, never per event.
//!
//! This is the crate's one module with `unsafe` code: the slots are cells that the stamps hand
//! from one thread to another. crossbeam's ring cannot be model-checked from here (its atomics are
//! not loom's); this one is, by the loom tests at the bottom (`make loom`), for push, pop, the
//! bound, close and the wake-up, with every interleaving of a few threads.
#![allow(unsafe_code)]

use std::mem::MaybeUninit;
use std::time::Duration;

use crate::sync_shim::{park_timeout, AtomicUsize, HandleCell, Ordering, UnsafeCell};

/// The tail's two flags; positions use the bits below them.
const CLOSED: usize = 1 << (usize::BITS - 1);
const SLEEP: usize = 1 << (usize::BITS - 2);
const FLAGS: usize = CLOSED | SLEEP;

/// Why a value could not be pushed; the value comes back.
#[derive(Debug, PartialEq, Eq)]
pub enum PushError<T> {
    Full(T),
    Closed(T),
}

struct Slot<T> {
    /// The slot's stamp minus its index (so that a zeroed allocation is the initial state): a
    /// push at position `p` may write when the stamp is `p`, a pop at `p` may read when it is
    /// `p + 1`, and the pop leaves `p + capacity` for the next lap.
    stamp: AtomicUsize,
    value: UnsafeCell<MaybeUninit<T>>,
}

#[repr(align(128))]
struct Padded<T>(T);

pub struct Ring<T> {
    head: Padded<AtomicUsize>,
    /// Position of the next push, with `CLOSED` and `SLEEP`.
    tail: Padded<AtomicUsize>,
    slots: Box<[Slot<T>]>,
    mask: usize,
    /// The consumer to unpark when a push clears `SLEEP`.
    sleeper: HandleCell,
}

// SAFETY: values move between threads only through the slots, each slot owned by exactly one
// thread at a time as its stamp says (a push owns it between winning the tail and publishing the
// stamp, a pop between winning the head and publishing the next lap's stamp).
unsafe impl<T: Send> Send for Ring<T> {}
unsafe impl<T: Send> Sync for Ring<T> {}

fn slots<T>(capacity: usize) -> Box<[Slot<T>]> {
    #[cfg(not(feature = "loom"))]
    {
        let layout = std::alloc::Layout::array::<Slot<T>>(capacity).unwrap_or_else(|_| std::process::abort());
        if layout.size() == 0 {
            return (0..capacity).map(|_| Slot::zeroed()).collect();
        }
        // SAFETY: a zeroed `Slot` is a valid initial slot (stamp 0 = its index, value
        // uninitialized); zeroed pages from the allocator stay untouched until the ring reaches
        // them, so a large ring costs no memory until it is used.
        unsafe {
            let ptr = std::alloc::alloc_zeroed(layout).cast::<Slot<T>>();
            if ptr.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, capacity))
        }
    }
    #[cfg(feature = "loom")]
    {
        (0..capacity).map(|_| Slot::zeroed()).collect()
    }
}

impl<T> Slot<T> {
    fn zeroed() -> Self {
        Self { stamp: AtomicUsize::new(0), value: UnsafeCell::new(MaybeUninit::uninit()) }
    }
}

impl<T> Ring<T> {
    /// A ring of `capacity` slots, rounded up to a power of two (at least 2).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        Self {
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            slots: slots(capacity),
            mask: capacity - 1,
            sleeper: HandleCell::default(),
        }
    }

    pub fn capacity(&self) -> usize {
        self.mask + 1
    }

    fn stamp(&self, index: usize) -> usize {
        self.slots[index].stamp.load(Ordering::Acquire).wrapping_add(index)
    }

    fn set_stamp(&self, index: usize, stamp: usize) {
        self.slots[index].stamp.store(stamp.wrapping_sub(index), Ordering::Release);
    }

    /// Add `value`, or hand it back when the ring is full or closed. Unparks a sleeping consumer
    /// if this push is the one that clears its flag.
    pub fn push(&self, value: T) -> Result<(), PushError<T>> {
        let mut tail = self.tail.0.load(Ordering::Relaxed);
        loop {
            if tail & CLOSED != 0 {
                return Err(PushError::Closed(value));
            }
            let pos = tail & !FLAGS;
            let index = pos & self.mask;
            let stamp = self.stamp(index);
            if stamp == pos {
                // The slot is free for this lap: claim the position (and clear SLEEP).
                match self.tail.0.compare_exchange_weak(tail, pos + 1, Ordering::AcqRel, Ordering::Relaxed) {
                    Ok(_) => {
                        // SAFETY: winning the tail at `pos` makes this thread the slot's only
                        // writer until it publishes the stamp below.
                        self.slots[index].value.with_mut(|cell| unsafe { (*cell).write(value) });
                        self.set_stamp(index, pos + 1);
                        if tail & SLEEP != 0 {
                            self.sleeper.unpark();
                        }
                        return Ok(());
                    }
                    Err(now) => tail = now,
                }
            } else if stamp.wrapping_add(self.capacity()) == pos + 1 {
                // The slot still holds the value of the previous lap: the ring is full, unless
                // a pop is under way (then the head has moved).
                let head = self.head.0.load(Ordering::Acquire);
                if head.wrapping_add(self.capacity()) == pos {
                    return Err(PushError::Full(value));
                }
                crate::sync_shim::spin_hint();
                tail = self.tail.0.load(Ordering::Relaxed);
            } else {
                crate::sync_shim::spin_hint();
                tail = self.tail.0.load(Ordering::Relaxed);
            }
        }
    }

    /// The oldest value, or `None` when none is published at the head (empty, or its push not
    /// finished yet).
    pub fn pop(&self) -> Option<T> {
        let mut head = self.head.0.load(Ordering::Relaxed);
        loop {
            let index = head & self.mask;
            let stamp = self.stamp(index);
            if stamp == head + 1 {
                match self.head.0.compare_exchange_weak(head, head + 1, Ordering::AcqRel, Ordering::Relaxed) {
                    Ok(_) => {
                        // SAFETY: the stamp says a push published this slot for this lap, and
                        // winning the head makes this thread its only reader.
                        let value = self.slots[index].value.with_mut(|cell| unsafe { (*cell).assume_init_read() });
                        self.set_stamp(index, head.wrapping_add(self.capacity()));
                        return Some(value);
                    }
                    Err(now) => head = now,
                }
            } else if stamp == head {
                // Not published: empty, or a push between its claim and its stamp.
                return None;
            } else {
                crate::sync_shim::spin_hint();
                head = self.head.0.load(Ordering::Relaxed);
            }
        }
    }

    /// Values pushed and not yet popped (those being pushed included).
    pub fn len(&self) -> usize {
        let tail = self.tail.0.load(Ordering::Acquire) & !FLAGS;
        let head = self.head.0.load(Ordering::Acquire);
        tail.wrapping_sub(head).min(self.capacity())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// No push succeeds from now on; a sleeping consumer is woken to drain what is left.
    pub fn close(&self) {
        let before = self.tail.0.fetch_or(CLOSED, Ordering::AcqRel);
        if before & CLOSED == 0 {
            self.sleeper.unpark();
        }
    }

    pub fn is_closed(&self) -> bool {
        self.tail.0.load(Ordering::Acquire) & CLOSED != 0
    }

    /// Park the calling thread (the consumer) until a push or `close`, or `timeout`. Returns at
    /// once when the ring holds anything or is closed. One consumer sleeps at a time; a second
    /// one only waits out its timeout.
    pub fn wait(&self, timeout: Duration) {
        self.sleeper.register();
        let before = self.tail.0.fetch_or(SLEEP, Ordering::AcqRel);
        let pos = before & !FLAGS;
        if before & CLOSED != 0 || pos != self.head.0.load(Ordering::Acquire) {
            // Something is there (or on its way, its push past the tail already): no sleep.
            self.tail.0.fetch_and(!SLEEP, Ordering::AcqRel);
            crate::sync_shim::spin_hint();
            return;
        }
        park_timeout(timeout);
        self.tail.0.fetch_and(!SLEEP, Ordering::AcqRel);
    }
}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

#[cfg(all(test, not(feature = "loom")))]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn fifo_bounded_and_closable() {
        let ring = Ring::new(3);
        assert_eq!(ring.capacity(), 4);
        for i in 0..4 {
            ring.push(i).unwrap();
        }
        assert_eq!(ring.push(9), Err(PushError::Full(9)));
        assert_eq!(ring.len(), 4);
        assert_eq!(ring.pop(), Some(0));
        ring.push(4).unwrap();
        ring.close();
        assert_eq!(ring.push(5), Err(PushError::Closed(5)));
        let rest: Vec<_> = std::iter::from_fn(|| ring.pop()).collect();
        assert_eq!(rest, vec![1, 2, 3, 4]);
        assert!(ring.is_empty() && ring.is_closed());
    }

    #[test]
    fn laps_wrap_and_values_are_dropped_with_the_ring() {
        let ring = Ring::new(2);
        let counted = Arc::new(());
        for _ in 0..10 {
            ring.push(counted.clone()).unwrap();
            ring.push(counted.clone()).unwrap();
            assert!(ring.pop().is_some() && ring.pop().is_some());
        }
        ring.push(counted.clone()).unwrap();
        drop(ring);
        assert_eq!(Arc::strong_count(&counted), 1);
    }

    #[test]
    fn many_producers_one_consumer_lose_nothing() {
        let ring = Arc::new(Ring::new(64));
        let producers: Vec<_> = (0..4)
            .map(|p| {
                let ring = ring.clone();
                std::thread::spawn(move || {
                    for i in 0..10_000u64 {
                        let mut v = p * 1_000_000 + i;
                        while let Err(PushError::Full(back)) = ring.push(v) {
                            v = back;
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut seen = Vec::new();
        while seen.len() < 40_000 {
            match ring.pop() {
                Some(v) => seen.push(v),
                None => ring.wait(Duration::from_millis(1)),
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        // Each producer's values arrive in its own order.
        for p in 0..4u64 {
            let mine: Vec<_> = seen.iter().filter(|v| **v / 1_000_000 == p).collect();
            assert!(mine.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(mine.len(), 10_000);
        }
    }
}

/// Model checks (`make loom`): every interleaving of a few threads, small rings.
#[cfg(all(test, feature = "loom"))]
mod loom_tests {
    use loom::sync::Arc;
    use loom::thread;

    use super::*;

    #[test]
    fn loom_two_producers_one_consumer_fifo_per_producer() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            let producers: Vec<_> = (0..2)
                .map(|p| {
                    let ring = ring.clone();
                    thread::spawn(move || ring.push(p).is_ok())
                })
                .collect();
            let mut got = Vec::new();
            if let Some(v) = ring.pop() {
                got.push(v);
            }
            let pushed = producers.into_iter().map(|h| h.join().unwrap()).filter(|ok| *ok).count();
            while let Some(v) = ring.pop() {
                got.push(v);
            }
            // Two slots for two values: both fit, each popped once.
            assert_eq!(pushed, 2);
            got.sort_unstable();
            assert_eq!(got, vec![0, 1]);
        });
    }

    #[test]
    fn loom_the_bound_refuses_and_never_overwrites() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            ring.push(0).unwrap();
            let producers: Vec<_> = (1..3)
                .map(|v| {
                    let ring = ring.clone();
                    thread::spawn(move || match ring.push(v) {
                        Ok(()) => None,
                        Err(PushError::Full(back)) => Some(back),
                        Err(PushError::Closed(_)) => panic!("not closed"),
                    })
                })
                .collect();
            let first = ring.pop();
            let refused: Vec<_> = producers.into_iter().filter_map(|h| h.join().unwrap()).collect();
            let mut got: Vec<_> = first.into_iter().chain(std::iter::from_fn(|| ring.pop())).collect();
            got.extend(refused);
            got.sort_unstable();
            // Whatever was refused came back to its producer; nothing was lost or doubled.
            assert_eq!(got, vec![0, 1, 2]);
        });
    }

    #[test]
    fn loom_close_races_a_push_and_nothing_is_lost() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || ring.push(7))
            };
            ring.close();
            let drained: Vec<_> = std::iter::from_fn(|| ring.pop()).collect();
            let outcome = producer.join().unwrap();
            let late: Vec<_> = std::iter::from_fn(|| ring.pop()).collect();
            match outcome {
                // A push that won before the close is drained (now or once it is published).
                Ok(()) => assert_eq!(drained.len() + late.len(), 1),
                Err(PushError::Closed(v)) => assert!(v == 7 && drained.is_empty() && late.is_empty()),
                Err(PushError::Full(_)) => panic!("room for it"),
            }
            assert_eq!(ring.push(8), Err(PushError::Closed(8)));
        });
    }

    #[test]
    fn loom_a_sleeping_consumer_is_woken_by_the_push() {
        loom::model(|| {
            let ring = Arc::new(Ring::new(2));
            let producer = {
                let ring = ring.clone();
                thread::spawn(move || {
                    ring.push(1).unwrap();
                })
            };
            // The consumer parks without a timeout under loom: a lost wake-up is a deadlock,
            // which loom reports.
            let got = loop {
                if let Some(v) = ring.pop() {
                    break v;
                }
                ring.wait(Duration::from_secs(3600));
            };
            assert_eq!(got, 1);
            producer.join().unwrap();
        });
    }
}
