"""A simulator behind an in-process data plane, with one tenant and key: the relay under test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.gateway import ConfigBuilder, Gateway, Key, member
from tests.support.procs import Proc

UPSTREAM_SECRET = "upstream-secret-value"


@dataclass
class Relay:
    sim: Proc
    gateway: Gateway
    key: Key
    config: ConfigBuilder
    record: Path

    @property
    def url(self) -> str:
        return self.gateway.url


@pytest.fixture
def relay_factory(
    sim_factory: Callable[..., Proc], gateway_factory: Callable[..., Gateway], tmp_path: Path
) -> Callable[..., Relay]:
    def start(
        *sim_args: str, timeouts: dict[str, int] | None = None, **core_options: object
    ) -> Relay:
        record = tmp_path / "record.jsonl"
        sim = sim_factory("--api-key", UPSTREAM_SECRET, "--record", str(record), *sim_args)
        cfg = ConfigBuilder().tenant("t1")
        key = cfg.key("k1", "t1")
        pool_extra = {"timeouts": timeouts} if timeouts else {}
        cfg.pool("p1", [member("m1", sim.address, credential=UPSTREAM_SECRET)], **pool_extra)
        cfg.pool(
            "p-anthropic", [member("a1", sim.address, kind="anthropic", credential=UPSTREAM_SECRET)]
        )
        cfg.route("gpt-test", ("p1", "sim-llama"))
        cfg.route("claude-test", ("p-anthropic", "sim-claude"))
        gateway = gateway_factory(cfg, **core_options)
        return Relay(sim, gateway, key, cfg, record)

    return start


@pytest.fixture
def relay(relay_factory: Callable[..., Relay]) -> Relay:
    return relay_factory("--ttft-ms", "20", "--itl-ms", "2")
