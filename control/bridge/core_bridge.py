"""The one owner of the data plane (`sluicegate._core.Core`): its lifecycle, every snapshot pushed
into it with ACK/NACK bookkeeping, and the calls that drain its usage events (the drainer itself
is a background job: `control.process.jobs`).

The core's own calls release the GIL; this object adds only the bookkeeping the admin API reports
(`GET /v1/admin/config/version`).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sluicegate._core import ConfigError, Core, StaleConfigError

from control.bridge.refusal import refusal_of
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.control")


@dataclass(frozen=True)
class Acknowledged:
    version: int
    at: datetime


@dataclass(frozen=True)
class Rejection:
    version: int
    message: str
    at: datetime


class CoreBridge:
    def __init__(self, core: Core) -> None:
        self._core = core
        self._lock = threading.Lock()
        self._acknowledged: Acknowledged | None = None
        self._rejection: Rejection | None = None

    # --- lifecycle ------------------------------------------------------------------------------

    def start(self, listen: str) -> str:
        """Bind the data listener and serve; returns the bound address."""
        return self._core.start(listen)

    def stop(self, grace_seconds: float) -> None:
        """Stop accepting, let in-flight requests finish within the grace period."""
        self._core.stop(grace_seconds)

    @property
    def running(self) -> bool:
        return self._core.running

    @property
    def tls(self) -> bool:
        """Whether the data port speaks TLS."""
        return self._core.tls

    def reload_tls(self) -> bool:
        """Read the data port's certificate files again; True if a new pair is in force. Raises
        `TlsError` for a refused pair (the core logged and counted it; the old one stays)."""
        return self._core.reload_tls()

    def reopen_access_log(self) -> None:
        """Reopen the access log file under its name. Raises `LogError`."""
        self._core.reopen_access_log()

    @property
    def address(self) -> str | None:
        return self._core.address

    # --- configuration --------------------------------------------------------------------------

    def apply(self, version: int, payload: str) -> int:
        """Push a whole snapshot. Raises `ConfigError` (the NACK) and remembers it, except
        `StaleConfigError` (the core runs a newer version): not a verdict on the snapshot, the
        caller resynchronizes the version and pushes again."""
        return self._push(self._core.apply_config, version, payload)

    def apply_keys(self, version: int, payload: str) -> int:
        """Push key changes (`{"upsert": [...], "remove": [...]}`) on top of the snapshot in
        force; the same ACK/NACK bookkeeping and version rule as `apply`."""
        return self._push(self._core.apply_key_changes, version, payload)

    def _push(self, send: Callable[[int, str], int], version: int, payload: str) -> int:
        with self._lock:
            try:
                acked = send(version, payload)
            except StaleConfigError:
                raise
            except ConfigError as e:
                self._rejection = Rejection(version, refusal_of(e).message, utcnow())
                raise
            self._acknowledged = Acknowledged(acked, utcnow())
            return acked

    @property
    def acknowledged(self) -> Acknowledged | None:
        return self._acknowledged

    @property
    def last_rejection(self) -> Rejection | None:
        return self._rejection

    def set_ready(self, ready: bool) -> None:
        """What the data port's `/readyz` tells load balancers; requests are served either way."""
        self._core.set_ready(ready)

    def guard_listeners(self, addresses: list[str]) -> None:
        """Listeners of this process that no upstream connection may reach."""
        self._core.guard_listeners(addresses)

    def metrics_source(self, admin_address: str) -> None:
        """The admin listener whose `/metrics` the data port relays (with a metrics token)."""
        self._core.metrics_source(admin_address)

    @property
    def core_version(self) -> int | None:
        return self._core.config_version

    # --- drills and metrics ---------------------------------------------------------------------

    def drill(self, pool: str, member: str | None, seconds: float) -> None:
        """Force a member (or the whole pool) out for `seconds`; 0 ends the drill. Raises
        `ValueError` when the snapshot in force has no such pool or member."""
        if member is None:
            self._core.drill_pool(pool, seconds)
        else:
            self._core.drill_member(pool, member, seconds)

    def status_text(self, windows: list[tuple[str, int, int]]) -> str:
        """The core's windowed status (JSON, histograms included) per `(name, seconds,
        ends_ago)`."""
        return self._core.status_snapshot(windows)

    # --- the fleet ------------------------------------------------------------------------------

    def join_fleet(
        self, redis_url: str, *, prefix: str, replica: str, fail_closed: list[str], timeout_ms: int
    ) -> None:
        """Share the limits with the fleet through Redis (before `start`)."""
        self._core.join_fleet(
            redis_url,
            prefix=prefix,
            replica=replica,
            fail_closed=fail_closed,
            timeout_ms=timeout_ms,
        )

    def set_fleet_size(self, replicas: int) -> None:
        self._core.set_fleet_size(replicas)

    def fleet_status(self) -> dict[str, Any] | None:
        """The core's view of the fleet's limits (mode, Redis calls), or None outside a fleet."""
        status: dict[str, Any] | None = json.loads(self._core.fleet_status)
        return status

    def metrics_families(self) -> dict[str, dict[str, Any]]:
        """The core's metric families by name: {type, help, labels, samples}."""
        families = json.loads(self._core.metrics_snapshot())["families"]
        return {family["name"]: family for family in families}

    # --- usage ----------------------------------------------------------------------------------

    def drain_usage(self, max_events: int, timeout_ms: int) -> bytes:
        """Up to `max_events` events as a JSON array (UTF-8), waiting up to `timeout_ms` for the
        first."""
        return self._core.drain_usage(max_events, timeout_ms)

    def ack_usage(self, seq: int) -> None:
        """Every event up to `seq` is stored: the journal may forget them (JournalError)."""
        self._core.ack_usage(seq)

    def usage_backlog(self) -> int:
        """Events the core holds that are not acknowledged yet (journaled, ready or handed out)."""
        return self._core.usage_backlog

    def usage_acked(self) -> int:
        """Every usage event up to this sequence number is stored. Read before the quotas'
        ledger figures, it tells the core which of its events those figures already hold."""
        return self._core.usage_acked
