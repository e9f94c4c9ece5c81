//! The PyO3 shim: types that cross to Python and nothing else. Every blocking call releases the
//! GIL (`Python::detach`); the data plane's threads never take it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::auth;
use crate::core::{Core, CoreError, CoreOptions};
use crate::ledger::{Fields, LedgerWriter, Library, RollupSpec, Scalar, Statements, WriteError};
use crate::proxy::ServerSettings;
use crate::server::ConnSettings;
use sluicegate_tools::cli::CommandLineError;
use sluicegate_tools::loadgen::{self, BenchArgs};
use sluicegate_tools::sim::{SimArgs, Simulator};

create_exception!(_core, SluicegateError, PyException, "Base class of every error the core raises.");
create_exception!(
    _core,
    ConfigError,
    SluicegateError,
    "A config snapshot was refused; the previous one stays in force."
);
create_exception!(_core, StaleConfigError, ConfigError, "The snapshot's version is older than the one in force.");
create_exception!(_core, StartError, SluicegateError, "A server could not start (address in use, bad address).");
create_exception!(
    _core,
    JournalError,
    SluicegateError,
    "The usage journal could not be opened, written or acknowledged."
);
create_exception!(
    _core,
    TlsError,
    SluicegateError,
    "A TLS certificate and key pair was refused (unreadable, mismatched, expired); args are (message, reason)."
);
create_exception!(_core, LogError, SluicegateError, "A log file could not be opened or reopened.");
create_exception!(_core, StateError, SluicegateError, "The call does not fit the object's state (already running).");
create_exception!(
    _core,
    LedgerError,
    SluicegateError,
    "The ledger's database could not be opened or failed a batch (busy past its timeout, I/O); a later try may succeed."
);
create_exception!(
    _core,
    UsageError,
    SluicegateError,
    "Command-line arguments were refused, or help was asked for: args are (message, exit_code)."
);

fn core_error(e: CoreError) -> PyErr {
    match e {
        // args: (message, path of the field at fault, what is wrong with it)
        CoreError::Config(ref c) => ConfigError::new_err((e.to_string(), c.path.clone(), c.message.clone())),
        CoreError::StaleConfig { .. } => StaleConfigError::new_err(e.to_string()),
        CoreError::NoConfig => StateError::new_err(e.to_string()),
        CoreError::Start(_) => StartError::new_err(e.to_string()),
        CoreError::AlreadyRunning(_) => StateError::new_err(e.to_string()),
        CoreError::Journal { .. } => JournalError::new_err(e.to_string()),
        CoreError::Fleet(_) | CoreError::NoTls => StateError::new_err(e.to_string()),
        CoreError::Tls(ref t) => TlsError::new_err((e.to_string(), t.reason())),
        CoreError::AccessLog { .. } => LogError::new_err(e.to_string()),
        CoreError::Tracing(_) => pyo3::exceptions::PyValueError::new_err(e.to_string()),
    }
}

fn usage_error(e: CommandLineError) -> PyErr {
    UsageError::new_err((e.message, e.exit_code))
}

/// Size-based rotation from its two arguments: `max_bytes` 0 is none.
fn rotation(max_bytes: u64, keep: u32) -> PyResult<Option<crate::log_file::Rotation>> {
    if max_bytes == 0 {
        return Ok(None);
    }
    if keep == 0 || keep > 1000 {
        return Err(pyo3::exceptions::PyValueError::new_err("rotate_keep must be 1..1000 with rotation on"));
    }
    Ok(Some(crate::log_file::Rotation { max_bytes, keep }))
}

fn seconds_arg(value: f64, name: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        pyo3::exceptions::PyValueError::new_err(format!("{name} must be a non-negative number of seconds"))
    })
}

/// The data plane: a relay on its own tokio runtime, configured by whole snapshots.
#[pyclass(frozen, name = "Core", module = "sluicegate._core")]
struct PyCore {
    inner: Arc<Core>,
}

