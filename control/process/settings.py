"""Settings: a config file (TOML, or YAML) overridden by `SLUICEGATE_*` environment variables.
`control/sluicegate.example.toml` documents every option.

Secrets are `SecretStr`: their repr is masked, so a settings object can be logged safely.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from sqlalchemy.engine import make_url

from control.api.errors import StartupError, validation_fields
from control.console.settings import ConsoleSettings
from control.db import DEFAULT_URL
from control.diagnosis.settings import DoctorSettings
from control.pools.schemas import PoolCreate
from control.prices.schemas import PriceCreate
from control.process.listen import HostPort
from control.providers.schemas import ProviderCreate
from control.routes.schemas import RouteCreate
from control.tenants.schemas import TenantCreate


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _listen(value: str) -> str:
    HostPort.parse(value)
    return value


class ServerSettings(Section):
    data_listen: str = "0.0.0.0:8080"
    admin_listen: str = "127.0.0.1:8081"
    shutdown_grace_seconds: float = Field(default=30.0, ge=0, le=3600)
    # On SIGTERM, /readyz turns unready and requests are still served this long before the drain.
    unready_seconds: float = Field(default=0.0, ge=0, le=600)
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    log_json: bool = False
    # The process log (the control plane's and the core's lines): a file path, "" for stderr.
    log_file: str = ""
    # Rotate the process log file before it would pass this size (0: never; logrotate and
    # SIGHUP instead), keeping this many rotated files (`name.1` the newest).
    log_rotate_bytes: int = Field(default=0, ge=0, le=1 << 40)
    log_rotate_keep: int = Field(default=5, ge=1, le=1000)
    # One JSON line per request from the data plane: a file path, "-" for stderr, "" for none.
    access_log: str = ""
    # The same rotation for the access log file.
    access_log_rotate_bytes: int = Field(default=0, ge=0, le=1 << 40)
    access_log_rotate_keep: int = Field(default=5, ge=1, le=1000)

    _check_listen = field_validator("data_listen", "admin_listen")(_listen)

    @field_validator("log_rotate_bytes", "access_log_rotate_bytes")
    @classmethod
    def _rotation_size(cls, value: int) -> int:
        if 0 < value < 4096:
            raise ValueError("must be 0 (no rotation) or at least 4096")
        return value


class TlsSettings(Section):
    """TLS on the data port and on the admin port. A port with a certificate speaks HTTPS only."""

    # The data port's certificate chain (PEM, leaf first) and private key (PEM).
    cert_file: Path | None = None
    key_file: Path | None = None
    # The admin port's certificate chain and key, and the CA(s) its clients must present a
    # certificate from (mTLS; unset: no client certificate asked).
    admin_cert_file: Path | None = None
    admin_key_file: Path | None = None
    admin_client_ca_file: Path | None = None
    # How often the certificate files are checked for a change (0: only on SIGHUP).
    watch_ms: int = Field(default=1_000, ge=0, le=3_600_000)

    @model_validator(mode="after")
    def _pairs(self) -> TlsSettings:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("cert_file and key_file go together: set both or neither")
        if (self.admin_cert_file is None) != (self.admin_key_file is None):
            raise ValueError("admin_cert_file and admin_key_file go together: set both or neither")
        if self.admin_client_ca_file is not None and self.admin_cert_file is None:
            raise ValueError("admin_client_ca_file needs admin_cert_file and admin_key_file")
        return self

    @property
    def data(self) -> bool:
        return self.cert_file is not None

    @property
    def admin(self) -> bool:
        return self.admin_cert_file is not None


class DatabaseSettings(Section):
    url: str = DEFAULT_URL


class SecretSettings(Section):
    # HMAC key of tenant key hashes. Generated and kept in the database in embedded SQLite mode.
    key_pepper: SecretStr | None = None
    # Fernet key(s), comma-separated, the first encrypting. Embedded SQLite mode generates one
    # into `encryption_key_file` (default: the database file name + `.key`).
    encryption_key: SecretStr | None = None
    encryption_key_file: Path | None = None
    # The bootstrap admin token; if absent and none exists, one is generated and printed once.
    admin_token: SecretStr | None = None

    @field_validator("key_pepper")
    @classmethod
    def _pepper_length(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters")
        return value

    @field_validator("admin_token")
    @classmethod
    def _token_length(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters")
        return value


class CoreSettings(Section):
    """The data plane's own settings: each field is the `Core` argument of the same name."""

    workers: int = Field(default=0, ge=0, le=1024, description="0: one per CPU")
    worker_slice_us: int = Field(
        default=100, ge=0, le=100_000, description="the workers' scheduler slice; 0: the kernel's"
    )
    max_body_bytes: int = Field(default=33_554_432, ge=1)
    header_read_timeout_ms: int = Field(default=5_000, ge=1)
    max_connections: int = Field(default=25_000, ge=1)
    max_connections_per_client: int = Field(default=4_096, ge=0, le=2**31, description="0: no cap")
    h2_max_concurrent_streams: int = Field(default=100, ge=1)
    body_read_timeout_ms: int = Field(default=60_000, ge=1)
    max_body_bytes_in_flight: int = Field(default=536_870_912, ge=1)
    usage_backlog_limit: int = Field(default=200_000, ge=1)
    expose_upstream: bool = False

    @model_validator(mode="after")
    def _budget_holds_a_body(self) -> CoreSettings:
        if self.max_body_bytes_in_flight < self.max_body_bytes:
            raise ValueError("max_body_bytes_in_flight must be at least max_body_bytes")
        return self


