"""TTFT and TPOT as the gateway measures them agree with what the client (`sluicegate bench`)
measures, at P50, within the gateway's added latency plus 1 ms.

The bound checked, for TTFT and for TPOT alike:

    |client P50 through the gateway - gateway P50| <= max(0, added) + 1 ms
    added = client P50 through the gateway - client P50 straight to the simulator

The client's clock starts when it sends and stops when it reads; the gateway's starts when the
request has arrived and stops when it relays. What lies between is loopback and the gateway's own
work, which is what `added` measures (same client, same simulator, same load, one run after the
other). The gateway's P50 is taken from its usage events (exact per request); the status windows
report the same requests in log-linear buckets (about 9%), so their P50 must sit in the bucket
of the events' P50."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sluicegate.percentile import nearest_rank

from tests.support.gateway import ConfigBuilder, Gateway, member
from tests.support.procs import Proc

REQUESTS = 60


def bench(url: str, report: Path, *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable, "-m", "sluicegate", "bench", "--url", url, "--model", "chat",
            "--rate", "20", "--arrival", "constant", "--requests", str(REQUESTS),
            "--duration", "30s", "--prompt-tokens", "16", "--output-tokens", "12",
            "--workers", "1", "--quiet", "--json", str(report), *extra,
        ],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(report.read_text())
    assert result["ok"] == REQUESTS, result
    return result


def test_gateway_and_client_agree_on_ttft_and_tpot(
    sim_factory: Callable[..., Proc], gateway_factory: Callable[..., Gateway], tmp_path: Path
) -> None:
    sim = sim_factory("--ttft-ms", "fixed:30", "--itl-ms", "fixed:4", "--workers", "1")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", sim.address)]).route("chat", ("p", "sim"))
    gw = gateway_factory(cfg)

    direct = bench(sim.url, tmp_path / "direct.json")
    client = bench(gw.url, tmp_path / "gateway.json", "--key", key.secret)
    events = [e for e in gw.drain(expect=REQUESTS) if e["status"] == 200]
    assert len(events) == REQUESTS

    for stage in ("ttft_ms", "tpot_ms"):
        gateway_p50 = nearest_rank(sorted(e[stage] for e in events), 0.5)
        assert gateway_p50 is not None
        client_p50 = client[stage]["p50"]
        added = client_p50 - direct[stage]["p50"]
        bound = max(0.0, added) + 1.0
        assert abs(client_p50 - gateway_p50) <= bound, (
            f"{stage}: client P50 {client_p50:.3f} ms, gateway P50 {gateway_p50:.3f} ms, "
            f"added latency {added:.3f} ms (direct P50 {direct[stage]['p50']:.3f} ms)"
        )
        # The simulator's model is in both: 30 ms to the first token, 4 ms between tokens. TPOT
        # spans first to last token, so a first token that reached the gateway late by scheduling
        # jitter shortens it a little: 2% of slack below the model's value.
        floor = 30.0 if stage == "ttft_ms" else 4.0 * 0.98
        assert floor <= gateway_p50 <= client_p50 + bound

        status = json.loads(gw.core.status_snapshot([("run", 600, 0)]))
        windowed = status["pools"][0]["windows"]["run"][stage]
        assert windowed["n"] == REQUESTS
        assert gateway_p50 <= windowed["p50"] <= gateway_p50 * 1.1, (stage, windowed, gateway_p50)