#[pymethods]
impl PyCore {
    #[new]
    /// With `journal_dir`, usage events are journaled there, and the journal is replayed now:
    /// drain (and acknowledge) its events before serving. Raises JournalError if it cannot be
    /// opened. Its records are made durable together every `journal_sync_ms`; a stream journals
    /// what it relayed every `progress_every_events` content events (0: never). `access_log` is a
    /// file path or `-` (standard error) for one JSON line per request; with
    /// `access_log_rotate_bytes` > 0 the file rotates before it would pass that size, keeping
    /// `access_log_rotate_keep` rotated files. With `tls_cert_file` and `tls_key_file` (PEM) the
    /// data port speaks TLS only (TLS 1.2/1.3, ALPN h2 and http/1.1); the files are checked for a
    /// change every `tls_watch_ms` (0: only `reload_tls`). Raises TlsError for a refused pair,
    /// LogError for an access log that cannot be opened.
    ///
    /// With `trace_endpoint` (an OTLP/HTTP traces URL), requests are traced: the ratio
    /// `trace_sample_ratio` of traces (decided on the trace id), and always errors and requests
    /// slower than `trace_slow_ms`; `trace_parent_based` also keeps what the client's
    /// `traceparent` marked sampled. At most `trace_queue` traces wait for the exporter (more
    /// are dropped and counted), sent `trace_batch` at a time after `trace_batch_delay_ms`.
    /// `worker_slice_us` is the scheduler slice the core's threads ask for (0: the kernel's
    /// default): a short one lets a woken worker preempt other threads of the process at once.
    /// `metrics_token` serves `GET /metrics` on the data port to that bearer token (see
    /// `metrics_source`); `tenant_series` bounds the tenants with series of their own.
    #[pyo3(signature = (*, workers=0, worker_slice_us=100, max_body_bytes=33554432, header_read_timeout_ms=5000, max_connections=25000, max_connections_per_client=4096, h2_max_concurrent_streams=100, body_read_timeout_ms=60000, max_body_bytes_in_flight=536870912, usage_backlog_limit=200000, expose_upstream=false, journal_dir=None, journal_sync_ms=10, progress_every_events=16, access_log=None, access_log_rotate_bytes=0, access_log_rotate_keep=5, tls_cert_file=None, tls_key_file=None, tls_watch_ms=1000, trace_endpoint=None, trace_sample_ratio=0.1, trace_slow_ms=5000, trace_parent_based=false, trace_queue=2048, trace_batch=512, trace_batch_delay_ms=1000, trace_export_timeout_ms=10000, trace_service_name=None, trace_service_instance=None, metrics_token=None, tenant_series=100))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        workers: usize,
        worker_slice_us: u64,
        max_body_bytes: usize,
        header_read_timeout_ms: u64,
        max_connections: usize,
        max_connections_per_client: u32,
        h2_max_concurrent_streams: u32,
        body_read_timeout_ms: u64,
        max_body_bytes_in_flight: usize,
        usage_backlog_limit: usize,
        expose_upstream: bool,
        journal_dir: Option<std::path::PathBuf>,
        journal_sync_ms: u64,
        progress_every_events: u64,
        access_log: Option<String>,
        access_log_rotate_bytes: u64,
        access_log_rotate_keep: u32,
        tls_cert_file: Option<std::path::PathBuf>,
        tls_key_file: Option<std::path::PathBuf>,
        tls_watch_ms: u64,
        trace_endpoint: Option<String>,
        trace_sample_ratio: f64,
        trace_slow_ms: u64,
        trace_parent_based: bool,
        trace_queue: usize,
        trace_batch: usize,
        trace_batch_delay_ms: u64,
        trace_export_timeout_ms: u64,
        trace_service_name: Option<String>,
        trace_service_instance: Option<String>,
        metrics_token: Option<String>,
        tenant_series: usize,
    ) -> PyResult<Self> {
        let positive = [
            ("max_connections", max_connections as u64),
            ("max_body_bytes", max_body_bytes as u64),
            ("header_read_timeout_ms", header_read_timeout_ms),
            ("body_read_timeout_ms", body_read_timeout_ms),
            ("max_body_bytes_in_flight", max_body_bytes_in_flight as u64),
            ("journal_sync_ms", journal_sync_ms),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(pyo3::exceptions::PyValueError::new_err(format!("{name} must be positive")));
        }
        if max_body_bytes_in_flight < max_body_bytes {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "max_body_bytes_in_flight must be at least max_body_bytes",
            ));
        }
        let tls = match (tls_cert_file, tls_key_file) {
            (Some(cert_file), Some(key_file)) => Some(crate::tls::TlsSettings {
                cert_file,
                key_file,
                watch_interval: (tls_watch_ms > 0).then(|| Duration::from_millis(tls_watch_ms)),
            }),
            (None, None) => None,
            _ => {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "tls_cert_file and tls_key_file go together: give both or neither",
                ))
            }
        };
        let access_log_rotation = rotation(access_log_rotate_bytes, access_log_rotate_keep)?;
        let options = CoreOptions {
            workers,
            worker_slice: (worker_slice_us > 0).then(|| Duration::from_micros(worker_slice_us)),
            settings: ServerSettings {
                conn: ConnSettings {
                    header_read_timeout: Duration::from_millis(header_read_timeout_ms),
                    max_connections,
                    max_connections_per_client,
                    h2_max_concurrent_streams,
                },
                max_body_bytes,
                body_read_timeout: Duration::from_millis(body_read_timeout_ms),
                max_body_bytes_in_flight,
                usage_backlog_limit,
                expose_upstream,
                progress_every_events,
            },
            journal_dir,
            journal_sync_interval: Duration::from_millis(journal_sync_ms),
            access_log,
            access_log_rotation,
            tls,
            tracing: match trace_endpoint {
                None => None,
                Some(endpoint) => Some(crate::telemetry::TraceSettings {
                    endpoint: endpoint
                        .parse()
                        .map_err(|_| pyo3::exceptions::PyValueError::new_err("trace_endpoint is not a valid URL"))?,
                    sampler: crate::telemetry::Sampler {
                        ratio: trace_sample_ratio,
                        slow: Duration::from_millis(trace_slow_ms),
                        parent_based: trace_parent_based,
                    },
                    queue: trace_queue,
                    batch: trace_batch,
                    batch_delay: Duration::from_millis(trace_batch_delay_ms),
                    export_timeout: Duration::from_millis(trace_export_timeout_ms),
                    service_name: trace_service_name.unwrap_or_else(|| "sluicegate".into()),
                    service_instance: trace_service_instance.unwrap_or_default(),
                }),
            },
            metrics_token: match metrics_token {
                Some(token) if token.len() < 16 => {
                    return Err(pyo3::exceptions::PyValueError::new_err("metrics_token must be at least 16 characters"))
                }
                other => other,
            },
            tenant_series,
        };
        let core = py.detach(move || Core::new(options)).map_err(core_error)?;
        Ok(Self { inner: Arc::new(core) })
    }

    /// Read the data port's certificate and key files again (SIGHUP). True: a new pair serves
    /// new connections from now on; False: the files hold the pair in force. Raises TlsError
    /// (args: message, reason) for a refused pair, which is also logged and counted, and the
    /// pair in force stays; StateError without TLS. Open connections are never touched.
    fn reload_tls(&self, py: Python<'_>) -> PyResult<bool> {
        let core = self.inner.clone();
        py.detach(move || core.reload_tls()).map(|outcome| outcome == crate::tls::Reloaded::Swapped).map_err(core_error)
    }

    /// Reopen the access log file under its name (after logrotate renamed it). Raises LogError
    /// if it cannot be opened; the file in use stays in use.
    fn reopen_access_log(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.inner.clone();
        py.detach(move || core.reopen_access_log()).map_err(core_error)
    }

    /// Whether the data port speaks TLS.
    #[getter]
    fn tls(&self) -> bool {
        self.inner.tls_enabled()
    }

    /// Bind `listen_addr` ("host:port"; port 0 picks one) and serve. Returns the bound address.
    fn start(&self, py: Python<'_>, listen_addr: &str) -> PyResult<String> {
        let core = self.inner.clone();
        let listen = listen_addr.to_string();
        py.detach(move || core.start(&listen)).map(|addr| addr.to_string()).map_err(core_error)
    }

    /// Share this replica's limits with a fleet through Redis (before `start`). `replica` names
    /// this process in the store (unique per start); `fail_closed` lists the limit kinds
    /// (`rpm`, `tpm`, `concurrency`, `quota`) refused rather than shared locally while Redis is
    /// away; `timeout_ms` is the longest wait for Redis on the request path.
    #[pyo3(signature = (redis_url, *, prefix, replica, fail_closed=Vec::new(), timeout_ms=50))]
    fn join_fleet(
        &self,
        redis_url: String,
        prefix: String,
        replica: String,
        fail_closed: Vec<String>,
        timeout_ms: u64,
    ) -> PyResult<()> {
        let fail_closed =
            crate::fleet::FailClosed::parse(&fail_closed).map_err(pyo3::exceptions::PyValueError::new_err)?;
        if timeout_ms == 0 || prefix.is_empty() || replica.is_empty() {
            return Err(pyo3::exceptions::PyValueError::new_err("timeout_ms, prefix and replica must not be empty"));
        }
        let settings = crate::fleet::FleetSettings {
            redis_url,
            prefix,
            replica,
            fail_closed,
            timeout: Duration::from_millis(timeout_ms),
        };
        self.inner.join_fleet(settings).map_err(core_error)
    }

    /// The live replicas of the fleet: what the local shares divide by while Redis is away.
    fn set_fleet_size(&self, replicas: u32) {
        self.inner.set_fleet_size(replicas);
    }

    /// The fleet as this replica sees it (JSON: mode, replicas, Redis calls...), or `null`.
    #[getter]
    fn fleet_status(&self) -> String {
        self.inner.fleet_status_json()
    }

    /// Tell load balancers (through `GET /readyz` on the data port) to stop or resume sending new
    /// traffic; requests are served either way.
    fn set_ready(&self, ready: bool) {
        self.inner.set_ready(ready);
    }

    /// The admin API's listener ("host:port"): with a `metrics_token`, `GET /metrics` on the
    /// data port relays its exposition.
    fn metrics_source(&self, admin_addr: &str) -> PyResult<()> {
        let addr = admin_addr.parse::<std::net::SocketAddr>().map_err(|_| {
            pyo3::exceptions::PyValueError::new_err(format!("{admin_addr:?} is not a host:port address"))
        })?;
        self.inner.metrics_source(addr).map_err(core_error)
    }

    /// Other listeners of this process ("host:port", e.g. the admin API's): no upstream
    /// connection may reach them (nor the data port, which the core adds itself).
    fn guard_listeners(&self, addrs: Vec<String>) -> PyResult<()> {
        let mut parsed = Vec::with_capacity(addrs.len());
        for addr in &addrs {
            let socket = addr
                .parse::<std::net::SocketAddr>()
                .map_err(|_| pyo3::exceptions::PyValueError::new_err(format!("{addr:?} is not a host:port address")))?;
            parsed.push(socket);
        }
        self.inner.guard_listeners(&parsed);
        Ok(())
    }

    /// Stop accepting, let in-flight requests finish within the grace period, then join every
    /// thread. A stopped core may be started again.
    #[pyo3(signature = (grace_seconds=30.0))]
    fn stop(&self, py: Python<'_>, grace_seconds: f64) -> PyResult<()> {
        let grace = seconds_arg(grace_seconds, "grace_seconds")?;
        let core = self.inner.clone();
        py.detach(move || core.stop(grace));
        Ok(())
    }

    /// Validate, compile and swap in a whole config snapshot; returns the version (the ACK).
    /// Raises ConfigError naming the field at fault (the NACK); the old snapshot stays.
    fn apply_config(&self, py: Python<'_>, version: u64, payload: &str) -> PyResult<u64> {
        let core = self.inner.clone();
        let payload = payload.as_bytes().to_vec();
        py.detach(move || core.apply_config(version, &payload)).map_err(core_error)
    }

    /// Add, replace or remove keys on top of the snapshot in force: `payload` is JSON
    /// `{"upsert": [key, ...], "remove": [key id, ...]}` with keys as in a whole snapshot.
    /// Same version rule and errors as `apply_config`; StateError before any config.
    fn apply_key_changes(&self, py: Python<'_>, version: u64, payload: &str) -> PyResult<u64> {
        let core = self.inner.clone();
        let payload = payload.as_bytes().to_vec();
        py.detach(move || core.apply_key_changes(version, &payload)).map_err(core_error)
    }

    /// Force a pool member out for `seconds` (0 ends the drill). Raises ValueError for an
    /// unknown pool or member.
    fn drill_member(&self, pool: &str, member: &str, seconds: f64) -> PyResult<()> {
        let length = seconds_arg(seconds, "seconds")?;
        self.inner.drill_member(pool, member, length).map_err(pyo3::exceptions::PyValueError::new_err)
    }

    /// Force a whole pool out for `seconds` (0 ends the drill); its routes fall back.
    fn drill_pool(&self, pool: &str, seconds: f64) -> PyResult<()> {
        let length = seconds_arg(seconds, "seconds")?;
        self.inner.drill_pool(pool, length).map_err(pyo3::exceptions::PyValueError::new_err)
    }

    /// Windowed figures per pool and route, with limits and member health, as JSON: what
    /// `sluicegate status` and the doctor read. `windows` is a list of (name, seconds, ends
    /// seconds ago); the default is 1m, 5m, 1h and prev_5m (the five minutes before the last one).
    #[pyo3(signature = (windows=None))]
    fn status_snapshot(&self, py: Python<'_>, windows: Option<Vec<(String, u64, u64)>>) -> PyResult<String> {
        let specs = match windows {
            None => crate::stats::default_windows(),
            Some(list) => {
                let mut specs = Vec::with_capacity(list.len());
                for (name, seconds, ends_ago) in list {
                    if seconds == 0 || seconds > 3600 || ends_ago > 3600 {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "window {name:?}: seconds must be 1..3600 and end at most 3600 s ago"
                        )));
                    }
                    specs.push(crate::stats::WindowSpec { name, seconds, ends_ago });
                }
                specs
            }
        };
        let core = self.inner.clone();
        Ok(py.detach(move || core.status_json(&specs)))
    }

    /// Every metric as JSON: {"families": [{name, type, help, labels, samples}]}.
    fn metrics_snapshot(&self, py: Python<'_>) -> String {
        let core = self.inner.clone();
        py.detach(move || core.metrics_json())
    }

    /// Up to `max` usage events as a JSON array (UTF-8 `bytes`, the events separated by `,` and a
    /// newline: `usage::batch`), waiting up to `timeout_ms` for the first. Written straight into the `bytes` object: no `str` (a UTF-8 check and a copy
    /// more), no intermediate buffer of the whole batch.
    #[pyo3(signature = (max=1000, timeout_ms=0))]
    fn drain_usage<'py>(&self, py: Python<'py>, max: usize, timeout_ms: u64) -> PyResult<Bound<'py, PyBytes>> {
        let core = self.inner.clone();
        let batch = py.detach(move || core.drain_usage(max, Duration::from_millis(timeout_ms)));
        PyBytes::new_with(py, batch.json_len(), |out| {
            batch.write_json(out);
            Ok(())
        })
    }

    /// Every event up to `seq` is stored: the journal may forget them. Raises JournalError.
    fn ack_usage(&self, py: Python<'_>, seq: u64) -> PyResult<()> {
        let core = self.inner.clone();
        py.detach(move || core.ack_usage(seq)).map_err(core_error)
    }

    /// Usage events not yet acknowledged (journaled, ready or handed out).
    #[getter]
    fn usage_backlog(&self) -> usize {
        self.inner.usage_backlog()
    }

    /// Every usage event up to this sequence number is acknowledged; read it before the
    /// ledger's quota figures and send it with them as the snapshot's `usage_acked`.
    #[getter]
    fn usage_acked(&self) -> u64 {
        self.inner.usage_acked()
    }

    #[getter]
    fn running(&self) -> bool {
        self.inner.is_running()
    }

    #[getter]
    fn address(&self) -> Option<String> {
        self.inner.local_addr().map(|a| a.to_string())
    }

    #[getter]
    fn config_version(&self) -> Option<u64> {
        self.inner.config_version()
    }
}

