"""Typed surface of the Rust extension (proxy_core/src/py.rs). Keep in step with it."""

import os

__version__: str

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

class StartError(SluicegateError):
    """A server could not start (address in use, bad address)."""

class StateError(SluicegateError):
    """The call does not fit the object's state (already running)."""

class UsageError(SluicegateError):
    """Command-line arguments were refused, or help was asked for: args are (message, exit_code)."""

class Core:
    """The data plane: a relay on its own tokio runtime, configured by whole snapshots."""

    def __init__(
        self,
        *,
        workers: int = 0,
        max_body_bytes: int = 33554432,
        header_read_timeout_ms: int = 5000,
        max_connections: int = 25000,
        h2_max_concurrent_streams: int = 100,
        usage_backlog_limit: int = 200000,
        journal_dir: str | os.PathLike[str] | None = None,
        access_log: str | None = None,
    ) -> None: ...
    def start(self, listen_addr: str) -> str: ...
    def stop(self, grace_seconds: float = 30.0) -> None: ...
    def apply_config(self, version: int, payload: str) -> int: ...
    def apply_key_changes(self, version: int, payload: str) -> int: ...
    def drill_member(self, pool: str, member: str, seconds: float) -> None: ...
    def drill_pool(self, pool: str, seconds: float) -> None: ...
    def status_snapshot(self, windows: list[tuple[str, int, int]] | None = None) -> str: ...
    def metrics_snapshot(self) -> str: ...
    def drain_usage(self, max: int = 1000, timeout_ms: int = 0) -> str: ...
    def ack_usage(self, seq: int) -> None: ...
    @property
    def running(self) -> bool: ...
    @property
    def address(self) -> str | None: ...
    @property
    def config_version(self) -> int | None: ...

class Simulator:
    """The simulated upstream, started on construction."""

    def __init__(self, args: list[str]) -> None: ...
    @property
    def address(self) -> str: ...
    def stop(self, grace_seconds: float = 5.0) -> None: ...

def run_bench(args: list[str]) -> tuple[str, str]: ...
def generate_api_key() -> str: ...
def hash_api_key(pepper: str, key: str) -> str: ...
def is_well_formed_api_key(key: str) -> bool: ...
def api_key_prefix(key: str) -> str: ...
def init_logging(level: str = "info", json: bool = False) -> None: ...
