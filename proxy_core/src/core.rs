//! The core object: owns the tokio runtime (on its own threads), the data-plane server, the
//! current config snapshot and the usage sink. Python drives it through `py.rs`; Rust tests drive
//! it directly.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;

use crate::access_log::AccessLog;
use crate::config::{self, ConfigError};
use crate::metrics::{self, FamilySnapshot};
use crate::proxy::{self, ServerSettings, Shared};
use crate::runtime::{Served, StartError};
use crate::server;
use crate::usage::{DrainedBatch, UsageSink};

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("the core is already running on {0}")]
    AlreadyRunning(SocketAddr),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("config version {offered} is older than the one in force ({current})")]
    StaleConfig { offered: u64, current: u64 },
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),
    #[error("key changes need a whole config first")]
    NoConfig,
    #[error("fleet: {0}")]
    Fleet(String),
    #[error("usage journal {path}: {source}")]
    Journal { path: String, source: std::io::Error },
    #[error("tracing: {0}")]
    Tracing(String),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::TlsError),
    #[error("TLS is not configured on the data port")]
    NoTls,
    #[error("access log {path}: {source}")]
    AccessLog { path: String, source: std::io::Error },
}

#[derive(Debug, Clone, Default)]
pub struct CoreOptions {
    /// Runtime worker threads; 0 means one per CPU.
    pub workers: usize,
    /// The scheduler slice each worker thread asks for (`sched.rs`); `None`: the kernel's.
    pub worker_slice: Option<std::time::Duration>,
    pub settings: ServerSettings,
    /// Where the durable usage journal lives; `None` keeps usage events in memory only.
    pub journal_dir: Option<std::path::PathBuf>,
    /// The journal's group commit interval.
    pub journal_sync_interval: std::time::Duration,
    /// Access log target: a file path, `-` for standard error, `None` for no access log.
    pub access_log: Option<String>,
    /// Request traces to an OTLP collector; `None`: off.
    pub tracing: Option<crate::telemetry::TraceSettings>,
    /// Serve `GET /metrics` on the data port to this bearer token (`None`: not there).
    pub metrics_token: Option<String>,
    /// Tenants with metric series of their own at most; the rest count as `other`.
    pub tenant_series: usize,
    /// Size-based rotation of the access log file (`None`: it grows until reopened).
    pub access_log_rotation: Option<crate::log_file::Rotation>,
    /// TLS on the data port; `None` serves plain HTTP.
    pub tls: Option<crate::tls::TlsSettings>,
}

pub struct Core {
    shared: Arc<Shared>,
    tls: Option<Arc<crate::tls::Tls>>,
    workers: usize,
    worker_slice: Option<std::time::Duration>,
    running: Mutex<Option<Served>>,
    /// Serializes `apply_config` so compilations never interleave.
    applying: Mutex<()>,
    syncer: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Serialize)]
struct MetricsView {
    families: Vec<FamilySnapshot>,
}