/// The simulated upstream, started on construction.
#[pyclass(frozen, name = "Simulator", module = "sluicegate._core")]
struct PySimulator {
    inner: Mutex<Option<Simulator>>,
    address: String,
}

#[pymethods]
impl PySimulator {
    /// `args` are `sluicegate sim` command-line arguments. Raises UsageError for bad arguments
    /// or `--help` (the message is the text to print), StartError if it cannot listen.
    #[new]
    fn new(py: Python<'_>, args: Vec<String>) -> PyResult<Self> {
        let parsed = SimArgs::parse_from_args(&args).map_err(usage_error)?;
        let sim = py.detach(move || Simulator::start(parsed)).map_err(|e| StartError::new_err(e.to_string()))?;
        let address = sim.addr().to_string();
        Ok(Self { inner: Mutex::new(Some(sim)), address })
    }

    #[getter]
    fn address(&self) -> String {
        self.address.clone()
    }

    /// Stop serving and flush the record file. Stopping twice does nothing.
    #[pyo3(signature = (grace_seconds=5.0))]
    fn stop(&self, py: Python<'_>, grace_seconds: f64) -> PyResult<()> {
        let grace = seconds_arg(grace_seconds, "grace_seconds")?;
        let sim = self.inner.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(sim) = sim {
            py.detach(move || sim.stop(grace));
        }
        Ok(())
    }
}

