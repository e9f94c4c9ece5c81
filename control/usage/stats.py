"""Nearest-rank percentiles, what PostgreSQL's `percentile_disc` computes, so that both
databases give the same figures: SQLite, which has no percentile aggregate, picks the values at
these ranks in SQL (`repository.percentiles_ranked`)."""

from __future__ import annotations

import math


def rank(count: int, q: float) -> int:
    """The 1-based rank of the `q` (0..1) percentile among `count` values: ceil(q * n)."""
    return min(max(1, math.ceil(q * count - 1e-9)), count)
