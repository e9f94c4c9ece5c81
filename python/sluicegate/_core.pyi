"""Typed surface of the Rust extension (proxy_core/src/py.rs), checked against the built
extension by `python -m mypy.stubtest sluicegate._core` in `make lint`. PyO3 classes are built
by `__new__` and cannot be subclassed (`@final`)."""

import os
from typing import Self, final

__all__ = [
    "ConfigError",
    "Core",
    "JournalError",
    "LedgerError",
    "LogError",
    "Simulator",
    "SluicegateError",
    "SqliteLedger",
    "StaleConfigError",
    "StartError",
    "StateError",
    "TlsError",
    "UsageError",
    "__build__",
    "__version__",
    "api_key_prefix",
    "config_defaults",
    "generate_api_key",
    "hash_api_key",
    "init_logging",
    "is_well_formed_api_key",
    "merge_status",
    "reopen_process_log",
    "run_bench",
    "write_process_log",
]

__version__: str
# How the extension was built: "<profile> build, <rustc --version>, <target triple>".
__build__: str

class SluicegateError(Exception):
    """Base class of every error the core raises."""

class ConfigError(SluicegateError):
    """A config snapshot was refused; the previous one stays in force.

    `args` is `(message, path, detail)` for a field at fault (`path` like
    `pools[0].timeouts.total_ms`), or `(message,)` for a stale version.
    """

class StaleConfigError(ConfigError):
    """The snapshot's version is older than the one in force."""

class JournalError(SluicegateError):
    """The usage journal could not be opened, written or acknowledged."""

class LedgerError(SluicegateError):
    """The ledger's database could not be opened or failed a batch (busy past its timeout,
    I/O); a later try may succeed."""

class StartError(SluicegateError):
    """A server could not start (address in use, bad address)."""

class StateError(SluicegateError):
    """The call does not fit the object's state (already running)."""

class TlsError(SluicegateError):
    """A TLS certificate and key pair was refused (unreadable, mismatched, expired); args are
    (message, reason)."""

class LogError(SluicegateError):
    """A log file could not be opened or reopened."""

class UsageError(SluicegateError):
    """Command-line arguments were refused, or help was asked for: args are (message, exit_code)."""

@final
class Core:
    """The data plane: a relay on its own tokio runtime, configured by whole snapshots."""

    def __new__(
        cls,
        *,
        workers: int = 0,
        worker_slice_us: int = 100,
        max_body_bytes: int = 33554432,
        header_read_timeout_ms: int = 5000,
        max_connections: int = 25000,
        max_connections_per_client: int = 4096,
        h2_max_concurrent_streams: int = 100,
        body_read_timeout_ms: int = 60000,
        max_body_bytes_in_flight: int = 536870912,
        usage_backlog_limit: int = 200000,
        expose_upstream: bool = False,
        journal_dir: str | os.PathLike[str] | None = None,
        journal_sync_ms: int = 10,
        progress_every_events: int = 16,
        access_log: str | None = None,
        access_log_rotate_bytes: int = 0,
        access_log_rotate_keep: int = 5,
        tls_cert_file: str | os.PathLike[str] | None = None,
        tls_key_file: str | os.PathLike[str] | None = None,
        tls_watch_ms: int = 1000,
        trace_endpoint: str | None = None,
        trace_sample_ratio: float = 0.1,
        trace_slow_ms: int = 5000,
        trace_parent_based: bool = False,
        trace_queue: int = 2048,
        trace_batch: int = 512,
        trace_batch_delay_ms: int = 1000,
        trace_export_timeout_ms: int = 10000,
        trace_service_name: str | None = None,
        trace_service_instance: str | None = None,
        metrics_token: str | None = None,
        tenant_series: int = 100,
    ) -> Self: ...
    def reload_tls(self) -> bool: ...
    def reopen_access_log(self) -> None: ...
    @property
    def tls(self) -> bool: ...
    def start(self, listen_addr: str) -> str: ...
    def stop(self, grace_seconds: float = 30.0) -> None: ...
    def metrics_source(self, admin_addr: str) -> None: ...
    def guard_listeners(self, addrs: list[str]) -> None: ...
    def set_ready(self, ready: bool) -> None: ...
    def join_fleet(
        self,
        redis_url: str,
        *,
        prefix: str,
        replica: str,
        fail_closed: list[str] = ...,
        timeout_ms: int = 50,
    ) -> None: ...
    def set_fleet_size(self, replicas: int) -> None: ...
    @property
    def fleet_status(self) -> str: ...
    def apply_config(self, version: int, payload: str) -> int: ...
    def apply_key_changes(self, version: int, payload: str) -> int: ...
    def drill_member(self, pool: str, member: str, seconds: float) -> None: ...
    def drill_pool(self, pool: str, seconds: float) -> None: ...
    def status_snapshot(self, windows: list[tuple[str, int, int]] | None = None) -> str: ...
    def metrics_snapshot(self) -> str: ...
    def drain_usage(self, max: int = 1000, timeout_ms: int = 0) -> bytes: ...
    def ack_usage(self, seq: int) -> None: ...
    @property
    def usage_backlog(self) -> int: ...
    @property
    def usage_acked(self) -> int: ...
    @property
    def running(self) -> bool: ...
    @property
    def address(self) -> str | None: ...
    @property
    def config_version(self) -> int | None: ...

@final
class Simulator:
    """The simulated upstream, started on construction."""

    def __new__(cls, args: list[str]) -> Self: ...
    @property
    def address(self) -> str: ...
    def stop(self, grace_seconds: float = 5.0) -> None: ...

@final
class SqliteLedger:
    """The usage ledger's SQLite writer: batches as `Core.drain_usage` hands them out, stored by
    the core through the SQLite library this process loaded for Python's `sqlite3` (`library`:
    the path of the `_sqlite3` module, already imported). The SQL and the fields are the
    caller's: `insert` takes the fields (`started_at` as the stored text), then the batch's
    clock; `rollup` adds one bucket's sums (granularity, bucket, the `group` fields, requests,
    the `sums` fields, errors: a `status` of 400 or more or an outcome of `error_outcomes`) of
    the rows inserted, per each of `granularities` (name, seconds)."""

    def __new__(
        cls,
        library: str,
        path: str,
        fields: list[str],
        defaults: list[tuple[str, int | None]],
        setup: list[str],
        insert: str,
        rollup: str,
        granularities: list[tuple[str, int]],
        group: list[str],
        sums: list[str],
        error_outcomes: list[str],
    ) -> Self: ...
    def write(self, batch: bytes, slice: int = 0) -> tuple[int, int, int | None, int]:
        """(rows inserted, events, highest seq, pauses taken). ValueError: the batch cannot be
        stored as it is (nothing stored); LedgerError: the database failed; StateError: closed."""
    def close(self) -> None: ...

def run_bench(args: list[str]) -> tuple[str, str]: ...
def merge_status(readings: list[str]) -> str: ...
def config_defaults() -> str: ...
def generate_api_key() -> str: ...
def hash_api_key(pepper: str, key: str) -> str: ...
def is_well_formed_api_key(key: str) -> bool: ...
def api_key_prefix(key: str) -> str: ...
def init_logging(
    level: str = "info",
    json: bool = False,
    file: str | os.PathLike[str] | None = None,
    rotate_bytes: int = 0,
    rotate_keep: int = 5,
) -> None: ...
def write_process_log(text: str) -> None: ...
def reopen_process_log() -> None: ...