/// The usage ledger's SQLite writer: batches as `Core.drain_usage` hands them out, stored by the
/// core through the SQLite library this process loaded for Python's `sqlite3` (`library`: the
/// path of the `_sqlite3` module, already imported). The SQL and the fields are the caller's.
#[pyclass(frozen, name = "SqliteLedger", module = "sluicegate._core")]
struct PySqliteLedger {
    inner: Mutex<Option<LedgerWriter>>,
}

#[pymethods]
impl PySqliteLedger {
    /// Opens `path` and prepares the statements; `setup` runs first (PRAGMAs). `defaults`: the
    /// value of each field that events of an earlier release may lack. `insert` takes the
    /// fields, `started_at` as the stored text, then the batch's clock; `rollup` adds one
    /// bucket's sums: (granularity, bucket, the `group` fields, requests, the `sums` fields,
    /// errors: a `status` of 400 or more or an outcome of `error_outcomes`), per each of
    /// `granularities` (name, seconds). Raises LedgerError when the library, the database or a
    /// statement cannot be had.
    #[new]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        library: String,
        path: String,
        fields: Vec<String>,
        defaults: Vec<(String, Option<i64>)>,
        setup: Vec<String>,
        insert: String,
        rollup: String,
        granularities: Vec<(String, i64)>,
        group: Vec<String>,
        sums: Vec<String>,
        error_outcomes: Vec<String>,
    ) -> PyResult<Self> {
        let defaults = defaults.into_iter().map(|(name, v)| (name, v.map_or(Scalar::Null, Scalar::Int))).collect();
        let fields = Fields::new(fields, defaults).map_err(pyo3::exceptions::PyValueError::new_err)?;
        let statements = Statements { setup, insert, rollup };
        let spec = RollupSpec { granularities, group, sums, error_outcomes };
        let writer = py.detach(move || {
            let lib = Library::of_loaded(&library).map_err(LedgerError::new_err)?;
            LedgerWriter::open(lib, &path, &statements, fields, &spec).map_err(|e| LedgerError::new_err(e.to_string()))
        })?;
        Ok(Self { inner: Mutex::new(Some(writer)) })
    }

    /// Stores `batch` in one transaction; returns (rows inserted, events, highest seq, pauses
    /// taken). With a
    /// `slice`, gives up the CPU (`std::thread::yield_now`: `sched_yield`) after every `slice` rows. Raises ValueError when
    /// the batch cannot be stored as it is (malformed, a value the database refuses: nothing is
    /// stored), LedgerError when the database failed, StateError once closed.
    #[pyo3(signature = (batch, slice=0))]
    fn write(
        &self,
        py: Python<'_>,
        batch: &Bound<'_, PyBytes>,
        slice: usize,
    ) -> PyResult<(u64, usize, Option<i64>, u64)> {
        let bytes = batch.as_bytes();
        let result = py.detach(|| {
            let mut guard = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let writer = guard.as_mut().ok_or(None)?;
            writer.write(bytes, slice, &mut std::thread::yield_now).map_err(Some)
        });
        match result {
            Ok(stored) => Ok((stored.inserted, stored.events, stored.last_seq, stored.pauses)),
            Err(None) => Err(StateError::new_err("the ledger writer is closed")),
            Err(Some(WriteError::Refused(why))) => Err(pyo3::exceptions::PyValueError::new_err(why)),
            Err(Some(e @ WriteError::Database(_))) => Err(LedgerError::new_err(e.to_string())),
        }
    }

    /// Closes the connection (later writes raise StateError). Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let writer = self.inner.lock().unwrap_or_else(PoisonError::into_inner).take();
        py.detach(move || drop(writer));
    }
}

