"""The client against the real thing: a simulator that records every request it serves, behind
an in-process data plane. The gateway's own retries and member ejection are off in these pools,
so every request the simulator records is an attempt a client sent, and every rule is checked
from the simulator's record and the gateway's usage events, not from the client's word."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sluicegate.client import Governor, Policy

from tests.support.gateway import ConfigBuilder, Gateway, Key, member
from tests.support.jsonl import whole_lines
from tests.support.procs import Proc

# Retries and ejection off at the gateway: the upstream sees exactly what the clients send.
PASS_THROUGH_POOL: dict[str, Any] = {
    "retry": {"max_attempts": 1},
    "ejection": {"consecutive_failures": 0},
}
# Short backoff so tests that count attempts do not wait long; the rules are the same.
QUICK = Policy(backoff_base=0.02, backoff_cap=0.1)


@dataclass
class Stack:
    sim: Proc
    gateway: Gateway
    key: Key
    config: ConfigBuilder
    record: Path

    @property
    def openai_url(self) -> str:
        return self.gateway.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        return self.gateway.url

    def records(self, expect: int = 0, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The simulator's record (one line per request, written when it ends)."""
        deadline = time.monotonic() + timeout
        while True:
            rows = whole_lines(self.record)
            if len(rows) >= expect or time.monotonic() > deadline:
                return rows
            time.sleep(0.02)

    def events(self, expect: int = 0, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The gateway's usage events so far."""
        return self.gateway.drain(expect=expect, timeout=timeout)

    def set_faults(self, *specs: str) -> None:
        """Replace the simulator's configured faults (rates) while it runs."""
        r = httpx.put(self.sim.url + "/sim/faults", json={"faults": list(specs)}, timeout=5)
        r.raise_for_status()


@pytest.fixture
def stack_factory(
    sim_factory: Callable[..., Proc], gateway_factory: Callable[..., Gateway], tmp_path: Path
) -> Callable[..., Stack]:
    count = itertools.count()

    def start(
        *sim_args: str,
        ttft_ms: str = "fixed:20",
        itl_ms: str = "fixed:2",
        key_extra: dict[str, Any] | None = None,
        pool_extra: dict[str, Any] | None = None,
    ) -> Stack:
        record = tmp_path / f"record{next(count)}.jsonl"
        timing = ("--ttft-ms", ttft_ms, "--itl-ms", itl_ms)
        sim = sim_factory("--record", str(record), *timing, *sim_args)
        cfg = ConfigBuilder().tenant("t")
        key = cfg.key("k", "t", **(key_extra or {}))
        pool = {**PASS_THROUGH_POOL, **(pool_extra or {})}
        cfg.pool("p", [member("m", sim.address)], **pool).route("gpt", ("p", "sim-gpt"))
        cfg.pool("pa", [member("a", sim.address, kind="anthropic")], **pool)
        cfg.route("claude", ("pa", "sim-claude"))
        gateway = gateway_factory(cfg)
        return Stack(sim, gateway, key, cfg, record)

    return start


@pytest.fixture
def stack(stack_factory: Callable[..., Stack]) -> Stack:
    return stack_factory()


@pytest.fixture
def governor() -> Governor:
    """A governor of the test's own: the process's default one is shared with other tests."""
    return Governor(export=False)


def starts(rows: list[dict[str, Any]]) -> list[float]:
    return sorted(row["started_at"] for row in rows)


def gaps(rows: list[dict[str, Any]]) -> list[float]:
    times = starts(rows)
    return [b - a for a, b in itertools.pairwise(times)]


HELLO = [{"role": "user", "content": "hello"}]
