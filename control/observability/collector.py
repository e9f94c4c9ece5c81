"""A prometheus-client collector over `Core.metrics_snapshot()`: nothing is recorded in Python
per request; each scrape converts the core's families as they are (names, labels and buckets are
the core's, seconds as the core measures them), then adds the control plane's own families."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from control.bridge.core_bridge import CoreBridge
from control.diagnosis.schemas import ADVICE_HELP
from control.process.admin_tls import AdminTls

log = logging.getLogger("sluicegate.control")

# Pool id -> the doctor's advice (see control/diagnosis/schemas.py).
AdviceSource = Callable[[], Mapping[str, int]]


def _histogram(name: str, help_text: str, labels: list[str], samples: list[Any]) -> Metric:
    family = HistogramMetricFamily(name, help_text, labels=labels)
    for sample in samples:
        h = sample["histogram"]
        buckets = [
            ("+Inf" if bound is None else repr(float(bound)), float(count))
            for bound, count in h["buckets"]
        ]
        family.add_metric(sample["labels"], buckets, float(h["sum"]))
    return family


def core_family(family: Mapping[str, Any]) -> Metric:
    """One family of the core's snapshot as prometheus-client's family of the same type.
    Counter names keep their `_total`: prometheus-client takes it off the family name and writes
    it back on each sample."""
    name, kind, help_text = family["name"], family["type"], family["help"]
    labels = list(family["labels"])
    samples = family["samples"]
    if kind == "histogram":
        return _histogram(name, help_text, labels, samples)
    metric: CounterMetricFamily | GaugeMetricFamily | UnknownMetricFamily
    if kind == "counter":
        metric = CounterMetricFamily(name, help_text, labels=labels)
    elif kind == "gauge":
        metric = GaugeMetricFamily(name, help_text, labels=labels)
    else:
        metric = UnknownMetricFamily(name, help_text, labels=labels)
    for sample in samples:
        metric.add_metric(sample["labels"], float(sample["value"]))
    return metric


class SluicegateCollector(Collector):
    def __init__(
        self,
        bridge: CoreBridge,
        advice: AdviceSource | None = None,
        admin_tls: AdminTls | None = None,
    ) -> None:
        self._bridge = bridge
        self._advice = advice
        self._admin_tls = admin_tls

    def collect(self) -> Iterable[Metric]:
        for family in self._bridge.metrics_families().values():
            yield core_family(family)
        acked = self._bridge.acknowledged
        if acked is not None:
            yield GaugeMetricFamily(
                "sluicegate_control_config_acknowledged_version",
                "Last config version the data plane acknowledged to the control plane.",
                value=acked.version,
            )
            yield GaugeMetricFamily(
                "sluicegate_control_config_acknowledged_timestamp_seconds",
                "When the data plane last acknowledged a config snapshot (unix seconds).",
                value=acked.at.timestamp(),
            )
        rejection = self._bridge.last_rejection
        yield GaugeMetricFamily(
            "sluicegate_control_config_last_rejected_version",
            "Version of the last config snapshot the data plane refused (0: none since start).",
            value=rejection.version if rejection is not None else 0,
        )
        if self._advice is not None:
            yield from self._scale_advice(self._advice)
        if self._admin_tls is not None:
            yield from _admin_tls_families(self._admin_tls)

    def _scale_advice(self, advice: AdviceSource) -> Iterable[Metric]:
        try:
            by_pool = advice()
        except Exception:
            # A scrape still returns the core's metrics when the doctor cannot run (database down).
            log.exception("the doctor could not run for /metrics; scale advice left out")
            return
        family = GaugeMetricFamily("sluicegate_pool_scale_advice", ADVICE_HELP, labels=["pool"])
        for pool, value in sorted(by_pool.items()):
            family.add_metric([pool], value)
        yield family


def _admin_tls_families(tls: AdminTls) -> Iterable[Metric]:
    yield GaugeMetricFamily(
        "sluicegate_admin_tls_certificate_expiry_seconds",
        "Seconds until the notAfter of the admin port's certificate in force (negative: expired).",
        value=tls.not_after - time.time(),
    )
    yield CounterMetricFamily(
        "sluicegate_admin_tls_certificate_reloads_total",
        "Certificate reloads on the admin port that put a new pair in force.",
        value=tls.reloads,
    )
    yield CounterMetricFamily(
        "sluicegate_admin_tls_certificate_reload_failures_total",
        "Certificate reloads on the admin port refused (the pair in force stayed).",
        value=tls.reload_failures,
    )
