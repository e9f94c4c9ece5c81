"""The client's histograms and its stream tap, on their own."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

from sluicegate.client.histogram import CountHistogram, Histogram
from sluicegate.client.sse_tap import SseTap
from sluicegate.percentile import nearest_rank


def test_percentiles_within_half_a_percent_of_nearest_rank_never_a_mean() -> None:
    rng = random.Random(11)
    values = [rng.lognormvariate(4, 1.2) for _ in range(5000)] + [0.0] * 10
    h = Histogram((10.0, 100.0, 1000.0))
    for v in values:
        h.observe(v)
    for q in (50, 95, 99):
        exact = nearest_rank(sorted(values), q / 100)
        assert exact is not None
        got = h.percentile(q)
        assert got is not None and math.isclose(got, exact, rel_tol=0.006), (q, got, exact)
    summary = h.summary()
    assert set(summary) == {"count", "p50", "p95", "p99", "max"} and summary["count"] == 5010
    assert h.percentile(0.1) == 0.0
    cumulative = h.cumulative_export()
    assert cumulative[-1] == (math.inf, 5010)
    assert cumulative[0][1] == sum(1 for v in values if v <= 10)
    h.observe(float("nan"))
    assert h.count == 5010


def test_attempts_are_counted_exactly() -> None:
    h = CountHistogram((1.0, 2.0, 3.0))
    for v in [1] * 90 + [2] * 8 + [3] * 2:
        h.observe(v)
    assert (h.percentile(50), h.percentile(95), h.percentile(99)) == (1, 2, 3)
    assert h.cumulative_export() == [(1.0, 90), (2.0, 98), (3.0, 100), (math.inf, 100)]


def sse(payload: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


def test_tap_reads_openai_streams_across_chunk_boundaries() -> None:
    tap = SseTap(anthropic=False)
    body = (
        sse({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
        + b": keep-alive\r\n\r\n"
        + sse({"choices": [{"delta": {"content": "a"}}]}).replace(b"\n", b"\r\n")
        + sse({"choices": [{"delta": {"tool_calls": [{"index": 0}]}}]})
        + sse({"choices": [{"delta": {"content": "b"}}]})
        + sse({"choices": [], "usage": {"completion_tokens": 7}})
        + b"data: [DONE]\n\n"
    )
    for i in range(0, len(body), 5):  # five bytes at a time, "\r\n" split included
        tap.feed(body[i : i + 5], now=float(i))
    assert tap.content_events == 3
    assert tap.first_token_at is not None and tap.first_token_at > 0
    assert tap.usage_output_tokens == 7 and tap.output_tokens == 7
    assert tap.terminated and not tap.error


def test_tap_sees_an_error_event_and_anthropic_events() -> None:
    failed = SseTap(anthropic=False)
    failed.feed(
        sse({"choices": [{"delta": {"content": "x"}}]}) + sse({"error": {"message": "cut"}}), 1.0
    )
    assert failed.error and not failed.terminated and failed.output_tokens == 1

    tap = SseTap(anthropic=True)
    tap.feed(
        sse({"type": "message_start", "message": {"usage": {"input_tokens": 3}}}, "message_start"),
        1.0,
    )
    assert tap.first_token_at is None
    for t in (2.0, 3.0):
        tap.feed(
            sse({"type": "content_block_delta", "delta": {"text": "x"}}, "content_block_delta"), t
        )
    tap.feed(sse({"type": "message_delta", "usage": {"output_tokens": 2}}, "message_delta"), 4.0)
    tap.feed(sse({"type": "message_stop"}, "message_stop"), 5.0)
    assert tap.first_token_at == 2.0 and tap.output_tokens == 2 and tap.terminated


def test_importing_the_client_loads_neither_sdk_nor_the_control_plane() -> None:
    probe = (
        "import sys, sluicegate.client as c\n"
        "heavy = ['openai', 'anthropic', 'httpx2', 'control', 'prometheus_client',\n"
        "         'opentelemetry']\n"
        "print([m for m in heavy if m in sys.modules])\n"
        "c.OpenAI\n"
        "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "['openai']"]
