//! State shared by every request of one core: the config snapshot, the registry of long-lived
//! state, metrics, the usage sink and the server settings.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use crate::access_log::AccessLog;
use crate::config::{Registry, Snapshot};
use crate::metrics::Metrics;
use crate::server::ConnSettings;
use crate::usage::UsageSink;

#[derive(Debug, Clone)]
pub struct ServerSettings {
    pub conn: ConnSettings,
    pub max_body_bytes: usize,
    /// Usage events that may wait for the drainer before billable requests are refused.
    pub usage_backlog_limit: usize,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self { conn: ConnSettings::default(), max_body_bytes: 32 * 1024 * 1024, usage_backlog_limit: 200_000 }
    }
}

pub struct Shared {
    pub config: ArcSwapOption<Snapshot>,
    pub registry: Registry,
    pub metrics: Arc<Metrics>,
    pub usage: UsageSink,
    pub access_log: Option<AccessLog>,
    pub settings: ServerSettings,
    draining: AtomicBool,
}

impl Shared {
    pub fn new(settings: ServerSettings, usage: UsageSink, access_log: Option<AccessLog>) -> Self {
        let metrics = Arc::new(Metrics::default());
        Self {
            config: ArcSwapOption::empty(),
            registry: Registry::new(metrics.clone()),
            metrics,
            usage,
            access_log,
            settings,
            draining: AtomicBool::new(false),
        }
    }

    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    pub fn set_draining(&self, draining: bool) {
        self.draining.store(draining, Ordering::Relaxed);
    }
}
