"""Fixtures shared by every suite. Servers run on loopback and are stopped after each test."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.gateway import ConfigBuilder, Gateway
from tests.support.procs import Proc, start_sim


@pytest.fixture
def sim_factory(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    """Start `sluicegate sim` processes: `sim_factory("--ttft-ms", "20", name="a")`."""
    started: list[Proc] = []

    def start(*args: str, name: str = "sim") -> Proc:
        proc = start_sim(tmp_path, *args, name=f"{name}{len(started)}")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


@pytest.fixture
def gateway_factory() -> Iterator[Callable[..., Gateway]]:
    started: list[Gateway] = []

    def start(config: ConfigBuilder, **options: object) -> Gateway:
        gw = Gateway(config, **options)
        started.append(gw)
        return gw

    yield start
    for gw in started:
        gw.stop()
