"""The measurements, published where the application already looks: prometheus-client's default
registry (read at scrape time) and the OpenTelemetry meter provider (recorded per call). Each is
used only if its package is installed; neither is imported before the first governor exists.

Names follow the gateway's (`sluicegate_` prefix, base units) with `client` in them, labelled by
governor, never by key or model."""

from __future__ import annotations

import importlib.util
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from sluicegate.client.budget import RetryBudget
from sluicegate.client.gate import Gate
from sluicegate.client.measure import TTFT_BOUNDS_MS, CallRecord, Recorder


class Exported(Protocol):
    """What is published of a governor (which imports this module, not the reverse)."""

    name: str
    gate: Gate
    budget: RetryBudget
    recorder: Recorder

    def subscribe(self, listener: Callable[[CallRecord], None]) -> Callable[[], None]: ...


_lock = threading.Lock()
_governors: weakref.WeakSet[Exported] = weakref.WeakSet()
_prometheus_registered = False
_otel_instruments: dict[str, Any] | None = None

_TTFT_HELP = "Time to the first token of a streamed call, as the client saw it."
_TPOT_HELP = "Time per output token after the first, per streamed call."
_TOTAL_HELP = "Whole call, gate wait, attempts and backoff included."
# name, help, recorder histogram, scale to base units
_HISTOGRAMS = (
    ("time_to_first_token_seconds", _TTFT_HELP, "ttft_ms", 1e-3),
    ("time_per_output_token_seconds", _TPOT_HELP, "tpot_ms", 1e-3),
    ("request_duration_seconds", _TOTAL_HELP, "total_ms", 1e-3),
    ("attempts", "Attempts per call (1 = no retry).", "attempts", 1.0),
)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def attach(governor: Exported) -> None:
    with _lock:
        _governors.add(governor)
        if _installed("prometheus_client"):
            _register_prometheus()
        if _installed("opentelemetry.metrics"):
            instruments = _otel()
            governor.subscribe(lambda call: _record_otel(instruments, governor.name, call))


def _register_prometheus() -> None:
    global _prometheus_registered
    if _prometheus_registered:
        return
    from prometheus_client import REGISTRY

    REGISTRY.register(_Collector())
    _prometheus_registered = True


class _Collector:
    """Reads every live governor at scrape time."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        governors = sorted(list(_governors), key=lambda g: g.name)
        families: dict[str, Any] = {}
        for name, doc, _, _ in _HISTOGRAMS:
            families[name] = HistogramMetricFamily(
                f"sluicegate_client_{name}", doc, labels=["governor"]
            )
        calls = CounterMetricFamily(
            "sluicegate_client_calls", "Calls by how they ended.", labels=["governor", "outcome"]
        )
        retries = CounterMetricFamily(
            "sluicegate_client_retries", "Retries sent.", labels=["governor"]
        )
        exhausted = CounterMetricFamily(
            "sluicegate_client_retry_budget_exhausted",
            "Retries not sent because the retry budget was spent.",
            labels=["governor"],
        )
        in_flight = GaugeMetricFamily(
            "sluicegate_client_in_flight", "Calls running.", labels=["governor"]
        )
        waiting = GaugeMetricFamily(
            "sluicegate_client_waiting", "Calls waiting at the gate.", labels=["governor"]
        )
        for g in governors:
            exports = g.recorder.exports()
            for name, _, key, scale in _HISTOGRAMS:
                buckets, total, _count = exports[key]
                families[name].add_metric(
                    [g.name],
                    buckets=[(_le(bound * scale), n) for bound, n in buckets],
                    sum_value=total * scale,
                )
            outcomes, retried = g.recorder.counts()
            for outcome, n in outcomes.items():
                calls.add_metric([g.name, outcome], n)
            retries.add_metric([g.name], retried)
            exhausted.add_metric([g.name], g.budget.exhausted)
            in_flight.add_metric([g.name], g.gate.in_flight)
            waiting.add_metric([g.name], g.gate.waiting)
        yield from families.values()
        yield from (calls, retries, exhausted, in_flight, waiting)


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(round(bound, 6)))


def _otel() -> dict[str, Any]:
    global _otel_instruments
    if _otel_instruments is None:
        from opentelemetry import metrics

        meter = metrics.get_meter("sluicegate.client")
        seconds = [b * 1e-3 for b in TTFT_BOUNDS_MS]
        _otel_instruments = {
            "ttft_ms": meter.create_histogram(
                "sluicegate.client.time_to_first_token", unit="s",
                description="Time to the first token of a streamed call, as the client saw it.",
                explicit_bucket_boundaries_advisory=seconds,
            ),
            "tpot_ms": meter.create_histogram(
                "sluicegate.client.time_per_output_token", unit="s",
                description="Time per output token after the first, per streamed call.",
            ),
            "total_ms": meter.create_histogram(
                "sluicegate.client.request.duration", unit="s",
                description="Whole call, gate wait, attempts and backoff included.",
            ),
            "attempts": meter.create_histogram(
                "sluicegate.client.attempts", unit="{attempt}", description="Attempts per call."
            ),
            "calls": meter.create_counter(
                "sluicegate.client.calls", unit="{call}", description="Calls by how they ended."
            ),
        }  # fmt: skip
    return _otel_instruments


def _record_otel(instruments: dict[str, Any], governor: str, call: CallRecord) -> None:
    attributes = {"sluicegate.client.governor": governor}
    instruments["calls"].add(1, {**attributes, "sluicegate.client.outcome": call.outcome})
    if call.attempts > 0:
        instruments["attempts"].record(call.attempts, attributes)
        instruments["total_ms"].record(call.total_ms / 1000, attributes)
    if call.ttft_ms is not None:
        instruments["ttft_ms"].record(call.ttft_ms / 1000, attributes)
    if call.tpot_ms is not None:
        instruments["tpot_ms"].record(call.tpot_ms / 1000, attributes)
