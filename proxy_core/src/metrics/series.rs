//! The series groups the request path records into.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::histogram::{Histogram, DURATION_BUCKETS, STAGE_BUCKETS, TOKEN_BUCKETS, TPOT_BUCKETS, TTFT_BUCKETS};
use crate::config::Priority;
use crate::endpoint::Endpoint;
use crate::error::ErrorKind;
use crate::routing::RetryReason;
use crate::server::ConnCounters;

pub const STATUS_CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

pub fn status_class_index(status: u16) -> usize {
    usize::from(status / 100).clamp(1, 5) - 1
}

fn counters<const N: usize>() -> [AtomicU64; N] {
    std::array::from_fn(|_| AtomicU64::new(0))
}

/// One model alias served by one upstream member of one pool.
pub struct LegSeries {
    /// `[endpoint][status class]`
    pub requests: [[AtomicU64; 5]; Endpoint::ALL.len()],
    pub timeouts: AtomicU64,
    pub input_tokens: AtomicU64,
    pub output_tokens: AtomicU64,
    pub ttft: Histogram,
    pub tpot: Histogram,
    pub duration: Histogram,
    pub connect: Histogram,
}

impl Default for LegSeries {
    fn default() -> Self {
        Self {
            requests: std::array::from_fn(|_| counters()),
            timeouts: AtomicU64::new(0),
            input_tokens: AtomicU64::new(0),
            output_tokens: AtomicU64::new(0),
            ttft: Histogram::new(TTFT_BUCKETS),
            tpot: Histogram::new(TPOT_BUCKETS),
            duration: Histogram::new(DURATION_BUCKETS),
            connect: Histogram::new(STAGE_BUCKETS),
        }
    }
}

impl LegSeries {
    pub fn count_request(&self, endpoint: Endpoint, status: u16) {
        self.requests[endpoint.index()][status_class_index(status)].fetch_add(1, Ordering::Relaxed);
    }
}

/// One pool: what the gateway itself adds in front of its members.
pub struct PoolSeries {
    pub queue_wait: [Histogram; Priority::ALL.len()],
    pub overhead: Histogram,
    /// Attempts sent to the pool's members (first tries and retries).
    pub attempts: AtomicU64,
    /// Retries by `RetryReason`.
    pub retries: [AtomicU64; RetryReason::ALL.len()],
}

impl Default for PoolSeries {
    fn default() -> Self {
        Self {
            queue_wait: std::array::from_fn(|_| Histogram::new(STAGE_BUCKETS)),
            overhead: Histogram::new(STAGE_BUCKETS),
            attempts: AtomicU64::new(0),
            retries: counters(),
        }
    }
}

/// Gateway-wide counters.
pub struct GlobalSeries {
    /// Requests answered by the gateway itself, by reason (`ErrorKind`).
    pub rejections: [AtomicU64; ErrorKind::ALL.len()],
    pub connections: Arc<ConnCounters>,
    pub usage_events: AtomicU64,
    pub config_applied: AtomicU64,
    pub config_rejected: AtomicU64,
}

impl Default for GlobalSeries {
    fn default() -> Self {
        Self {
            rejections: counters(),
            connections: Arc::new(ConnCounters::default()),
            usage_events: AtomicU64::new(0),
            config_applied: AtomicU64::new(0),
            config_rejected: AtomicU64::new(0),
        }
    }
}

impl GlobalSeries {
    pub fn reject(&self, kind: ErrorKind) {
        self.rejections[kind.index()].fetch_add(1, Ordering::Relaxed);
    }
}

/// The GenAI operations a leg serves (`gen_ai.operation.name`), by endpoint.
pub const OPERATIONS: [&str; 3] = ["chat", "text_completion", "embeddings"];

pub fn operation_index(endpoint: Endpoint) -> usize {
    match endpoint {
        Endpoint::Completions => 1,
        Endpoint::Embeddings => 2,
        Endpoint::ChatCompletions | Endpoint::Messages | Endpoint::Responses | Endpoint::Models => 0,
    }
}

/// `error.type` of `gen_ai.server.request.duration`: empty for a request that went well.
pub const ERROR_TYPES: [&str; 6] = ["", "timeout", "upstream_error", "client_cancelled", "http_4xx", "http_5xx"];

/// One operation on one upstream member, in the OpenTelemetry GenAI conventions' instruments.
pub struct OpSeries {
    pub ttft: Histogram,
    pub tpot: Histogram,
    /// By `ERROR_TYPES`.
    pub duration: [Histogram; ERROR_TYPES.len()],
    pub input_tokens: Histogram,
    pub output_tokens: Histogram,
}

impl Default for OpSeries {
    fn default() -> Self {
        Self {
            ttft: Histogram::new(TTFT_BUCKETS),
            tpot: Histogram::new(TPOT_BUCKETS),
            duration: std::array::from_fn(|_| Histogram::new(DURATION_BUCKETS)),
            input_tokens: Histogram::new(TOKEN_BUCKETS),
            output_tokens: Histogram::new(TOKEN_BUCKETS),
        }
    }
}

/// The GenAI series of one model alias on one upstream member: labelled by provider, request
/// and response model, server address and port, pool and member.
#[derive(Default)]
pub struct GenAiSeries {
    pub ops: [OpSeries; OPERATIONS.len()],
}

/// One tenant (or `other`, past the bound of tenants with series of their own).
pub struct TenantSeries {
    /// By status class.
    pub requests: [AtomicU64; 5],
    pub input_tokens: AtomicU64,
    pub output_tokens: AtomicU64,
    pub cost_micros: AtomicU64,
}

impl Default for TenantSeries {
    fn default() -> Self {
        Self {
            requests: counters(),
            input_tokens: AtomicU64::new(0),
            output_tokens: AtomicU64::new(0),
            cost_micros: AtomicU64::new(0),
        }
    }
}

impl TenantSeries {
    pub fn count(&self, status: u16, input: u64, output: u64, cost_micros: u64) {
        self.requests[status_class_index(status)].fetch_add(1, Ordering::Relaxed);
        self.input_tokens.fetch_add(input, Ordering::Relaxed);
        self.output_tokens.fetch_add(output, Ordering::Relaxed);
        self.cost_micros.fetch_add(cost_micros, Ordering::Relaxed);
    }
}
