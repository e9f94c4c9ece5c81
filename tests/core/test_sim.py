"""The simulator: timing model, faults, record file, wire formats."""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

import httpx
import pytest

from tests.support.jsonl import whole_lines
from tests.support.sse import events

CHAT = "/v1/chat/completions"
# One client for timing: building a client (TLS context) costs tens of milliseconds.
CLIENT = httpx.Client(timeout=30)


def stream_timings(
    url: str, body: dict[str, object], headers: dict[str, str] | None = None
) -> tuple[float, list[float], list[dict[str, object]]]:
    """TTFT and inter-token gaps as a client sees them, plus the parsed events."""
    lines: list[str] = []
    stamps: list[float] = []
    start = time.perf_counter()
    with CLIENT.stream("POST", url, json=body, headers=headers) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            lines.append(line)
            if '"content":" ' in line or '"text":" ' in line or '"text_delta"' in line:
                stamps.append(time.perf_counter())
    ttft = stamps[0] - start
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return ttft, gaps, events(lines)


def test_timing_model_ttft_and_itl_within_tolerance(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "120", "--itl-ms", "15")
    ttfts, gaps = [], []
    for _ in range(3):
        ttft, g, _ = stream_timings(
            sim.url + CHAT, {"model": "m", "stream": True, "max_tokens": 30}
        )
        ttfts.append(ttft)
        gaps.extend(g)
    # Measured on a shared machine: allow scheduling noise above, never below the model.
    assert 0.118 <= statistics.median(ttfts) <= 0.170
    assert 0.013 <= statistics.median(gaps) <= 0.025
    # Deadline pacing: the total is ttft + 29 gaps, not drifting with per-token overheads.
    assert sum(gaps) / len(gaps) == pytest.approx(0.015, abs=0.004)


def test_distributions_vary_and_max_tokens_sets_length(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "uniform:10:60", "--itl-ms", "1", "--output-tokens", "fixed:7")
    ttfts = [stream_timings(sim.url + CHAT, {"model": "m", "stream": True})[0] for _ in range(8)]
    assert max(ttfts) - min(ttfts) > 0.01
    body = httpx.post(sim.url + CHAT, json={"model": "m"}).json()
    assert body["usage"]["completion_tokens"] == 7
    body = httpx.post(sim.url + CHAT, json={"model": "m", "max_tokens": 3}).json()
    assert body["usage"]["completion_tokens"] == 3
    assert body["choices"][0]["finish_reason"] == "length"


def test_max_concurrency_queues_requests_and_ttft_grows(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "100", "--itl-ms", "1", "--max-concurrency", "1")
    import concurrent.futures

    body = {"model": "m", "max_tokens": 1}
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        start = time.perf_counter()
        done = list(pool.map(lambda _: httpx.post(sim.url + CHAT, json=body, timeout=10), range(4)))
        elapsed = time.perf_counter() - start
    assert all(r.status_code == 200 for r in done)
    # One at a time: four requests of ~100 ms each take ~400 ms, not ~100 ms.
    assert elapsed >= 0.38


