//! State shared by every request of one core: the config snapshot, the registry of long-lived
//! state, metrics, the usage sink and the server settings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwapOption;

use super::body::BodyBudget;
use crate::access_log::AccessLog;
use crate::config::{Registry, SnapshotCell};
use crate::fleet::Fleet;
use crate::metrics::Metrics;
use crate::server::ConnSettings;
use crate::telemetry::Tracer;
use crate::upstream::AddressGuard;
use crate::usage::{UsageSink, PROGRESS_EVERY_EVENTS};

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub conn: ConnSettings,
    pub max_body_bytes: usize,
    /// Time a client has to send a request's whole body once its head arrived.
    pub body_read_timeout: Duration,
    /// Request body bytes held by all requests together (read or being read); past it new
    /// requests are refused with 503 until some end.
    pub max_body_bytes_in_flight: usize,
    /// Usage events that may wait for the drainer before billable requests are refused.
    pub usage_backlog_limit: usize,
    /// Name the pool and member that served in `x-sluicegate-upstream` (operators' debugging;
    /// off by default: it tells tenants the gateway's topology).
    pub expose_upstream: bool,
    /// Content events between two progress records of a stream (and at least one journal
    /// commit interval): the most a crash under-bills a stream by. 0 writes none.
    pub progress_every_events: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            conn: ConnSettings::default(),
            max_body_bytes: 32 * 1024 * 1024,
            body_read_timeout: Duration::from_secs(60),
            max_body_bytes_in_flight: 512 * 1024 * 1024,
            usage_backlog_limit: 200_000,
            progress_every_events: PROGRESS_EVERY_EVENTS,
            expose_upstream: false,
        }
    }
}

pub struct Shared {
    pub config: SnapshotCell,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub usage: UsageSink,
    pub access_log: Option<AccessLog>,
    /// Request body bytes held by all requests (`settings.max_body_bytes_in_flight`).
    pub body_budget: Arc<BodyBudget>,
    /// The fleet whose limits this replica shares, once it joined one.
    pub fleet: OnceLock<Arc<Fleet>>,
    pub settings: ServerSettings,
    /// Request traces for the operator's collector (`None`: tracing is off).
    pub tracer: Option<Arc<Tracer>>,
    /// `GET /metrics` on the data port (`None`: not served there).
    pub metrics_port: Option<super::metrics_port::MetricsPort>,
    draining: AtomicBool,
    /// Cleared by the control plane when a load balancer should stop sending new traffic (the
    /// start of a graceful stop) while requests are still served.
    ready: AtomicBool,
}

impl Shared {
    pub fn new(settings: ServerSettings, usage: UsageSink, access_log: Option<AccessLog>) -> Self {
        let metrics = Arc::new(Metrics::default());
        Self {
            config: Arc::new(ArcSwapOption::empty()),
            registry: Registry::new(metrics.clone(), AddressGuard::new()),
            metrics,
            usage,
            access_log,
            body_budget: BodyBudget::new(settings.max_body_bytes_in_flight),
            fleet: OnceLock::new(),
            settings,
            tracer: None,
            metrics_port: None,
            draining: AtomicBool::new(false),
            ready: AtomicBool::new(true),
        }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Relaxed);
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Why a load balancer should not send this replica new traffic, if it should not.
    pub fn unready_reason(&self) -> Option<&'static str> {
        if self.is_draining() {
            Some("draining")
        } else if !self.ready.load(Ordering::Relaxed) {
            Some("stopping")
        } else if self.config.load().is_none() {
            Some("no configuration yet")
        } else {
            None
        }
    }
}
