"""The client's own measurements: TTFT and TPOT agree with the gateway's usage rows within the
network's share, and they reach prometheus-client and OpenTelemetry."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from sluicegate.client import CallRecord, Governor, OpenAI
from sluicegate.percentile import nearest_rank

from tests.client.conftest import HELLO, Stack

CALLS = 20
TOKENS = 16
# A token is timed when the SDK asks for the bytes that hold it, so the SDK's own work on the
# chunk before (and the machine's scheduling) delays one call now and then: per call, a wide
# bound; at the P50, the tight one.
HICCUP_MS = 15.0


def test_client_ttft_and_tpot_agree_with_the_gateways_usage_rows(
    stack_factory: Callable[..., Stack],
) -> None:
    """With `share` = client total - gateway duration (the request's way in, the answer's way
    out, and each side's own work), per call:

        0 <= client TTFT - gateway TTFT <= share (+ a hiccup)
        |client TPOT - gateway TPOT| <= share / (tokens - 1) (+ a hiccup)

    and at the P50 within the P50 share plus 1 ms (TPOT: divided by tokens - 1). The client's
    clock starts before the gateway's and stops after it, for the first token as for the last;
    both count tokens the same way (content events, or usage when larger)."""
    stack = stack_factory(ttft_ms="fixed:60", itl_ms="fixed:5")

    def stream(sdk: OpenAI, **options: object) -> None:
        for _ in sdk.chat.completions.create(
            model="gpt",
            max_tokens=TOKENS,
            stream=True,
            messages=HELLO,
            **options,
        ):
            pass

    # The first calls of a process warm the SDK's parsers up; they are not measured.
    warmer = OpenAI(
        base_url=stack.openai_url, api_key=stack.key.secret, governor=Governor(export=False)
    )
    for _ in range(2):
        stream(warmer)
    warm = len(stack.events(expect=2))
    governor = Governor(export=False)
    sdk = OpenAI(base_url=stack.openai_url, api_key=stack.key.secret, governor=governor)
    seen: list[CallRecord] = []
    governor.subscribe(seen.append)
    for i in range(CALLS):
        stream(sdk, **({"stream_options": {"include_usage": True}} if i % 2 else {}))
    events = {e["request_id"]: e for e in stack.events(expect=warm + CALLS)[warm:]}
    assert len(seen) == CALLS and len(events) == CALLS
    shares = []
    for call in seen:
        event = events[call.request_id]
        assert call.output_tokens == TOKENS and call.attempts == 1 and call.outcome == "ok"
        assert call.ttft_ms is not None and call.tpot_ms is not None
        # The gateway's clock stops when it has handed the last bytes on, which may be a moment
        # after the client read them: a share just below zero is that moment, not an error.
        share = call.total_ms - event["duration_ms"]
        assert share >= -HICCUP_MS, (call, event)
        share = max(share, 0.0)
        shares.append(share)
        ttft_gap = call.ttft_ms - event["ttft_ms"]
        assert 0 <= ttft_gap <= share + HICCUP_MS, (ttft_gap, share)
        assert abs(call.tpot_ms - event["tpot_ms"]) <= (share + HICCUP_MS) / (TOKENS - 1)
    # The summaries agree at the P50 (the client's buckets are 1% wide).
    stats = governor.stats()
    share_p50 = nearest_rank(sorted(shares), 0.5)
    assert share_p50 is not None
    for stage, scale in (("ttft_ms", 1.0), ("tpot_ms", 1.0 / (TOKENS - 1))):
        gateway_p50 = nearest_rank(sorted(e[stage] for e in events.values()), 0.5)
        client_p50 = stats[stage]["p50"]
        assert gateway_p50 is not None and client_p50 is not None
        bound = (share_p50 + 1.0) * scale + 0.01 * gateway_p50
        assert abs(client_p50 - gateway_p50) <= bound, (stage, client_p50, gateway_p50, bound)
    assert stats["total_ms"]["count"] == CALLS


def test_measurements_reach_prometheus_client(stack: Stack) -> None:
    governor = Governor(name="prometheus-check")
    sdk = OpenAI(base_url=stack.openai_url, api_key=stack.key.secret, governor=governor)
    for _ in sdk.chat.completions.create(model="gpt", max_tokens=3, stream=True, messages=HELLO):
        pass
    sdk.chat.completions.create(model="gpt", max_tokens=3, messages=HELLO)
    families = {
        f.name: f for f in text_string_to_metric_families(generate_latest(REGISTRY).decode())
    }

    def value(family: str, sample: str, **labels: str) -> float:
        for s in families[family].samples:
            if (
                s.name == sample
                and s.labels.get("governor") == "prometheus-check"
                and all(s.labels.get(k) == v for k, v in labels.items())
            ):
                return s.value
        raise AssertionError(f"no {sample} {labels}")

    assert (
        value(
            "sluicegate_client_request_duration_seconds",
            "sluicegate_client_request_duration_seconds_count",
        )
        == 2
    )
    assert (
        value(
            "sluicegate_client_time_to_first_token_seconds",
            "sluicegate_client_time_to_first_token_seconds_count",
        )
        == 1
    )
    assert value("sluicegate_client_attempts", "sluicegate_client_attempts_bucket", le="1.0") == 2
    assert value("sluicegate_client_calls", "sluicegate_client_calls_total", outcome="ok") == 2
    assert value("sluicegate_client_in_flight", "sluicegate_client_in_flight") == 0


OTEL_PROBE = """
import json
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

reader = InMemoryMetricReader()
metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
from sluicegate.client import CallRecord, Governor

governor = Governor(name="otel-check")
for ttft in (50.0, 70.0):
    governor.recorder.record(CallRecord(
        method="POST", path="/v1/chat/completions", stream=True, outcome="ok", status=200,
        attempts=2, request_id="r", started_at=0.0, gate_wait_ms=0.0, total_ms=400.0,
        ttft_ms=ttft, tpot_ms=20.0, output_tokens=16,
    ))
out = {}
for rm in reader.get_metrics_data().resource_metrics:
    for sm in rm.scope_metrics:
        for m in sm.metrics:
            point = m.data.data_points[0]
            out[m.name] = getattr(point, "count", None) or getattr(point, "value", None)
            if m.name == "sluicegate.client.time_to_first_token":
                out["ttft_sum"] = point.sum
print(json.dumps(out))
"""


def test_measurements_reach_opentelemetry() -> None:
    # A process of its own: the global meter provider can be set once per process.
    done = subprocess.run(
        [sys.executable, "-c", OTEL_PROBE], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["sluicegate.client.time_to_first_token"] == 2
    assert abs(seen["ttft_sum"] - 0.12) < 1e-9  # seconds
    assert seen["sluicegate.client.request.duration"] == 2
    assert seen["sluicegate.client.attempts"] == 2
    assert seen["sluicegate.client.calls"] == 2
