"""Where the windows come from: `Core.status_snapshot(windows)`, read with the GIL released."""

from __future__ import annotations

from collections.abc import Sequence

from control.bridge.core_bridge import CoreBridge
from control.status.schemas import CoreStatus, WindowSpec

# The core's defaults: the last minute, five minutes and hour, and the five minutes before the
# last minute.
DEFAULT_WINDOWS = (
    WindowSpec(name="1m", seconds=60, ends_seconds_ago=0),
    WindowSpec(name="5m", seconds=300, ends_seconds_ago=0),
    WindowSpec(name="1h", seconds=3600, ends_seconds_ago=0),
    WindowSpec(name="prev_5m", seconds=300, ends_seconds_ago=60),
)


def read_status(bridge: CoreBridge, windows: Sequence[WindowSpec] = DEFAULT_WINDOWS) -> CoreStatus:
    specs = [(w.name, w.seconds, w.ends_seconds_ago) for w in windows]
    # CoreBridge owns the core and has no status accessor of its own yet; this is the one place
    # that reads the status through it.
    text = bridge._core.status_snapshot(specs)
    return CoreStatus.model_validate_json(text)
