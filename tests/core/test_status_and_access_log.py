"""The status view's windows and the access log, through a real relay."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from sluicegate import _core

from tests.support.gateway import ConfigBuilder, member

CHAT = "/v1/chat/completions"


def test_status_windows_report_percentiles_rates_and_limits(sim_factory, gateway_factory) -> None:
    sim = sim_factory("--ttft-ms", "30", "--itl-ms", "5")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", sim.address, max_concurrency=4)]).route("chat", ("p", "sim"))
    gw = gateway_factory(cfg)
    body = {
        "model": "chat",
        "stream": True,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x"}],
    }
    for _ in range(20):
        with httpx.stream("POST", gw.url + CHAT, json=body, headers=key.headers) as r:
            r.read()
    status = json.loads(gw.core.status_snapshot())
    (pool,) = status["pools"]
    assert pool["id"] == "p" and pool["inflight_limit"] == 4
    assert pool["queue_limit"] == {"batch": 1024, "interactive": 256}
    assert pool["members"][0]["state"] == "ready"
    minute = pool["windows"]["1m"]
    assert minute["requests"] == 20 and minute["error_rate"] == 0
    assert 30 <= minute["ttft_ms"]["p50"] <= 45  # one bucket (about 9%) above the model
    assert 4.5 <= minute["tpot_ms"]["p50"] <= 7
    assert minute["ttft_ms"]["p50"] <= minute["ttft_ms"]["p95"] <= minute["ttft_ms"]["p99"]
    (route,) = status["routes"]
    assert (
        route["alias"] == "chat"
        and route["chain"] == ["p"]
        and route["windows"]["1m"]["requests"] == 20
    )
    assert set(pool["windows"]) == {"1m", "5m", "1h", "prev_5m"}


def test_the_access_log_has_a_line_per_request_and_no_secret(sim_factory, tmp_path: Path) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", sim.address, credential="upstream-canary-secret")]).route(
        "chat", ("p", "sim")
    )
    log = tmp_path / "access.jsonl"
    core = _core.Core(workers=1, access_log=str(log))
    core.apply_config(1, cfg.payload())
    url = "http://" + core.start("127.0.0.1:0")
    ok = httpx.post(url + CHAT, json={"model": "chat", "max_tokens": 2}, headers=key.headers)
    refused = httpx.post(
        url + CHAT, json={"model": "chat"}, headers={"Authorization": "Bearer sk-sg-wrong"}
    )
    core.stop(1)
    del core
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and len(log.read_text().splitlines()) < 2:
        time.sleep(0.05)
    text = log.read_text()
    lines = {row["request_id"]: row for row in map(json.loads, text.splitlines())}
    served = lines[ok.headers["x-request-id"]]
    assert served["tenant_id"] == "t" and served["key_prefix"] == key.secret[:12]
    assert (
        served["upstream"] == "m" and served["status"] == 200 and served["completion_tokens"] == 2
    )
    assert "duration_ms" in served and "queue_wait_ms" in served and "ttft_ms" in served
    denied = lines[refused.headers["x-request-id"]]
    assert (
        denied["status"] == 401
        and denied["reason"] == "invalid_api_key"
        and denied["outcome"] == "refused"
    )
    assert (
        key.secret not in text
        and "upstream-canary-secret" not in text
        and "sk-sg-wrong" not in text
    )


def test_status_windows_can_be_chosen(sim_factory, gateway_factory) -> None:
    import pytest

    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", sim.address)]).route("chat", ("p", "sim"))
    gw = gateway_factory(cfg)
    httpx.post(gw.url + CHAT, json={"model": "chat", "max_tokens": 1}, headers=key.headers)
    status = json.loads(gw.core.status_snapshot([("last20s", 20, 0), ("before", 30, 20)]))
    windows = status["pools"][0]["windows"]
    assert set(windows) == {"last20s", "before"}
    assert windows["last20s"]["requests"] == 1 and windows["before"]["requests"] == 0
    with pytest.raises(ValueError, match="seconds must be"):
        gw.core.status_snapshot([("bad", 0, 0)])