/// One status for the fleet from the readings of its replicas (`Core.status_snapshot` JSON):
/// counts add up, percentiles come from the merged histograms. Raises ValueError on bad input.
#[pyfunction]
fn merge_status(py: Python<'_>, readings: Vec<String>) -> PyResult<String> {
    py.detach(move || crate::stats::merge_status(&readings))
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("not a status reading: {e}")))
}

/// Run `sluicegate bench` with these arguments; returns (JSON report, table). Ctrl-C stops the
/// run early (the KeyboardInterrupt propagates after the generator has stopped).
#[pyfunction]
fn run_bench(py: Python<'_>, args: Vec<String>) -> PyResult<(String, String)> {
    let parsed = BenchArgs::parse_from_args(&args).map_err(usage_error)?;
    let cancel = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let flag = cancel.clone();
    std::thread::Builder::new()
        .name("sluicegate-bench".into())
        .spawn(move || {
            let _ = tx.send(loadgen::run(parsed, flag));
        })
        .map_err(|e| SluicegateError::new_err(format!("could not start the load generator: {e}")))?;
    // `Receiver` is not `Sync`; the mutex lets the detached closure borrow it.
    let rx = Mutex::new(rx);
    let wait = |timeout: Duration| rx.lock().unwrap_or_else(PoisonError::into_inner).recv_timeout(timeout);
    loop {
        match py.detach(|| wait(Duration::from_millis(100))) {
            Ok(Ok(report)) => {
                let json = serde_json::to_string(&report).map_err(|e| SluicegateError::new_err(e.to_string()))?;
                return Ok((json, report.table()));
            }
            Ok(Err(message)) => return Err(UsageError::new_err((message, 2))),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Err(interrupt) = py.check_signals() {
                    cancel.store(true, Ordering::Relaxed);
                    let _ = py.detach(|| wait(Duration::from_secs(120)));
                    return Err(interrupt);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(SluicegateError::new_err("the load generator stopped unexpectedly"))
            }
        }
    }
}

