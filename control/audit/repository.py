"""Audit queries, newest first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api.pagination import keyset
from control.audit.models import AuditEntry


@dataclass(frozen=True)
class AuditFilters:
    resource_type: str | None = None
    resource_id: str | None = None
    actor_id: str | None = None
    action: str | None = None


def page(
    session: Session, filters: AuditFilters, after: int | None, limit: int
) -> Sequence[AuditEntry]:
    stmt = select(AuditEntry)
    if filters.resource_type is not None:
        stmt = stmt.where(AuditEntry.resource_type == filters.resource_type)
    if filters.resource_id is not None:
        stmt = stmt.where(AuditEntry.resource_id == filters.resource_id)
    if filters.actor_id is not None:
        stmt = stmt.where(AuditEntry.actor_id == filters.actor_id)
    if filters.action is not None:
        stmt = stmt.where(AuditEntry.action == filters.action)
    return session.scalars(keyset(stmt, AuditEntry.id, after, limit, descending=True)).all()