impl Core {
    /// A stopped core. With a journal directory, the journal is replayed here: its events are
    /// ready for `drain_usage` before the core serves anything.
    pub fn new(options: CoreOptions) -> Result<Self, CoreError> {
        let limit = options.settings.usage_backlog_limit;
        let usage = match &options.journal_dir {
            Some(dir) => UsageSink::with_journal(limit, dir, options.journal_sync_interval)
                .map_err(|source| CoreError::Journal { path: dir.display().to_string(), source })?,
            None => UsageSink::new(limit),
        };
        let tls = match &options.tls {
            Some(settings) => Some(Arc::new(crate::tls::Tls::new(settings)?)),
            None => None,
        };
        let access_log = match &options.access_log {
            Some(target) => Some(
                AccessLog::open(target, options.access_log_rotation)
                    .map_err(|source| CoreError::AccessLog { path: target.clone(), source })?,
            ),
            None => None,
        };
        let mut shared = Shared::new(options.settings, usage, access_log);
        if let Some(tracing) = options.tracing {
            let tracer =
                crate::telemetry::Tracer::start(tracing, shared.registry.guard.clone()).map_err(CoreError::Tracing)?;
            shared.tracer = Some(tracer);
        }
        shared.metrics_port = options.metrics_token.as_deref().map(proxy::MetricsPort::new);
        shared.metrics.set_tenant_series(options.tenant_series);
        let shared = Arc::new(shared);
        let syncer = if shared.usage.is_journaled() {
            let sink = shared.clone();
            let handle = std::thread::Builder::new()
                .name("sluicegate-journal".into())
                .spawn(move || sink.usage.run_syncer())
                .map_err(|source| CoreError::Journal { path: "syncer thread".into(), source })?;
            Some(handle)
        } else {
            None
        };
        Ok(Self {
            shared,
            tls,
            workers: options.workers,
            worker_slice: options.worker_slice,
            running: Mutex::new(None),
            applying: Mutex::new(()),
            syncer: Mutex::new(syncer),
        })
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Bind and start serving; returns the bound address (useful with port 0).
    pub fn start(&self, listen: &str) -> Result<SocketAddr, CoreError> {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = running.as_ref() {
            return Err(CoreError::AlreadyRunning(r.addr));
        }
        self.shared.set_draining(false);
        // What hyper answers to a request head it cannot parse, before any handler runs: once
        // per process, for every core's data port alike.
        hyper::server::conn::http1::set_parse_error_answer(proxy::respond::bad_head);
        let shared = self.shared.clone();
        let tls = self.tls.clone();
        let served = Served::start(
            self.workers,
            "sluicegate-core",
            self.worker_slice,
            listen,
            move |listener, stop| async move {
                let settings = shared.settings.conn.clone();
                let counters = shared.metrics.global.connections.clone();
                if let Some(tls) = &tls {
                    tls.spawn_watch();
                }
                // Health checks live and die with the runtime.
                tokio::spawn(crate::routing::health_check::run(shared.config.clone()));
                if let Some(fleet) = shared.fleet.get() {
                    tokio::spawn(crate::fleet::housekeeping(fleet.clone()));
                }
                tokio::spawn(crate::stats::sample_load(shared.config.clone()));
                let on_refused_head: server::refused_head::OnRefusedHead = {
                    let shared = shared.clone();
                    Arc::new(move |head| proxy::respond::refused_head(&shared, head))
                };
                let handler = move |req| proxy::handle(shared.clone(), req);
                server::serve(listener, settings, counters, tls, handler, on_refused_head, stop).await
            },
        )?;
        tracing::info!(addr = %served.addr, tls = self.tls.is_some(), "data plane listening");
        let addr = served.addr;
        self.shared.registry.guard.add_listeners(&[addr]);
        *running = Some(served);
        Ok(addr)
    }

    /// Whether the data port speaks TLS.
    pub fn tls_enabled(&self) -> bool {
        self.tls.is_some()
    }

    /// The data port's handshake counters (with TLS).
    pub fn tls_handshakes(&self) -> Option<&crate::tls::HandshakeCounters> {
        self.tls.as_deref().map(|tls| &tls.handshakes)
    }

    /// Read the data port's certificate and key files again (SIGHUP): a pair that passes its
    /// checks serves every new connection from now on; a refused one is logged, counted and
    /// returned, and the pair in force stays. Open connections are not touched either way.
    pub fn reload_tls(&self) -> Result<crate::tls::Reloaded, CoreError> {
        let tls = self.tls.as_ref().ok_or(CoreError::NoTls)?;
        tls.reload().map_err(|e| CoreError::Tls(e.into()))
    }

    /// Reopen the access log file under its name (logrotate's convention, on SIGHUP): lines
    /// written from now on go to the file now at that path. Without a file access log, nothing.
    pub fn reopen_access_log(&self) -> Result<(), CoreError> {
        match &self.shared.access_log {
            Some(log) => log.reopen().map_err(|source| CoreError::AccessLog { path: log.target().into(), source }),
            None => Ok(()),
        }
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(|r| r.addr)
    }

    /// Stop accepting, let in-flight requests finish within `grace`, then drop what remains
    /// (each dropped request still emits its usage event) and join the runtime's threads.
    /// Stopping a stopped core does nothing.
    pub fn stop(&self, grace: Duration) {
        let taken = self.running.lock().unwrap_or_else(PoisonError::into_inner).take();
        let Some(running) = taken else {
            return;
        };
        self.shared.set_draining(true);
        let addr = running.addr;
        running
            .stop_with(grace, self.shared.fleet.get().cloned().map(|fleet| async move { fleet.release_all().await }));
        tracing::info!(addr = %addr, "data plane stopped");
    }

    /// Tell the upstream connector about another listener of this process (the admin API's), which
    /// no upstream connection may reach.
    pub fn guard_listeners(&self, addrs: &[SocketAddr]) {
        self.shared.registry.guard.add_listeners(addrs);
    }

    /// The admin API's listener, whose `/metrics` the data port relays (with a metrics token).
    pub fn metrics_source(&self, admin: SocketAddr) -> Result<(), CoreError> {
        match &self.shared.metrics_port {
            Some(port) => port.set_source(admin).map_err(CoreError::Tracing),
            None => Ok(()),
        }
    }

    /// Share this replica's limits with the fleet through Redis (before `start`).
    pub fn join_fleet(&self, settings: crate::fleet::FleetSettings) -> Result<(), CoreError> {
        if self.is_running() {
            return Err(CoreError::Fleet("join the fleet before the core starts".into()));
        }
        let fleet = crate::fleet::Fleet::new(settings).map_err(CoreError::Fleet)?;
        self.shared.fleet.set(fleet).map_err(|_| CoreError::Fleet("the core has joined a fleet already".into()))
    }

    /// The live replicas of the fleet (from the control plane's heartbeats): the divisor of the
    /// local shares while Redis is away.
    pub fn set_fleet_size(&self, replicas: u32) {
        if let Some(fleet) = self.shared.fleet.get() {
            fleet.set_replicas(replicas);
        }
    }

    /// The fleet as this replica sees it (JSON), or `null` outside a fleet.
    pub fn fleet_status_json(&self) -> String {
        match self.shared.fleet.get() {
            Some(fleet) => serde_json::to_string(&fleet.status()).unwrap_or_else(|_| "null".into()),
            None => "null".into(),
        }
    }

    /// Whether `/readyz` on the data port says ready (requests are served either way).
    pub fn set_ready(&self, ready: bool) {
        self.shared.set_ready(ready);
    }

    pub fn is_running(&self) -> bool {
        self.local_addr().is_some()
    }

    pub fn config_version(&self) -> Option<u64> {
        self.shared.config.load().as_ref().map(|s| s.version)
    }

    /// Validate, compile and swap in a whole snapshot. The old one stays in force on any error.
    pub fn apply_config(&self, version: u64, payload: &[u8]) -> Result<u64, CoreError> {
        self.swap(version, |_| config::load(version, payload, &self.shared.registry).map_err(CoreError::from))
    }

    /// Add, replace or remove keys (a JSON `KeyDelta`) on top of the snapshot in force: the
    /// cheap path for key changes when a tenant has many keys. Same version rule as
    /// `apply_config`.
    pub fn apply_key_changes(&self, version: u64, payload: &[u8]) -> Result<u64, CoreError> {
        self.swap(version, |current| {
            let old = current.ok_or(CoreError::NoConfig)?;
            config::load_key_delta(&old, version, payload, &self.shared.registry).map_err(CoreError::from)
        })
    }

    /// Build the next snapshot with `next` and swap it in, or keep the one in force.
    fn swap(
        &self,
        version: u64,
        next: impl FnOnce(Option<Arc<config::Snapshot>>) -> Result<config::Snapshot, CoreError>,
    ) -> Result<u64, CoreError> {
        let _serial = self.applying.lock().unwrap_or_else(PoisonError::into_inner);
        let global = &self.shared.metrics.global;
        let current = self.shared.config.load_full();
        if let Some(current) = current.as_ref().map(|s| s.version) {
            if version < current {
                global.config_rejected.fetch_add(1, Ordering::Relaxed);
                return Err(CoreError::StaleConfig { offered: version, current });
            }
        }
        match next(current) {
            Ok(snapshot) => {
                // Quota figures taken before any request reserves against them.
                let usage = &self.shared.usage;
                crate::limits::adopt_ledger(&snapshot, crate::clock::unix_now() as i64, usage.acked(), |seq, visit| {
                    usage.charges_after(seq, |c| visit(&c.key_id, &c.tenant_id, c.started_at, c.tokens, c.cost_micros))
                });
                self.shared.config.store(Some(Arc::new(snapshot)));
                global.config_applied.fetch_add(1, Ordering::Relaxed);
                Ok(version)
            }
            Err(e) => {
                global.config_rejected.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Force a pool member out for `length` (zero ends the drill). `Err` names what is unknown.
    pub fn drill_member(&self, pool: &str, member: &str, length: Duration) -> Result<(), String> {
        let snapshot = self.shared.config.load_full().ok_or("no configuration yet")?;
        let pool = snapshot.pools.get(pool).ok_or_else(|| format!("unknown pool {pool:?}"))?;
        let member = pool
            .members
            .iter()
            .find(|m| &*m.id == member)
            .ok_or_else(|| format!("unknown member {member:?} in pool {:?}", pool.id))?;
        member.state.drill(length);
        Ok(())
    }

    /// Windowed figures per pool and route, with limits and member health (JSON).
    pub fn status_json(&self, specs: &[crate::stats::WindowSpec]) -> String {
        match self.shared.config.load_full() {
            Some(snapshot) => crate::stats::status_json(&snapshot, crate::clock::unix_now() as u64, specs),
            None => r#"{"now":0,"config_version":0,"pools":[],"routes":[]}"#.into(),
        }
    }

    /// Force a whole pool out for `length` (zero ends the drill): its routes fall back.
    pub fn drill_pool(&self, pool: &str, length: Duration) -> Result<(), String> {
        let snapshot = self.shared.config.load_full().ok_or("no configuration yet")?;
        let pool = snapshot.pools.get(pool).ok_or_else(|| format!("unknown pool {pool:?}"))?;
        pool.state.drill(length);
        Ok(())
    }

    /// Up to `max` usage events, waiting up to `timeout` for the first.
    pub fn drain_usage(&self, max: usize, timeout: Duration) -> DrainedBatch {
        DrainedBatch::new(self.shared.usage.drain(max, timeout))
    }

    /// The control plane has stored every usage event up to `seq`; the journal may drop them.
    pub fn ack_usage(&self, seq: u64) -> Result<(), CoreError> {
        self.shared.usage.ack(seq).map_err(|source| CoreError::Journal { path: "ack".into(), source })
    }

    /// Usage events not yet acknowledged (waiting to be synced, drained or acknowledged).
    pub fn usage_backlog(&self) -> usize {
        self.shared.usage.pending()
    }

    /// Every usage event up to this sequence number is acknowledged (stored by the control
    /// plane). Read before a snapshot's quota figures, it goes in the snapshot as `usage_acked`.
    pub fn usage_acked(&self) -> u64 {
        self.shared.usage.acked()
    }

    pub fn metrics_json(&self) -> String {
        let mut families = metrics::render(&self.shared.metrics);
        families.extend(metrics::render_genai(&self.shared.metrics));
        families.extend(metrics::render_tenants(&self.shared.metrics));
        if let Some(snapshot) = self.shared.config.load_full() {
            families.extend(metrics::pool_gauges(&snapshot));
            let now = crate::clock::unix_now() as i64;
            families.extend(metrics::quota_gauges(&self.shared.metrics, &snapshot, now));
        }
        families.push(FamilySnapshot::gauge(
            "sluicegate_usage_backlog_age_seconds",
            "Age of the oldest usage event the control plane has not stored yet (0: none waits).",
            self.shared.usage.oldest_pending_age(crate::clock::unix_now()),
        ));
        if let Some(log) = &self.shared.access_log {
            families.extend(log.metric_families());
        }
        if let Some(tls) = &self.tls {
            families.extend(tls.metric_families(crate::clock::unix_now() as i64));
        }
        families.push(FamilySnapshot::gauge(
            "sluicegate_usage_backlog",
            "Usage events waiting for the drainer.",
            self.shared.usage.pending() as f64,
        ));
        if let Some(fleet) = self.shared.fleet.get() {
            families.extend(crate::fleet::metric_families(fleet));
        }
        families.push(FamilySnapshot::counter(
            "sluicegate_usage_journal_bytes_total",
            "Bytes this process appended to the usage journal (begin, progress and end records).",
            self.shared.usage.journal_bytes() as f64,
        ));
        if let Some(tracer) = &self.shared.tracer {
            families.extend(tracer.families());
        }
        families.push(FamilySnapshot::gauge(
            "sluicegate_config_version",
            "Version of the config snapshot in force (0 before the first).",
            self.config_version().unwrap_or(0) as f64,
        ));
        serde_json::to_string(&MetricsView { families }).unwrap_or_else(|_| "{\"families\":[]}".into())
    }
}

impl Drop for Core {
    fn drop(&mut self) {
        self.stop(Duration::ZERO);
        if let Some(tracer) = &self.shared.tracer {
            tracer.stop();
        }
        self.shared.usage.stop_syncer();
        if let Some(handle) = self.syncer.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = handle.join();
        }
    }
}