def test_openai_stream_shape_and_usage_chunk(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    body = {
        "model": "m",
        "stream": True,
        "max_tokens": 4,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "12345678"}],
    }
    _, _, evs = stream_timings(sim.url + CHAT, body)
    data = [e["data"] for e in evs]
    assert data[-1] == "[DONE]"
    usage_chunk = data[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"] == {"prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}
    assert data[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert sum(1 for d in data[1:-2] if d["choices"][0]["delta"].get("content")) == 4
    # Without include_usage there is no usage chunk.
    _, _, evs = stream_timings(sim.url + CHAT, {"model": "m", "stream": True, "max_tokens": 2})
    assert all("usage" not in e["data"] for e in evs if isinstance(e["data"], dict))


def test_anthropic_event_order_and_cumulative_usage(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    body = {
        "model": "m",
        "stream": True,
        "max_tokens": 3,
        "messages": [{"role": "user", "content": "abcdefgh"}],
    }
    _, _, evs = stream_timings(sim.url + "/v1/messages", body)
    names = [e["event"] for e in evs]
    assert names == [
        "message_start",
        "content_block_start",
        "ping",
        "content_block_delta",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert all(e["data"]["type"] == e["event"] for e in evs)
    assert evs[0]["data"]["message"]["usage"]["input_tokens"] == 2
    assert evs[-2]["data"]["usage"]["output_tokens"] == 3
    whole = httpx.post(sim.url + "/v1/messages", json={**body, "stream": False}).json()
    assert whole["type"] == "message" and whole["usage"] == {"input_tokens": 2, "output_tokens": 3}


def test_other_routes(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--models", "a,b", "--embedding-dims", "8")
    assert httpx.get(sim.url + "/health").text == "ok"
    assert [m["id"] for m in httpx.get(sim.url + "/v1/models").json()["data"]] == ["a", "b"]
    emb = httpx.post(
        sim.url + "/v1/embeddings", json={"model": "a", "input": ["xxxx", "yyyyyyyy"]}
    ).json()
    assert len(emb["data"]) == 2 and len(emb["data"][0]["embedding"]) == 8
    assert emb["usage"]["prompt_tokens"] == 3
    comp = httpx.post(
        sim.url + "/v1/completions", json={"model": "a", "prompt": "abcd", "max_tokens": 2}
    ).json()
    assert comp["object"] == "text_completion" and comp["usage"]["completion_tokens"] == 2
    assert httpx.post(sim.url + CHAT, json={"model": "zzz"}).status_code == 404
    assert httpx.post(sim.url + CHAT, content=b"{not json").status_code == 400


@pytest.mark.parametrize("code", [429, 500, 503])
def test_status_faults(sim_factory, code: int) -> None:
    sim = sim_factory("--ttft-ms", "1")
    r = httpx.post(
        sim.url + CHAT,
        json={"model": "m"},
        headers={"x-sim-fault": f"status,code={code},retry_after=2"},
    )
    assert r.status_code == code
    assert r.headers["retry-after"] == "2"
    assert "error" in r.json()


def test_fault_rates_from_flags(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--fault", "status=0.5,code=503", "--seed", "3")
    codes = [
        httpx.post(sim.url + CHAT, json={"model": "m", "max_tokens": 1}).status_code
        for _ in range(60)
    ]
    assert 15 <= codes.count(503) <= 45
    assert set(codes) == {200, 503}


def test_hang_before_headers(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1")
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(
            sim.url + CHAT, json={"model": "m"}, headers={"x-sim-fault": "hang"}, timeout=0.5
        )


def test_hang_after_k_tokens(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    got: list[str] = []
    with (
        pytest.raises(httpx.ReadTimeout),
        httpx.stream(
            "POST",
            sim.url + CHAT,
            json={"model": "m", "stream": True, "max_tokens": 10},
            headers={"x-sim-fault": "hang_after,after=3"},
            timeout=0.5,
        ) as r,
    ):
        for line in r.iter_lines():
            got.append(line)
    assert sum(1 for line in got if '"content":" ' in line) == 3


def test_cut_without_and_with_done(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    body = {"model": "m", "stream": True, "max_tokens": 10}
    got: list[str] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream(
            "POST", sim.url + CHAT, json=body, headers={"x-sim-fault": "cut,after=2"}
        ) as r,
    ):
        for line in r.iter_lines():
            got.append(line)
    assert sum(1 for line in got if '"content":" ' in line) == 2
    assert "data: [DONE]" not in got
    with httpx.stream(
        "POST", sim.url + CHAT, json=body, headers={"x-sim-fault": "cut,after=2,done=true"}
    ) as r:
        lines = list(r.iter_lines())
    assert sum(1 for line in lines if '"content":" ' in line) == 2
    assert lines[-2] == "data: [DONE]"


def test_drip_malformed_and_no_usage(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    body = {
        "model": "m",
        "stream": True,
        "max_tokens": 4,
        "stream_options": {"include_usage": True},
    }
    _, gaps, evs = stream_timings(sim.url + CHAT, body, {"x-sim-fault": "drip,ms=60; no_usage"})
    assert min(gaps) >= 0.055
    assert not any(isinstance(e["data"], dict) and e["data"].get("usage") for e in evs)
    _, _, evs = stream_timings(sim.url + CHAT, body, {"x-sim-fault": "malformed,after=1"})
    assert sum(1 for e in evs if isinstance(e["data"], str) and e["data"].startswith("{")) == 1
    whole = httpx.post(
        sim.url + CHAT, json={"model": "m", "max_tokens": 2}, headers={"x-sim-fault": "no_usage"}
    ).json()
    assert "usage" not in whole


def test_bad_fault_header_is_a_400(sim_factory) -> None:
    sim = sim_factory()
    r = httpx.post(sim.url + CHAT, json={"model": "m"}, headers={"x-sim-fault": "explode"})
    assert r.status_code == 400 and "unknown fault" in r.json()["error"]["message"]


def test_record_file_is_the_ground_truth(sim_factory, tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "5", "--record", str(record))
    body = {
        "model": "m",
        "stream": True,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "abcdefgh"}],
    }
    httpx.post(sim.url + CHAT, json={**body, "stream": False}, headers={"x-request-id": "r-whole"})
    stream_timings(sim.url + CHAT, body, {"x-request-id": "r-stream"})
    with pytest.raises(httpx.RemoteProtocolError):
        stream_timings(
            sim.url + CHAT, body, {"x-request-id": "r-cut", "x-sim-fault": "cut,after=3"}
        )
    with httpx.stream(
        "POST", sim.url + CHAT, json={**body, "max_tokens": 200}, headers={"x-request-id": "r-gone"}
    ) as r:
        for line in r.iter_lines():
            if '"content":" ' in line:
                break  # hang up after the first token
    httpx.post(
        sim.url + CHAT,
        json={"model": "m"},
        headers={"x-request-id": "r-500", "x-sim-fault": "status,code=500"},
    )
    deadline = time.monotonic() + 5
    lines: dict[str, dict[str, object]] = {}
    while time.monotonic() < deadline and len(lines) < 5:
        lines = {row["request_id"]: row for row in whole_lines(record)}
        time.sleep(0.05)
    assert lines["r-whole"]["outcome"] == "complete" and lines["r-whole"]["completion_tokens"] == 5
    assert lines["r-whole"]["prompt_tokens"] == 2
    assert (
        lines["r-stream"]["outcome"] == "complete" and lines["r-stream"]["completion_tokens"] == 5
    )
    assert lines["r-cut"]["outcome"] == "cut" and lines["r-cut"]["completion_tokens"] == 3
    assert lines["r-gone"]["outcome"] == "client_disconnected"
    assert 1 <= lines["r-gone"]["completion_tokens"] <= 5
    assert lines["r-500"]["outcome"] == "status" and lines["r-500"]["status"] == 500


def test_help_and_bad_arguments(tmp_path: Path) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "sluicegate", "sim", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0
    for option in [
        "--host",
        "--port",
        "--ttft-ms",
        "--itl-ms",
        "--output-tokens",
        "--max-concurrency",
        "--fault",
        "--record",
        "--seed",
    ]:
        assert option in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "sluicegate", "sim", "--ttft-ms", "gamma:1"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "unknown distribution" in bad.stderr
    top = subprocess.run(
        [sys.executable, "-m", "sluicegate", "--help"], capture_output=True, text=True
    )
    assert top.returncode == 0 and "sim" in top.stdout