class UsageSettings(Section):
    drain_batch: int = Field(default=5000, ge=1, le=100_000)
    drain_timeout_ms: int = Field(default=200, ge=1, le=60_000)
    drain_linger_ms: int = Field(default=100, ge=0, le=10_000)
    # PostgreSQL: the statements a batch is stored in beside live traffic, each a slice of it
    # (a short stretch of the server's work); unset: 64 when the server is on this host (its work
    # shares the gateway's CPUs), 1 when it is elsewhere.
    postgresql_slices: int | None = Field(default=None, ge=1, le=64)
    # The core's durable usage journal (one process per directory). Unset: beside the SQLite
    # file ("<database file>.usage-journal"), or "./sluicegate-journal" with PostgreSQL.
    journal_dir: Path | None = None
    # The journal's group commit: written records are made durable together this often.
    journal_sync_ms: int = Field(default=10, ge=1, le=1_000)
    # A stream journals what it relayed every this many content events (0: never).
    progress_every_events: int = Field(default=16, ge=0, le=1_000_000)
    # Raw usage rows older than this are deleted (rollups are kept).
    raw_retention_days: int = Field(default=30, ge=1, le=36_500)
    # The longest range a key's latency percentiles may cover (they read raw rows).
    latency_max_days: int = Field(default=31, ge=1, le=36_500)


class AdminSettings(Section):
    """The admin API's own bounds: what a token holder may send and how often."""

    # Largest request body, checked from Content-Length before it is read (counted when chunked).
    max_body_bytes: int = Field(default=1_048_576, ge=1024, le=1 << 30)
    # Calls per minute and burst of each tenant-scoped token; 0: no limit.
    tenant_token_rpm: int = Field(default=600, ge=0, le=10_000_000)
    tenant_token_burst: int = Field(default=100, ge=0, le=10_000_000)
    # The same for each admin (operator) token; 0: no limit.
    admin_token_rpm: int = Field(default=0, ge=0, le=10_000_000)
    admin_token_burst: int = Field(default=0, ge=0, le=10_000_000)
    # Keys a tenant may hold (active or disabled, not revoked or expired) unless its own
    # `max_keys` says otherwise.
    default_max_keys: int = Field(default=1000, ge=1, le=10_000_000)


LimitKind = Literal["rpm", "tpm", "concurrency", "quota"]


