"""The one percentile function: nearest rank (PostgreSQL's `percentile_disc`), never a mean."""

from __future__ import annotations

import pytest
from sluicegate.percentile import nearest_rank


def test_nothing_has_no_percentile() -> None:
    assert nearest_rank([], 0.5) is None


@pytest.mark.parametrize(("q", "expected"), [(0.5, 50), (0.95, 95), (0.99, 99), (1.0, 100)])
def test_the_value_at_rank_ceil_q_times_n(q: float, expected: float) -> None:
    assert nearest_rank([float(v) for v in range(1, 101)], q) == expected


def test_a_value_of_the_set_never_an_interpolation() -> None:
    assert nearest_rank([10.0, 20.0], 0.5) == 10.0
    assert nearest_rank([10.0, 20.0, 30.0, 40.0], 0.5) == 20.0
    assert nearest_rank([10.0, 20.0, 30.0, 40.0], 0.51) == 30.0
    assert nearest_rank([7.0], 0.0) == 7.0 and nearest_rank([7.0], 0.99) == 7.0


def test_a_rank_that_is_whole_is_not_pushed_up_by_rounding() -> None:
    # 0.07 * 100 is 7.000000000000001 in binary floating point: still the 7th value, not the 8th.
    assert nearest_rank([float(v) for v in range(1, 101)], 0.07) == 7
    assert nearest_rank([float(v) for v in range(1, 101)], 0.29) == 29
