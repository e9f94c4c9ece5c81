"""The doctor on windows a real data plane measured: three simulators behind three pools, driven by
`sluicegate bench` (open loop) into three regimes at once, and the doctor names each with its
evidence, in the API and in the scale-advice gauge on /metrics.

- queue: the pool admits 2 requests at a time (admission.max_inflight) and queues 8; arrivals
  at 40/s against a capacity near 26/s: the gateway's queue sits at its limit.
- compute: no admission limit, but the simulator computes 2 requests at a time
  (--max-concurrency): requests wait upstream, P50 of TTFT rises with load.
- healthy: arrivals well within what the simulator serves.

Timeline (wall clock, the core's windows are 10-second slots): light load (8/s) until a slot
boundary S, the regime's load from S on, the reading at S + 13.5 s. The doctor compares the last
20 s (the slots from S on) with the 30 s before S."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sluicegate._core import Core

from control.api.app import create_app
from control.bridge.core_bridge import CoreBridge
from tests.control.conftest import make_settings
from tests.control.helpers import ADMIN_TOKEN, Api
from tests.support.procs import Proc, start_sim

SIM_TIMING = ("--ttft-ms", "fixed:40", "--itl-ms", "fixed:5", "--workers", "1")
# pool -> (simulator options, admission policy, arrivals/s before S, arrivals/s from S on)
REGIMES: dict[str, tuple[tuple[str, ...], dict[str, Any], float, float]] = {
    "queue": (
        (),
        {
            "max_inflight": 2,
            "interactive": {"max_depth": 8, "max_wait_ms": 10000},
            "tenant_share": 1,
        },
        8,
        40,
    ),
    "compute": (("--max-concurrency", "2"), {"tenant_share": 1}, 8, 34),
    "healthy": ((), {}, 8, 10),
}
READ_AT = 13.5


@dataclass
class Reading:
    boundary: float
    diagnosis: dict[str, Any]
    metrics: str

    def pool(self, pool: str) -> dict[str, Any]:
        (found,) = [p for p in self.diagnosis["pools"] if p["pool"] == pool]
        return found

    def explain(self, pool: str) -> str:
        found = self.pool(pool)
        checks = [
            f"{r['rule']}: {c['name']} {c['held']}: {c['detail']}"
            for r in found["rules"]
            for c in r["checks"]
        ]
        return "\n".join([found["summary"], *checks])


def _bench(url: str, key: str, route: str, rate: float, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "sluicegate", "bench", "--url", url, "--model", route,
            "--key", key, "--rate", str(rate), "--duration", f"{seconds:.2f}s",
            "--prompt-tokens", "8", "--output-tokens", "8", "--timeout", "30s",
            "--workers", "1", "--quiet",
        ],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _sleep_until(t: float) -> None:
    time.sleep(max(0.0, t - time.time()))


@pytest.fixture(scope="module")
def reading(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Reading]:
    tmp: Path = tmp_path_factory.mktemp("regimes")
    sims: dict[str, Proc] = {}
    bridge = CoreBridge(Core(workers=2))
    client = None
    try:
        for name, (extra, _, _, _) in REGIMES.items():
            sims[name] = start_sim(tmp, *SIM_TIMING, *extra, name=name)
        settings = make_settings(
            f"sqlite:///{tmp}/doctor.db",
            SLUICEGATE_DOCTOR_RECENT_SECONDS="20",
            SLUICEGATE_DOCTOR_BASELINE_SECONDS="30",
        )
        data = "http://" + bridge.start("127.0.0.1:0")
        client = TestClient(create_app(settings, bridge))
        client.__enter__()
        admin = Api(client, ADMIN_TOKEN)
        admin.create_tenant(id="t", name="T")
        for name, (_, admission, _, _) in REGIMES.items():
            admin.create_provider(id=name, base_url=f"{sims[name].url}/v1")
            admin.create_pool(id=name, members=[{"provider_id": name}], admission=admission)
            admin.create_route(alias=name, chain=[{"pool": name, "model": "sim"}])
        key = admin.create_key(tenant_id="t")["key"]

        now = time.time()
        boundary = (now // 10 + 1) * 10
        if boundary - now < 6:
            boundary += 10
        light = [
            _bench(data, key, name, before, boundary - time.time() - 0.2)
            for name, (_, _, before, _) in REGIMES.items()
        ]
        for proc in light:
            proc.wait(timeout=30)
        _sleep_until(boundary)
        heavy = {
            name: _bench(data, key, name, after, READ_AT + 1)
            for name, (_, _, _, after) in REGIMES.items()
        }
        _sleep_until(boundary + READ_AT)
        diagnosis = admin.get("/v1/admin/diagnosis").json()
        metrics = client.get("/metrics").text
        for proc in heavy.values():
            proc.kill()  # the reading is taken; the backlog left upstream need not drain
            proc.wait(timeout=10)
        yield Reading(boundary, diagnosis, metrics)
    finally:
        if client is not None:
            client.__exit__(None, None, None)
        bridge.stop(1.0)
        for proc in sims.values():
            proc.stop()


def test_the_reading_compares_the_regime_with_the_light_load_before_it(reading: Reading) -> None:
    # A precondition of the other tests, not a speed check: the reading fell in the slot aimed at,
    # so the recent window holds the regime's load only and the baseline the light load only.
    at = datetime.fromisoformat(reading.diagnosis["at"]).timestamp()
    assert reading.boundary + 10 <= at < reading.boundary + 20, reading.diagnosis["at"]
    assert (reading.diagnosis["recent_seconds"], reading.diagnosis["baseline_seconds"]) == (20, 30)


def _advice_gauge(metrics: str, pool: str) -> float:
    match = re.search(rf'^sluicegate_pool_scale_advice{{pool="{pool}"}} (\S+)$', metrics, re.M)
    assert match, metrics
    return float(match.group(1))


def _checks(pool: dict[str, Any], rule: str) -> dict[str, bool]:
    (found,) = [r for r in pool["rules"] if r["rule"] == rule]
    return {c["name"]: c["held"] for c in found["checks"]}


def test_gateway_queue_saturation_is_queueing(reading: Reading) -> None:
    pool = reading.pool("queue")
    assert pool["verdict"] == "queueing", reading.explain("queue")
    assert pool["scale_advice"] == 2 and _advice_gauge(reading.metrics, "queue") == 2
    recent = pool["recent"]
    # The evidence: in flight at the pool's limit, the queue at its limit (refusals), and most of
    # TTFT spent waiting in it while the upstream's part held.
    assert recent["max_inflight"] == pool["inflight_limit"] == 2
    assert recent["rejected"] > 0 and pool["queue_near_slots"] == pool["slots"] == 2
    assert recent["queue_wait_ms"]["p95"] >= 0.5 * recent["latency_ms"]["p95"]
    assert recent["latency_ms"]["p99"] >= 1.5 * pool["baseline"]["latency_ms"]["p99"]
    assert all(_checks(pool, "queueing").values())
    assert not _checks(pool, "compute_short")["upstream_p50_rises"]
    assert "adding upstream compute will not help" in pool["summary"]


def test_upstream_compute_saturation_is_compute_short(reading: Reading) -> None:
    pool = reading.pool("compute")
    assert pool["verdict"] == "compute_short", reading.explain("compute")
    assert pool["scale_advice"] == 1 and _advice_gauge(reading.metrics, "compute") == 1
    recent, baseline = pool["recent"], pool["baseline"]
    # P50 of TTFT rose with load, and not in the gateway's queue (there is no admission limit):
    # the requests wait upstream, in flight at the gateway.
    assert pool["inflight_limit"] is None and recent["rejected"] == 0
    assert recent["queue_wait_ms"]["p50"] < 1
    assert recent["upstream_p50_ms"] >= 3 * baseline["upstream_p50_ms"]
    assert recent["max_inflight"] > 2
    assert _checks(pool, "compute_short") == {
        "upstream_p50_rises": True,
        "p95_rises": True,
        "p99_rises": True,
    }
    assert "scale the model servers" in pool["summary"]


def test_a_pool_within_its_capacity_is_healthy(reading: Reading) -> None:
    pool = reading.pool("healthy")
    assert pool["verdict"] == "healthy", reading.explain("healthy")
    assert pool["scale_advice"] == 0 and _advice_gauge(reading.metrics, "healthy") == 0
    assert not any(r["matched"] for r in pool["rules"]) and len(pool["rules"]) == 4
    assert pool["summary"].startswith("healthy: ") and pool["recent"]["requests"] >= 20
    assert pool["recent"]["error_rate"] == 0 and pool["recent"]["rejected"] == 0