class RedisSettings(Section):
    """Redis for a fleet: the counts every replica shares while requests run."""

    # Unset: each replica limits on its own (one process per database).
    url: SecretStr | None = None
    # Prefix of every key the fleet writes (several fleets may share one Redis).
    key_prefix: str = Field(
        default="sluicegate", min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.:-]+$"
    )
    # Longest wait for Redis on the request path before a replica uses its local share.
    timeout_ms: int = Field(default=50, ge=1, le=10_000)
    # Limit kinds refused (503) instead of shared locally while Redis is away.
    fail_closed: list[LimitKind] = []

    @field_validator("fail_closed", mode="before")
    @classmethod
    def _comma_list(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value


class FleetSettings(Section):
    """Several `serve` replicas on one PostgreSQL database."""

    # This replica's name in the fleet's views; default: host name and data port.
    name: str | None = Field(default=None, max_length=200)
    # How often each replica says it is alive and reads the fleet (and checks the committed
    # config version, in case a change notification was lost).
    heartbeat_ms: int = Field(default=1_000, ge=100, le=60_000)
    # A replica silent this long counts as gone (local shares divide by the live ones).
    dead_after_ms: int = Field(default=5_000, ge=500, le=600_000)


class ProviderBootstrap(ProviderCreate):
    # Read the credential from this environment variable instead of the file.
    credential_env: str | None = None


class TracingSettings(Section):
    """Request traces to an OpenTelemetry collector over OTLP/HTTP (protobuf)."""

    # The collector's traces URL, e.g. "http://otel-collector:4318/v1/traces". "": off.
    endpoint: str = ""
    # Share of traces kept, decided on the trace id; errors and slow requests are always kept.
    sample_ratio: float = Field(default=0.1, ge=0.0, le=1.0)
    # Requests taking at least this long are always kept.
    slow_ms: int = Field(default=5_000, ge=1, le=3_600_000)
    # Also keep what the client's `traceparent` marked sampled (a client can then raise the
    # share of its own traces kept, up to what the export queue holds).
    parent_based: bool = False
    # Traces waiting for the exporter at most; more are dropped (and counted).
    queue_traces: int = Field(default=2_048, ge=1, le=1_048_576)
    # Traces per export request at most, and how long a batch gathers before it is sent.
    batch_traces: int = Field(default=512, ge=1, le=65_536)
    batch_delay_ms: int = Field(default=1_000, ge=0, le=60_000)
    export_timeout_ms: int = Field(default=10_000, ge=1, le=120_000)
    # The resource's `service.name`.
    service_name: str = Field(default="sluicegate", min_length=1, max_length=200)

    @field_validator("endpoint")
    @classmethod
    def _url(cls, value: str) -> str:
        if value and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value

    def core_options(self, instance: str) -> dict[str, Any]:
        """The `Core` arguments of these settings (none when tracing is off)."""
        if not self.endpoint:
            return {}
        return {
            "trace_endpoint": self.endpoint,
            "trace_sample_ratio": self.sample_ratio,
            "trace_slow_ms": self.slow_ms,
            "trace_parent_based": self.parent_based,
            "trace_queue": self.queue_traces,
            "trace_batch": self.batch_traces,
            "trace_batch_delay_ms": self.batch_delay_ms,
            "trace_export_timeout_ms": self.export_timeout_ms,
            "trace_service_name": self.service_name,
            "trace_service_instance": instance,
        }


class MetricsSettings(Section):
    """What `/metrics` shows, and where."""

    # Also serve GET /metrics on the data port (the same exposition as the admin port's), to
    # the bearer token `data_port_token` only (required then, at least 16 characters).
    data_port: bool = False
    data_port_token: SecretStr | None = None
    # Tenants with series of their own (tokens, cost, requests, quota use); the rest are
    # counted under tenant="(other)". Keys never get a label.
    tenant_series: int = Field(default=100, ge=0, le=100_000)

    @model_validator(mode="after")
    def _token_when_served(self) -> MetricsSettings:
        token = self.data_port_token
        if self.data_port and (token is None or len(token.get_secret_value()) < 16):
            raise ValueError("data_port needs data_port_token (at least 16 characters)")
        return self

    def core_options(self) -> dict[str, Any]:
        token = self.data_port_token
        return {
            "metrics_token": token.get_secret_value() if self.data_port and token else None,
            "tenant_series": self.tenant_series,
        }


class BootstrapSettings(Section):
    """Objects created at start if no object with their id exists (never updated)."""

    tenants: list[TenantCreate] = []
    providers: list[ProviderBootstrap] = []
    pools: list[PoolCreate] = []
    routes: list[RouteCreate] = []
    prices: list[PriceCreate] = []


class Settings(Section):
    server: ServerSettings = Field(default_factory=lambda: ServerSettings())
    tls: TlsSettings = Field(default_factory=lambda: TlsSettings())
    database: DatabaseSettings = Field(default_factory=lambda: DatabaseSettings())
    secrets: SecretSettings = Field(default_factory=lambda: SecretSettings())
    core: CoreSettings = Field(default_factory=lambda: CoreSettings())
    usage: UsageSettings = Field(default_factory=lambda: UsageSettings())
    admin: AdminSettings = Field(default_factory=lambda: AdminSettings())
    redis: RedisSettings = Field(default_factory=lambda: RedisSettings())
    fleet: FleetSettings = Field(default_factory=lambda: FleetSettings())
    tracing: TracingSettings = Field(default_factory=lambda: TracingSettings())
    metrics: MetricsSettings = Field(default_factory=lambda: MetricsSettings())
    bootstrap: BootstrapSettings = Field(default_factory=lambda: BootstrapSettings())
    doctor: DoctorSettings = Field(default_factory=lambda: DoctorSettings())
    console: ConsoleSettings = Field(default_factory=lambda: ConsoleSettings())

    @model_validator(mode="after")
    def _metrics_relay_reaches_the_admin_port(self) -> Settings:
        # The data port fetches the exposition from the admin listener over plain loopback
        # HTTP; behind admin TLS (mTLS, maybe) that fetch would fail on every scrape. Refused
        # here rather than answering 502 to a scraper at run time.
        if self.metrics.data_port and self.tls.admin:
            raise ValueError(
                "metrics.data_port relays the admin port's /metrics over plain HTTP and cannot "
                "be combined with admin TLS: scrape the admin port (with its certificate) instead"
            )
        return self


# Environment variable -> (section, field). Every scalar option has one.
ENV: dict[str, tuple[str, str]] = {
    "SLUICEGATE_DATA_LISTEN": ("server", "data_listen"),
    "SLUICEGATE_ADMIN_LISTEN": ("server", "admin_listen"),
    "SLUICEGATE_SHUTDOWN_GRACE_SECONDS": ("server", "shutdown_grace_seconds"),
    "SLUICEGATE_UNREADY_SECONDS": ("server", "unready_seconds"),
    "SLUICEGATE_LOG_LEVEL": ("server", "log_level"),
    "SLUICEGATE_LOG_JSON": ("server", "log_json"),
    "SLUICEGATE_ACCESS_LOG": ("server", "access_log"),
    "SLUICEGATE_LOG_FILE": ("server", "log_file"),
    "SLUICEGATE_LOG_ROTATE_BYTES": ("server", "log_rotate_bytes"),
    "SLUICEGATE_LOG_ROTATE_KEEP": ("server", "log_rotate_keep"),
    "SLUICEGATE_ACCESS_LOG_ROTATE_BYTES": ("server", "access_log_rotate_bytes"),
    "SLUICEGATE_ACCESS_LOG_ROTATE_KEEP": ("server", "access_log_rotate_keep"),
    **{f"SLUICEGATE_TLS_{name.upper()}": ("tls", name) for name in TlsSettings.model_fields},
    "SLUICEGATE_DATABASE_URL": ("database", "url"),
    "SLUICEGATE_KEY_PEPPER": ("secrets", "key_pepper"),
    "SLUICEGATE_ENCRYPTION_KEY": ("secrets", "encryption_key"),
    "SLUICEGATE_ENCRYPTION_KEY_FILE": ("secrets", "encryption_key_file"),
    "SLUICEGATE_ADMIN_TOKEN": ("secrets", "admin_token"),
    "SLUICEGATE_CORE_WORKERS": ("core", "workers"),
    "SLUICEGATE_CORE_WORKER_SLICE_US": ("core", "worker_slice_us"),
    "SLUICEGATE_CORE_MAX_BODY_BYTES": ("core", "max_body_bytes"),
    "SLUICEGATE_CORE_HEADER_READ_TIMEOUT_MS": ("core", "header_read_timeout_ms"),
    "SLUICEGATE_CORE_MAX_CONNECTIONS": ("core", "max_connections"),
    "SLUICEGATE_CORE_MAX_CONNECTIONS_PER_CLIENT": ("core", "max_connections_per_client"),
    "SLUICEGATE_CORE_H2_MAX_CONCURRENT_STREAMS": ("core", "h2_max_concurrent_streams"),
    "SLUICEGATE_CORE_BODY_READ_TIMEOUT_MS": ("core", "body_read_timeout_ms"),
    "SLUICEGATE_CORE_MAX_BODY_BYTES_IN_FLIGHT": ("core", "max_body_bytes_in_flight"),
    "SLUICEGATE_CORE_USAGE_BACKLOG_LIMIT": ("core", "usage_backlog_limit"),
    "SLUICEGATE_CORE_EXPOSE_UPSTREAM": ("core", "expose_upstream"),
    "SLUICEGATE_USAGE_DRAIN_BATCH": ("usage", "drain_batch"),
    "SLUICEGATE_USAGE_DRAIN_TIMEOUT_MS": ("usage", "drain_timeout_ms"),
    "SLUICEGATE_USAGE_DRAIN_LINGER_MS": ("usage", "drain_linger_ms"),
    "SLUICEGATE_USAGE_POSTGRESQL_SLICES": ("usage", "postgresql_slices"),
    "SLUICEGATE_USAGE_JOURNAL_DIR": ("usage", "journal_dir"),
    "SLUICEGATE_USAGE_JOURNAL_SYNC_MS": ("usage", "journal_sync_ms"),
    "SLUICEGATE_USAGE_PROGRESS_EVERY_EVENTS": ("usage", "progress_every_events"),
    "SLUICEGATE_USAGE_RAW_RETENTION_DAYS": ("usage", "raw_retention_days"),
    "SLUICEGATE_USAGE_LATENCY_MAX_DAYS": ("usage", "latency_max_days"),
    **{f"SLUICEGATE_ADMIN_{name.upper()}": ("admin", name) for name in AdminSettings.model_fields},
    "SLUICEGATE_REDIS_URL": ("redis", "url"),
    "SLUICEGATE_REDIS_KEY_PREFIX": ("redis", "key_prefix"),
    "SLUICEGATE_REDIS_TIMEOUT_MS": ("redis", "timeout_ms"),
    "SLUICEGATE_REDIS_FAIL_CLOSED": ("redis", "fail_closed"),
    "SLUICEGATE_FLEET_NAME": ("fleet", "name"),
    "SLUICEGATE_FLEET_HEARTBEAT_MS": ("fleet", "heartbeat_ms"),
    "SLUICEGATE_FLEET_DEAD_AFTER_MS": ("fleet", "dead_after_ms"),
    **{
        f"SLUICEGATE_TRACING_{name.upper()}": ("tracing", name)
        for name in TracingSettings.model_fields
    },
    **{
        f"SLUICEGATE_METRICS_{name.upper()}": ("metrics", name)
        for name in MetricsSettings.model_fields
    },
    **{
        f"SLUICEGATE_DOCTOR_{name.upper()}": ("doctor", name)
        for name in DoctorSettings.model_fields
    },
    **{
        f"SLUICEGATE_CONSOLE_{name.upper()}": ("console", name)
        for name in ConsoleSettings.model_fields
    },
}


def journal_dir(settings: Settings) -> Path:
    """Where the core keeps its usage journal."""
    if settings.usage.journal_dir is not None:
        return settings.usage.journal_dir
    url = make_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and url.database:
        return Path(url.database + ".usage-journal")
    return Path("sluicegate-journal")


def read_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as e:
        raise StartupError(f"cannot read config file {path}: {e.strerror}") from None
    try:
        if path.suffix in (".yaml", ".yml"):
            data = yaml.safe_load(text) or {}
        else:
            data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        raise StartupError(f"config file {path} is not valid: {e}") from None
    if not isinstance(data, dict):
        raise StartupError(f"config file {path} must hold a table of sections")
    return data


def load_settings(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """File values, then environment overrides; errors name the option, never its value."""
    data: dict[str, Any] = read_file(path) if path is not None else {}
    env = os.environ if environ is None else environ
    for name, (section, key) in ENV.items():
        if name in env:
            target = data.setdefault(section, {})
            if not isinstance(target, dict):
                raise StartupError(f"config section [{section}] must be a table")
            target[key] = env[name]
    try:
        return Settings.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(f"{f.field}: {f.message}" for f in validation_fields(e.errors()))
        raise StartupError(f"invalid settings: {problems}") from None
