"""Quota rules shared by tenants and keys: setting one, resetting one, and the rule between a
key's and its tenant's.

A key's quota never exceeds its tenant's of the same period (tokens with tokens, money with
money); quotas of different periods are not compared, the tenant's bounds the key's use anyway.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from control.api.errors import FieldError
from control.keys.models import ApiKey
from control.quotas.models import QuotaColumns
from control.quotas.schemas import QuotaIn, QuotaOut


def quota_of(row: QuotaColumns) -> QuotaOut | None:
    if row.quota_period is None:
        return None
    return QuotaOut(
        period=row.quota_period,  # type: ignore[arg-type]
        tokens=row.quota_tokens,
        cost_micros=row.quota_cost_micros,
        reset_at=row.quota_reset_at,
    )


def quota_in(row: QuotaColumns) -> QuotaIn | None:
    """The row's quota as a request would give it (to copy it onto a rotated key)."""
    if row.quota_period is None:
        return None
    return QuotaIn(
        period=row.quota_period,  # type: ignore[arg-type]
        tokens=row.quota_tokens,
        cost_micros=row.quota_cost_micros,
    )


def unchanged(row: QuotaColumns, quota: QuotaIn | None) -> bool:
    if quota is None:
        return row.quota_period is None
    return (row.quota_period, row.quota_tokens, row.quota_cost_micros) == (
        quota.period,
        quota.tokens,
        quota.cost_micros,
    )


def _next_anchor(row: QuotaColumns, now: datetime) -> int:
    """Strictly later than the last anchor: the core takes the ledger's figure again."""
    return max(int(now.timestamp()), (row.quota_anchor or 0) + 1)


def set_quota(row: QuotaColumns, quota: QuotaIn | None, now: datetime) -> None:
    """Store a new definition. A quota set where there was none, or moved to another period, is
    counted afresh from the ledger; a changed allowance in the same period keeps its count."""
    if quota is None:
        row.quota_period = row.quota_tokens = row.quota_cost_micros = None
        row.quota_since = row.quota_anchor = None
        row.quota_reset_at = None
        return
    redefined = row.quota_period != quota.period
    row.quota_tokens, row.quota_cost_micros = quota.tokens, quota.cost_micros
    if not redefined:
        return
    row.quota_period = quota.period
    reset = None if row.quota_reset_at is None else int(row.quota_reset_at.timestamp())
    if quota.period == "none":
        # One allowance: counted from now.
        row.quota_since = int(now.timestamp())
    else:
        row.quota_since = reset
    row.quota_anchor = _next_anchor(row, now)


def reset(row: QuotaColumns, now: datetime) -> None:
    """The operator's reset: the count starts again now (the second)."""
    row.quota_reset_at = now
    row.quota_since = int(now.timestamp())
    row.quota_anchor = _next_anchor(row, now)


def above_tenant(key: QuotaIn | None, tenant: QuotaColumns) -> list[FieldError]:
    if key is None or tenant.quota_period is None or tenant.quota_period != key.period:
        return []
    errors = []
    for name, mine, theirs in (
        ("tokens", key.tokens, tenant.quota_tokens),
        ("cost_micros", key.cost_micros, tenant.quota_cost_micros),
    ):
        if mine is not None and theirs is not None and mine > theirs:
            errors.append(
                FieldError(f"quota.{name}", f"exceeds the tenant's {key.period} quota ({theirs})")
            )
    return errors


def keys_above(session: Session, tenant_id: str, quota: QuotaIn | None) -> list[FieldError]:
    """A tenant's new quota may not fall below its keys' own of the same period."""
    if quota is None:
        return []
    errors = []
    for name, cap, column in (
        ("tokens", quota.tokens, ApiKey.quota_tokens),
        ("cost_micros", quota.cost_micros, ApiKey.quota_cost_micros),
    ):
        if cap is None:
            continue
        count = session.scalar(
            select(func.count())
            .select_from(ApiKey)
            .where(
                ApiKey.tenant_id == tenant_id,
                ApiKey.status != "revoked",
                ApiKey.quota_period == quota.period,
                column > cap,
            )
        )
        if count:
            errors.append(
                FieldError(
                    f"quota.{name}",
                    f"{count} key(s) of this tenant have a higher {quota.period} quota; "
                    "lower them first",
                )
            )
    return errors
