"""Fixtures of the end-to-end tests: `sluicegate serve` processes, killed after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.helpers import start_serve
from tests.support.procs import Proc


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[], tuple[Proc, str, str]]]:
    procs: list[Proc] = []

    def start() -> tuple[Proc, str, str]:
        started = start_serve(tmp_path)
        procs.append(started[0])
        return started

    yield start
    for proc in procs:
        proc.kill()
