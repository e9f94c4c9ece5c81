"""Quota columns shared by tenants and keys: an allowance of tokens and/or money per period.

`quota_since` and `quota_anchor` are unix seconds, so that the ledger's sums (over rollups whose
buckets are unix seconds too) stay integer arithmetic on both databases:
- `quota_since`: the count starts here at the earliest (a second). A `none` quota counts from
  when it was set; any quota counts from its last reset. The ledger reads rollups for the whole
  minutes and raw rows for the seconds before the first (`ledger.py`).
- `quota_anchor`: when the quota was last set, re-periodized or reset. It goes to the core as the
  quota's `period_start` when later than the period's own start: the core takes the ledger's
  figure again when it moves forward, and keeps its live count otherwise.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

QUOTA_PERIODS = ("none", "daily", "monthly")


class QuotaColumns:
    """Checked by the API schemas (no CHECK constraint: adding one would rewrite the key table)."""

    # None: no quota.
    quota_period: Mapped[str | None] = mapped_column(String(8))
    quota_tokens: Mapped[int | None] = mapped_column(BigInteger)
    quota_cost_micros: Mapped[int | None] = mapped_column(BigInteger)
    quota_since: Mapped[int | None] = mapped_column(BigInteger)
    quota_anchor: Mapped[int | None] = mapped_column(BigInteger)
    quota_reset_at: Mapped[datetime | None]
