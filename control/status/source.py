"""Where the windows come from: `Core.status_snapshot(windows)`, read with the GIL released; in a
fleet, the readings every live replica published with its heartbeat (`control.fleet.heartbeat`),
merged by the core's own arithmetic (`_core.merge_status`: counts add up, percentiles from the
merged histograms)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta

from sluicegate import _core
from sqlalchemy import select

from control.bridge.core_bridge import CoreBridge
from control.fleet.models import Replica
from control.status.schemas import CoreStatus, WindowSpec
from control.timeutil import utcnow

# The core's defaults: the last minute, five minutes and hour, and the five minutes before the
# last minute.
DEFAULT_WINDOWS = (
    WindowSpec(name="1m", seconds=60, ends_seconds_ago=0),
    WindowSpec(name="5m", seconds=300, ends_seconds_ago=0),
    WindowSpec(name="1h", seconds=3600, ends_seconds_ago=0),
    WindowSpec(name="prev_5m", seconds=300, ends_seconds_ago=60),
)


def _specs(windows: Sequence[WindowSpec]) -> list[tuple[str, int, int]]:
    return [(w.name, w.seconds, w.ends_seconds_ago) for w in windows]


def read_status_text(bridge: CoreBridge, windows: Sequence[WindowSpec]) -> str:
    return bridge.status_text(_specs(windows))


def read_status(bridge: CoreBridge, windows: Sequence[WindowSpec] = DEFAULT_WINDOWS) -> CoreStatus:
    """This replica's reading."""
    return CoreStatus.model_validate_json(read_status_text(bridge, windows))


def peer_readings(
    sessions: object, me: str, dead_after_ms: int, windows: Sequence[WindowSpec]
) -> list[str]:
    """The readings the other live replicas published, when they hold every window asked for."""
    since = utcnow() - timedelta(milliseconds=dead_after_ms)
    names = {w.name for w in windows}
    out = []
    with sessions() as session:  # type: ignore[operator]
        rows = session.scalars(
            select(Replica).where(Replica.heartbeat_at >= since, Replica.id != me)
        ).all()
    for row in rows:
        status = row.status or {}
        pools = status.get("pools", [])
        if all(names <= set(pool.get("windows", {})) for pool in pools):
            out.append(json.dumps(status))
    return out


def read_fleet_status(
    bridge: CoreBridge,
    windows: Sequence[WindowSpec],
    peers: list[str],
) -> CoreStatus:
    """This replica's reading merged with its peers' (none: this replica's alone)."""
    mine = read_status_text(bridge, windows)
    if not peers:
        return CoreStatus.model_validate_json(mine)
    return CoreStatus.model_validate_json(_core.merge_status([mine, *peers]))
