//! Reading a request body under three bounds: the per-request cap (`max_body_bytes`), a deadline
//! (`body_read_timeout`: a client cannot hold a request open by sending slowly), and a budget of
//! body bytes held by all requests together (`max_body_bytes_in_flight`), so that many large or
//! half-sent bodies cannot grow the process without bound. The budget is held until the request
//! ends, because the body is kept for retries and forwarding.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap};
use http_body_util::BodyExt;
use hyper::body::Incoming;

use crate::error::{ErrorKind, GatewayError};

/// Body bytes held by requests, against a limit.
pub struct BodyBudget {
    used: AtomicUsize,
    limit: usize,
}

/// A request's share of the budget; given back when the request ends.
pub struct BodyBytes {
    budget: Arc<BodyBudget>,
    bytes: usize,
}

impl BodyBudget {
    pub fn new(limit: usize) -> Arc<Self> {
        Arc::new(Self { used: AtomicUsize::new(0), limit })
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn try_add(&self, bytes: usize) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= self.limit)
            })
            .is_ok()
    }

    pub fn take(self: &Arc<Self>, bytes: usize) -> Option<BodyBytes> {
        self.try_add(bytes).then(|| BodyBytes { budget: self.clone(), bytes })
    }
}

impl BodyBytes {
    /// Hold at least `total` bytes in all.
    fn grow_to(&mut self, total: usize) -> bool {
        if total <= self.bytes {
            return true;
        }
        let more = total - self.bytes;
        if !self.budget.try_add(more) {
            return false;
        }
        self.bytes = total;
        true
    }
}

impl Drop for BodyBytes {
    fn drop(&mut self) {
        self.budget.used.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

fn too_large(cap: usize) -> GatewayError {
    GatewayError::new(ErrorKind::PayloadTooLarge, format!("the request body is larger than {cap} bytes")).closing()
}

fn busy() -> GatewayError {
    GatewayError::new(ErrorKind::BodyBudget, "the gateway holds too many request bodies right now; try again shortly")
        .with_retry_after(Duration::from_secs(1))
        .closing()
}

/// The limits one body is read under.
pub struct BodyLimits<'a> {
    pub cap: usize,
    pub timeout: Duration,
    pub budget: &'a Arc<BodyBudget>,
}

/// Read a whole request body, or refuse it: 413 past the cap (before reading when the length is
/// declared), 408 past the deadline, 503 when the budget is spent.
pub async fn read_body(
    body: Incoming,
    headers: &HeaderMap,
    limits: BodyLimits<'_>,
) -> Result<(Bytes, BodyBytes), GatewayError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > limits.cap as u64) {
        return Err(too_large(limits.cap));
    }
    let declared = declared.map_or(0, |len| len as usize);
    let mut held = limits.budget.take(declared).ok_or_else(busy)?;
    let collect = async {
        let mut body = body;
        let mut buf = BytesMut::with_capacity(declared);
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| GatewayError::invalid(format!("could not read the request body: {e}")))?;
            let Ok(data) = frame.into_data() else {
                continue; // trailers carry nothing the gateway reads
            };
            let total = buf.len() + data.len();
            if total > limits.cap {
                return Err(too_large(limits.cap));
            }
            if !held.grow_to(total) {
                return Err(busy());
            }
            buf.extend_from_slice(&data);
        }
        Ok(buf.freeze())
    };
    match tokio::time::timeout(limits.timeout, collect).await {
        Ok(Ok(bytes)) => Ok((bytes, held)),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(GatewayError::new(
            ErrorKind::BodyTimeout,
            format!("the request body did not arrive within {} ms", limits.timeout.as_millis()),
        )
        .closing()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_refuses_past_its_limit_and_takes_back_on_drop() {
        let budget = BodyBudget::new(100);
        let mut a = budget.take(60).unwrap();
        assert!(budget.take(50).is_none());
        assert!(a.grow_to(90));
        assert!(!a.grow_to(101));
        let b = budget.take(10).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        drop(b);
        assert_eq!(budget.used(), 0);
    }
}
