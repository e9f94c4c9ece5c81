//! The idle connections of one upstream client, by authority: the most recently used one is
//! taken first (its window and the upstream's caches are warm), the oldest is dropped when the
//! stack is full, and one idle past `IDLE_TIMEOUT` is never handed out. A sweep every
//! `SWEEP_EVERY` closes those past it and those the upstream closed, so a quiet pool does not
//! hold the sockets of an upstream that hung up.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::net::TcpStream;
// tokio's clock, which tests can pause; the same as std's in a build.
use tokio::time::Instant;

use super::body::Conn;

/// As long as hyper's pool kept an idle connection before (`pool_idle_timeout`).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(90);
/// Idle connections kept per authority; past it the oldest closes.
const MAX_IDLE: usize = 1024;
/// Authorities one client pools for (a member has one; its health check URL may name another).
const MAX_AUTHORITIES: usize = 8;
const SWEEP_EVERY: Duration = Duration::from_secs(10);

struct Idle {
    conn: Conn,
    since: Instant,
}

struct Stack {
    authority: Box<str>,
    idle: VecDeque<Idle>,
}

#[derive(Default)]
pub struct IdlePool {
    stacks: Mutex<Vec<Stack>>,
    /// The sweeping task runs (started by the first connection put back, on its runtime).
    sweeping: AtomicBool,
}

/// Where a connection goes back to; `None` for an authority past `MAX_AUTHORITIES`.
pub type Slot = Option<usize>;

impl IdlePool {
    pub fn slot(&self, authority: &str) -> Slot {
        let mut stacks = self.stacks.lock().ok()?;
        if let Some(at) = stacks.iter().position(|s| &*s.authority == authority) {
            return Some(at);
        }
        if stacks.len() >= MAX_AUTHORITIES {
            return None;
        }
        stacks.push(Stack { authority: authority.into(), idle: VecDeque::new() });
        Some(stacks.len() - 1)
    }

    /// The most recent idle connection that is still open, if any.
    pub fn take(&self, slot: Slot) -> Option<Conn> {
        let slot = slot?;
        loop {
            let idle = {
                let mut stacks = self.stacks.lock().ok()?;
                let stack = &mut stacks.get_mut(slot)?.idle;
                let now = Instant::now();
                while stack.front().is_some_and(|i| now.saturating_duration_since(i.since) >= IDLE_TIMEOUT) {
                    stack.pop_front();
                }
                stack.pop_back()?
            };
            if still_open(&idle.conn.stream) {
                return Some(idle.conn);
            }
        }
    }

    pub fn put(self: &Arc<Self>, slot: Slot, conn: Conn) {
        let Some(slot) = slot else {
            return;
        };
        if !self.sweeping.load(Ordering::Relaxed) && !self.sweeping.swap(true, Ordering::Relaxed) {
            start_sweeping(Arc::downgrade(self));
        }
        let Ok(mut stacks) = self.stacks.lock() else {
            return;
        };
        let Some(stack) = stacks.get_mut(slot) else {
            return;
        };
        if stack.idle.len() >= MAX_IDLE {
            stack.idle.pop_front();
        }
        stack.idle.push_back(Idle { conn, since: Instant::now() });
    }

    /// Closes the idle connections past `IDLE_TIMEOUT` and those the upstream has closed.
    fn sweep(&self) {
        let now = Instant::now();
        let mut closed = Vec::new();
        if let Ok(mut stacks) = self.stacks.lock() {
            for stack in stacks.iter_mut() {
                let (keep, gone): (VecDeque<Idle>, VecDeque<Idle>) = stack
                    .idle
                    .drain(..)
                    .partition(|i| now.saturating_duration_since(i.since) < IDLE_TIMEOUT && still_open(&i.conn.stream));
                stack.idle = keep;
                closed.extend(gone);
            }
        }
        // Closed outside the lock.
        drop(closed);
    }

    #[cfg(test)]
    pub fn idle_count(&self) -> usize {
        self.stacks.lock().map_or(0, |s| s.iter().map(|s| s.idle.len()).sum())
    }
}

/// Sweeps the pool until it is dropped (or its runtime stops).
fn start_sweeping(pool: Weak<IdlePool>) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(pool) = pool.upgrade() else {
                return;
            };
            pool.sweep();
        }
    });
}

/// An idle connection the upstream has closed (or written to unasked) is readable: reading it
/// without waiting tells, before a request is written to a connection that cannot answer it.
fn still_open(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    async fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let address = listener.local_addr().expect("address");
        let (client, server) = tokio::join!(TcpStream::connect(address), listener.accept());
        (client.expect("connect"), server.expect("accept").0)
    }

    #[tokio::test]
    async fn the_last_returned_open_connection_is_taken_and_a_closed_one_is_skipped() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let pool = Arc::new(IdlePool::default());
        let slot = pool.slot("a:1");
        assert_eq!(pool.slot("a:1"), slot);
        let (first, _first_server) = pair(&listener).await;
        let (second, second_server) = pair(&listener).await;
        let first_port = first.local_addr().expect("address").port();
        pool.put(slot, Conn::new(first));
        pool.put(slot, Conn::new(second));
        // The upstream closes the newer one while it is idle.
        drop(second_server);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let taken = pool.take(slot).expect("the open one");
        assert_eq!(taken.stream.local_addr().expect("address").port(), first_port);
        assert!(pool.take(slot).is_none());
    }

    #[tokio::test]
    async fn a_connection_the_upstream_wrote_to_unasked_is_not_reused() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let pool = Arc::new(IdlePool::default());
        let slot = pool.slot("a:1");
        let (client, mut server) = pair(&listener).await;
        pool.put(slot, Conn::new(client));
        server.write_all(b"HTTP/1.1 200 OK\r\n\r\n").await.expect("write");
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(pool.take(slot).is_none());
        assert_eq!(pool.idle_count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_sweep_closes_what_the_upstream_closed_and_what_idled_too_long() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let pool = Arc::new(IdlePool::default());
        let slot = pool.slot("a:1");
        let (closed, closed_server) = pair(&listener).await;
        let (open, _open_server) = pair(&listener).await;
        pool.put(slot, Conn::new(closed));
        pool.put(slot, Conn::new(open));
        drop(closed_server);
        // Real time for the FIN to arrive; then paused time for the sweeps.
        std::thread::sleep(Duration::from_millis(50));
        tokio::time::sleep(SWEEP_EVERY + Duration::from_millis(1)).await;
        assert_eq!(pool.idle_count(), 1, "the one the upstream closed is gone");
        tokio::time::sleep(IDLE_TIMEOUT).await;
        assert_eq!(pool.idle_count(), 0, "the other idled past the timeout");
    }

    #[test]
    fn authorities_past_the_limit_are_not_pooled() {
        let pool = IdlePool::default();
        for n in 0..MAX_AUTHORITIES {
            assert_eq!(pool.slot(&format!("h{n}:1")), Some(n));
        }
        assert_eq!(pool.slot("one-more:1"), None);
    }
}
