"""Percentiles and the latency table: P50/P95/P99 and rates, never a mean."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of `values`; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def fmt_ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def latency_table(rows: dict[str, Sequence[float]], title: str = "stage") -> str:
    """A fixed-width table of P50/P95/P99 in milliseconds per stage."""
    header = f"{title:<16}{'n':>7}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}"
    lines = [header, "-" * len(header)]
    for name, values in rows.items():
        p50, p95, p99 = (percentile(values, q) for q in (50, 95, 99))
        lines.append(
            f"{name:<16}{len(values):>7}{fmt_ms(p50):>10}{fmt_ms(p95):>10}{fmt_ms(p99):>10}"
        )
    return "\n".join(lines)