/// The defaults the core applies to pool policies left out of a snapshot (JSON: timeouts,
/// admission, retry, ejection, health_check).
#[pyfunction]
fn config_defaults() -> String {
    crate::config::defaults_json()
}

/// A new tenant API key (shown once; store only its hash).
#[pyfunction]
fn generate_api_key() -> PyResult<String> {
    auth::generate().map_err(|e| SluicegateError::new_err(format!("no randomness available: {e}")))
}

/// Hex HMAC-SHA256 of `key` under `pepper`: what the config snapshot stores.
#[pyfunction]
fn hash_api_key(pepper: &str, key: &str) -> PyResult<String> {
    let hasher = auth::KeyHasher::new(pepper.as_bytes())
        .ok_or_else(|| pyo3::exceptions::PyValueError::new_err("pepper refused by HMAC"))?;
    Ok(auth::hex_digest(&hasher.hash(key)))
}

/// Whether `key` has the shape and checksum of a sluicegate key.
#[pyfunction]
fn is_well_formed_api_key(key: &str) -> bool {
    auth::well_formed(key)
}

/// The public part of a key, safe to show and log.
#[pyfunction]
fn api_key_prefix(key: &str) -> String {
    auth::public_prefix(key).to_string()
}

/// Send the core's `tracing` logs to the process log (`json` for one JSON object per line):
/// standard error, or `file` (rotated before it would pass `rotate_bytes` when > 0, keeping
/// `rotate_keep` rotated files). Once per process: StateError after the first call; LogError
/// if the file cannot be opened.
#[pyfunction]
#[pyo3(signature = (level="info", json=false, file=None, rotate_bytes=0, rotate_keep=5))]
fn init_logging(
    level: &str,
    json: bool,
    file: Option<std::path::PathBuf>,
    rotate_bytes: u64,
    rotate_keep: u32,
) -> PyResult<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(level)
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
    let rotation = rotation(rotate_bytes, rotate_keep)?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(file.is_none())
        .with_writer(crate::process_log::event_writer);
    let result = if json { builder.json().try_init() } else { builder.try_init() };
    result.map_err(|e| StateError::new_err(format!("logging already initialised: {e}")))?;
    if let Some(path) = file {
        let shown = path.display().to_string();
        crate::process_log::use_file(path, rotation)
            .map_err(|e| LogError::new_err(format!("cannot open the log file {shown}: {e}")))?;
    }
    Ok(())
}

