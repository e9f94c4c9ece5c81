"""Histograms for the client's measurements: percentiles, never means.

`Histogram` keeps log-linear buckets 1% wide (so a percentile is within 0.5% of the true value,
in bounded memory whatever the traffic), plus cumulative counts at fixed bounds for exporters
(Prometheus needs fixed buckets). `CountHistogram` is exact, for small whole numbers such as
attempts per call."""

from __future__ import annotations

import math
from collections import Counter

from sluicegate import percentile

GROWTH = 1.01
_LOG_GROWTH = math.log(GROWTH)


class Histogram:
    def __init__(self, export_bounds: tuple[float, ...]) -> None:
        self.export_bounds = export_bounds
        self.export_counts = [0] * (len(export_bounds) + 1)  # the last is +Inf
        self.count = 0
        self.sum = 0.0  # exporters need it (Prometheus `_sum`); never reported as a mean here
        self.min = math.inf
        self.max = -math.inf
        self._buckets: Counter[int] = Counter()
        self._zeros = 0

    def observe(self, value: float) -> None:
        if not math.isfinite(value):
            return
        value = max(value, 0.0)
        self.count += 1
        self.sum += value
        self.min = min(self.min, value)
        self.max = max(self.max, value)
        if value == 0.0:
            self._zeros += 1
        else:
            self._buckets[math.ceil(math.log(value) / _LOG_GROWTH)] += 1
        for i, bound in enumerate(self.export_bounds):
            if value <= bound:
                self.export_counts[i] += 1
                break
        else:
            self.export_counts[-1] += 1

    def percentile(self, q: float) -> float | None:
        if self.count == 0:
            return None
        rank = percentile.rank(self.count, q / 100)
        if rank <= self._zeros:
            return 0.0
        seen = self._zeros
        for index in sorted(self._buckets):
            seen += self._buckets[index]
            if seen >= rank:
                middle = math.pow(GROWTH, index - 0.5)  # the bucket is (g^(i-1), g^i]
                return min(max(middle, self.min), self.max)
        return self.max

    def cumulative_export(self) -> list[tuple[float, int]]:
        """(upper bound, count of values at or below it), ending with +Inf."""
        out: list[tuple[float, int]] = []
        running = 0
        for bound, n in zip((*self.export_bounds, math.inf), self.export_counts, strict=True):
            running += n
            out.append((bound, running))
        return out

    def summary(self) -> dict[str, float | int | None]:
        return {
            "count": self.count,
            "p50": self.percentile(50),
            "p95": self.percentile(95),
            "p99": self.percentile(99),
            "max": self.max if self.count else None,
        }


class CountHistogram:
    def __init__(self, export_bounds: tuple[float, ...]) -> None:
        self.export_bounds = export_bounds
        self.count = 0
        self.sum = 0
        self._values: Counter[int] = Counter()

    def observe(self, value: int) -> None:
        self.count += 1
        self.sum += value
        self._values[value] += 1

    def percentile(self, q: float) -> int | None:
        if self.count == 0:
            return None
        rank = percentile.rank(self.count, q / 100)
        seen = 0
        for value in sorted(self._values):
            seen += self._values[value]
            if seen >= rank:
                return value
        return max(self._values)

    def cumulative_export(self) -> list[tuple[float, int]]:
        out = [
            (bound, sum(n for v, n in self._values.items() if v <= bound))
            for bound in self.export_bounds
        ]
        out.append((math.inf, self.count))
        return out

    def summary(self) -> dict[str, float | int | None]:
        return {
            "count": self.count,
            "p50": self.percentile(50),
            "p95": self.percentile(95),
            "p99": self.percentile(99),
            "max": max(self._values) if self._values else None,
        }
