"""Percentiles computed in Python (SQLite has no percentile aggregate): nearest rank, which is
what PostgreSQL's `percentile_disc` computes, so both databases give the same figures."""

from __future__ import annotations

import math
from collections.abc import Sequence


def nearest_rank(ordered: Sequence[float], q: float) -> float | None:
    """The `q` (0..1) percentile of sorted values: the value at rank ceil(q * n)."""
    if not ordered:
        return None
    rank = max(1, math.ceil(q * len(ordered) - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]
