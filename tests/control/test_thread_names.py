"""The control plane's threads carry their names into the operating system, as the core's do, so
that per-thread CPU (`top -H`, `bench/threads.py`) tells the jobs apart."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from control.process.thread_names import named
from tests.control.helpers import Harness

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux's")


def _os_names() -> set[str]:
    return {(task / "comm").read_text().strip() for task in Path("/proc/self/task").iterdir()}


def test_a_named_target_names_its_thread_for_the_os() -> None:
    seen: list[str] = []

    def job() -> None:
        native = threading.get_native_id()
        seen.append(Path(f"/proc/self/task/{native}/comm").read_text().strip())

    thread = threading.Thread(target=named(job), name="sluicegate-heartbeat")
    thread.start()
    thread.join()
    # The kernel keeps 15 bytes of a name.
    assert seen == ["sluicegate-hear"]


def _os_names_once_there(expected: set[str], timeout: float = 5.0) -> set[str]:
    """The threads' names once `expected` are among them (or `timeout` passed): a thread names
    itself when it starts running, a moment after `Thread.start` returned."""
    deadline = time.monotonic() + timeout
    names = _os_names()
    while not expected <= names and time.monotonic() < deadline:
        time.sleep(0.01)
        names = _os_names()
    return names


def test_the_apps_jobs_run_under_their_names(harness: Harness) -> None:
    expected = {"sluicegate-usag", "sluicegate-lead", "sluicegate-hear"}
    if harness.ctx.fleet_schema is not None:
        expected.add("sluicegate-foll")
    names = _os_names_once_there(expected)
    assert expected <= names, names
