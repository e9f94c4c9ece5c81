"""The one percentile function: nearest rank, what PostgreSQL's `percentile_disc` computes, so
that both databases, the client's histograms and the tests give the same figures. SQLite, which
has no percentile aggregate, picks the values at these ranks in SQL
(`control.usage.repository.percentiles_ranked`); values already in memory (tests) go through
`nearest_rank`. It lives in the package the client and the control plane both ship in, and
imports nothing of either."""

from __future__ import annotations

import math
from collections.abc import Sequence


def rank(count: int, q: float) -> int:
    """The 1-based rank of the `q` (0..1) percentile among `count` values: ceil(q * n)."""
    return min(max(1, math.ceil(q * count - 1e-9)), count)


def nearest_rank(ordered: Sequence[float], q: float) -> float | None:
    """The `q` (0..1) percentile of sorted values: the value at `rank`."""
    if not ordered:
        return None
    return ordered[rank(len(ordered), q) - 1]