/// Append `text` (whole lines) to the process log, where the core's own lines go.
#[pyfunction]
fn write_process_log(py: Python<'_>, text: &str) -> PyResult<()> {
    let bytes = text.as_bytes().to_vec();
    py.detach(move || crate::process_log::write(&bytes)).map_err(|e| LogError::new_err(e.to_string()))
}

/// Reopen the process log file under its name (SIGHUP); nothing when it is standard error.
#[pyfunction]
fn reopen_process_log(py: Python<'_>) -> PyResult<()> {
    py.detach(crate::process_log::reopen).map_err(|e| LogError::new_err(format!("cannot reopen the log file: {e}")))
}

#[pymodule]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<PyCore>()?;
    m.add_class::<PySimulator>()?;
    m.add_class::<PySqliteLedger>()?;
    m.add_function(wrap_pyfunction!(run_bench, m)?)?;
    m.add_function(wrap_pyfunction!(merge_status, m)?)?;
    m.add_function(wrap_pyfunction!(config_defaults, m)?)?;
    m.add_function(wrap_pyfunction!(generate_api_key, m)?)?;
    m.add_function(wrap_pyfunction!(hash_api_key, m)?)?;
    m.add_function(wrap_pyfunction!(is_well_formed_api_key, m)?)?;
    m.add_function(wrap_pyfunction!(api_key_prefix, m)?)?;
    m.add_function(wrap_pyfunction!(init_logging, m)?)?;
    m.add_function(wrap_pyfunction!(write_process_log, m)?)?;
    m.add_function(wrap_pyfunction!(reopen_process_log, m)?)?;
    m.add("SluicegateError", py.get_type::<SluicegateError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("StaleConfigError", py.get_type::<StaleConfigError>())?;
    m.add("StartError", py.get_type::<StartError>())?;
    m.add("JournalError", py.get_type::<JournalError>())?;
    m.add("StateError", py.get_type::<StateError>())?;
    m.add("TlsError", py.get_type::<TlsError>())?;
    m.add("LogError", py.get_type::<LogError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("LedgerError", py.get_type::<LedgerError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // "release build, rustc 1.95.0 (...), x86_64-unknown-linux-gnu", from build.rs.
    m.add("__build__", env!("SLUICEGATE_BUILD"))?;
    Ok(())
}
