//! The request path's threads ask the kernel for a short scheduler slice.
//!
//! The core shares its CPUs with the control plane's threads (the usage drainer, the admin API).
//! Under Linux's EEVDF scheduler a thread that is running keeps its CPU until its slice (about
//! a millisecond by default) is used, so a worker woken by a request while the drainer runs a
//! batch waited up to that long: the c=1 tail of `serve` sat a millisecond and more above the
//! data plane's alone (bench/README.md). A thread with a shorter slice than the one running
//! preempts it at wake-up (kernel 6.12 and later). The slice is a request of the thread's own
//! (`sched_setattr` with `sched_runtime` on a fair policy): it needs no privilege, keeps the
//! thread's policy and nice value, and gives no extra CPU share. Older kernels ignore the field
//! for fair policies; a kernel or sandbox that refuses the call leaves the default, logged once
//! per thread at debug level.

use std::time::Duration;

/// Ask for `slice` as the calling thread's scheduler slice (the kernel clamps it to 0.1-100 ms).
pub fn set_thread_slice(slice: Duration) {
    #[cfg(target_os = "linux")]
    if let Err(e) = linux::set_slice(slice) {
        tracing::debug!(error = %e, "the kernel kept its default scheduler slice for this thread");
    }
    #[cfg(not(target_os = "linux"))]
    let _ = slice;
}

#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
mod linux {
    use std::io;
    use std::time::Duration;

    /// `struct sched_attr` as of its first version (48 bytes); the kernel takes its size.
    #[repr(C)]
    #[derive(Default)]
    struct SchedAttr {
        size: u32,
        policy: u32,
        flags: u64,
        nice: i32,
        priority: u32,
        runtime: u64,
        deadline: u64,
        period: u64,
    }

    const SCHED_OTHER: u32 = 0;
    const SCHED_BATCH: u32 = 3;

    const SIZE: u32 = std::mem::size_of::<SchedAttr>() as u32;

    /// The calling thread's scheduling attributes.
    fn current() -> io::Result<SchedAttr> {
        let mut attr = SchedAttr::default();
        // SAFETY: `attr` is a live, writable `sched_attr` of `SIZE` bytes; pid 0 is this thread.
        let read = unsafe { libc::syscall(libc::SYS_sched_getattr, 0, &mut attr as *mut SchedAttr, SIZE, 0) };
        if read != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(attr)
    }

    pub fn set_slice(slice: Duration) -> io::Result<()> {
        let mut attr = current()?;
        // Only a fair policy has a slice; an operator's real-time or idle choice stays as it is.
        if attr.policy != SCHED_OTHER && attr.policy != SCHED_BATCH {
            return Ok(());
        }
        attr.size = SIZE;
        attr.flags = 0;
        attr.runtime = u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX);
        // SAFETY: `attr` is a live `sched_attr` of `SIZE` bytes, read-only for the kernel.
        let written = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        if written != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn current_runtime() -> u64 {
            current().expect("sched_getattr").runtime
        }

        #[test]
        fn a_thread_gets_the_slice_it_asks_for_and_keeps_its_nice_value() {
            std::thread::spawn(|| {
                // SAFETY: getpriority reads this thread's nice value.
                let nice = || unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
                let nice_before = nice();
                // A kernel with custom slices (6.12+) reports the slice in force; older ones 0.
                let before = current_runtime();
                set_slice(Duration::from_micros(300)).expect("sched_setattr");
                let after = current_runtime();
                if before == 0 {
                    assert_eq!(after, 0);
                } else {
                    assert_eq!(after, 300_000);
                }
                assert_eq!(nice(), nice_before);
            })
            .join()
            .expect("thread");
        }
    }
}
