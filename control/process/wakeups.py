"""The loop of the control plane's timed jobs (the drill closer, the price activator): run a
step that says how long until it is due again, sleep that long or until woken, retry a failed
step a little later."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("sluicegate.control")

RETRY_WAIT_S = 5.0


def run_until_stopped(
    stop: threading.Event, wake: threading.Event, step: Callable[[], float], what: str
) -> None:
    """`step` returns the seconds until it is due again; `wake` cuts a wait short (the caller
    sets it on a change, and on stop)."""
    while not stop.is_set():
        wake.clear()  # before the step: a change made meanwhile wakes the next wait
        try:
            wait = step()
        except Exception:
            log.exception("%s failed; retrying", what)
            wait = RETRY_WAIT_S
        wake.wait(wait)
