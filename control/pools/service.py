"""Pool operations (admin only). Members reference providers; every member of a pool speaks the
same API (the providers' kind), and at least one member must carry weight."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, FieldError, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.context import ControlContext
from control.drills import service as drills
from control.ids import new_id
from control.pools import repository
from control.pools.models import Pool, PoolMember
from control.pools.policies import (
    Admission,
    Ejection,
    HealthCheck,
    Retry,
    inflight_in_force,
    policy_diff,
    read,
)
from control.pools.schemas import (
    MemberIn,
    MemberOut,
    PoolCreate,
    PoolOut,
    PoolUpdate,
    TimeoutsOut,
)
from control.pools.updates import merged
from control.providers.kinds import API_OF_KIND
from control.timeutil import utcnow

TIMEOUT_FIELDS = ("connect_ms", "first_byte_ms", "idle_ms", "total_ms")
# Policies stored whole (control/pools/policies.py); health_check may be None (off).
POLICIES: dict[str, type[BaseModel]] = {
    "admission": Admission,
    "retry": Retry,
    "ejection": Ejection,
}


def to_out(session: Session, pool: Pool) -> PoolOut:
    kinds = repository.provider_kinds(session, (m.provider_id for m in pool.members))
    members = [
        MemberOut(
            id=m.id,
            provider_id=m.provider_id,
            kind=kinds[m.provider_id],  # type: ignore[arg-type]
            weight=m.weight,
            max_concurrency=m.max_concurrency,
            http2=m.http2,
        )
        for m in pool.members
    ]
    timeouts = TimeoutsOut(**{name: getattr(pool, name) for name in TIMEOUT_FIELDS})
    admission = read(Admission, pool.admission)
    admission.max_inflight = inflight_in_force(
        admission.max_inflight, [m.max_concurrency for m in pool.members]
    )
    return PoolOut(
        id=pool.id,
        name=pool.name,
        members=members,
        timeouts=timeouts,
        admission=admission,
        retry=read(Retry, pool.retry),
        ejection=read(Ejection, pool.ejection),
        health_check=None if pool.health_check is None else read(HealthCheck, pool.health_check),
        created_at=pool.created_at,
        updated_at=pool.updated_at,
    )


def get(session: Session, caller: Caller, pool_id: str) -> PoolOut:
    caller.require_admin()
    pool = repository.get(session, pool_id)
    if pool is None:
        raise NotFound("pool not found")
    return to_out(session, pool)


def list_page(session: Session, caller: Caller, limit: int, cursor: str | None) -> Page[PoolOut]:
    caller.require_admin()
    rows = repository.page(session, after=decode_cursor(cursor, str), limit=limit)
    items, next_cursor = page(rows, limit, lambda p: p.id)
    return Page(items=[to_out(session, p) for p in items], next_cursor=next_cursor)


def _members(session: Session, members: Sequence[MemberIn]) -> list[PoolMember]:
    kinds = repository.provider_kinds(session, (m.provider_id for m in members))
    errors: list[FieldError] = []
    seen: set[str] = set()
    first_kind: str | None = None
    out = []
    for j, m in enumerate(members):
        member_id = m.id or m.provider_id
        if member_id in seen:
            errors.append(FieldError(f"members[{j}].id", f"member id {member_id!r} is used twice"))
        seen.add(member_id)
        kind = kinds.get(m.provider_id)
        if kind is None:
            errors.append(FieldError(f"members[{j}].provider_id", "unknown provider"))
        elif first_kind is None:
            first_kind = kind
        elif API_OF_KIND[kind] != API_OF_KIND[first_kind]:
            errors.append(
                FieldError(
                    f"members[{j}].provider_id",
                    f"is a {kind} provider; every member of a pool must speak the API of "
                    f"{first_kind}",
                )
            )
        out.append(
            PoolMember(
                id=member_id,
                position=j,
                provider_id=m.provider_id,
                weight=m.weight,
                max_concurrency=m.max_concurrency,
                http2=m.http2,
            )
        )
    if all(m.weight == 0 for m in members):
        errors.append(FieldError("members", "at least one member needs a weight above 0"))
    if errors:
        raise Validation("invalid pool members", errors)
    return out


def _member_summary(members: Sequence[PoolMember]) -> list[dict[str, Any]]:
    return [
        {
            "id": m.id,
            "provider_id": m.provider_id,
            "weight": m.weight,
            "max_concurrency": m.max_concurrency,
            "http2": m.http2,
        }
        for m in members
    ]


def create(ctx: ControlContext, caller: Caller, data: PoolCreate) -> PoolOut:
    caller.require_admin()
    pool_id = data.id or new_id("pool")
    with ctx.mutator.mutate(caller, subject=("pool", pool_id)) as m:
        if repository.get(m.session, pool_id) is not None:
            raise Conflict(f"pool {pool_id!r} already exists")
        now = utcnow()
        members = _members(m.session, data.members)
        policies: dict[str, Any] = {
            name: merged(model, None, getattr(data, name), name) for name, model in POLICIES.items()
        }
        policies["health_check"] = (
            None
            if data.health_check is None
            else merged(HealthCheck, None, data.health_check, "health_check")
        )
        pool = Pool(
            id=pool_id,
            name=data.name or pool_id,
            created_at=now,
            updated_at=now,
            members=members,
            **data.timeouts.model_dump(),
            **policies,
        )
        m.session.add(pool)
        summary = {
            "id": pool_id,
            "name": pool.name,
            "members": _member_summary(members),
            "timeouts": data.timeouts.model_dump(),
            **policies,
        }
        m.record("pool.create", "pool", pool_id, summary)
        m.session.flush()
        out = to_out(m.session, pool)
    return out


def update(ctx: ControlContext, caller: Caller, pool_id: str, data: PoolUpdate) -> PoolOut:
    caller.require_admin()
    with ctx.mutator.mutate(caller, subject=("pool", pool_id)) as m:
        pool = repository.get(m.session, pool_id)
        if pool is None:
            raise NotFound("pool not found")
        summary: dict[str, Any] = {}
        if data.name is not None and data.name != pool.name:
            pool.name = summary["name"] = data.name
        if data.timeouts is not None:
            changed = {
                k: v
                for k, v in data.timeouts.model_dump(exclude_unset=True).items()
                if getattr(pool, k) != v
            }
            for name, value in changed.items():
                setattr(pool, name, value)
            if changed:
                summary["timeouts"] = changed
        summary.update(_policy_changes(pool, data))
        if data.members is not None:
            members = _members(m.session, data.members)
            removed = {old.id for old in pool.members} - {new.id for new in members}
            if removed:
                drills.end_with_target(ctx, m, pool_id, removed, "member removed from the pool")
            if _member_summary(members) != _member_summary(pool.members):
                pool.members.clear()
                m.session.flush()
                pool.members.extend(members)
                summary["members"] = _member_summary(members)
        if summary:
            pool.updated_at = utcnow()
            m.record("pool.update", "pool", pool_id, summary)
        m.session.flush()
        out = to_out(m.session, pool)
    return out


def _policy_changes(pool: Pool, data: PoolUpdate) -> dict[str, Any]:
    """Apply the policy fields sent; returns what changed, by policy (for the audit row)."""
    out: dict[str, Any] = {}
    for name, model in POLICIES.items():
        patch = getattr(data, name)
        if patch is None:
            continue
        old = getattr(pool, name)
        new = merged(model, old, patch, name)
        diff = policy_diff(old, new)
        if diff is not None:
            setattr(pool, name, new)
            out[name] = diff
    if "health_check" in data.model_fields_set:
        old_check = pool.health_check
        new_check = (
            None
            if data.health_check is None
            else merged(HealthCheck, old_check, data.health_check, "health_check")
        )
        diff = policy_diff(old_check, new_check)
        if diff is not None:
            pool.health_check = new_check
            out["health_check"] = diff
    return out


def delete(ctx: ControlContext, caller: Caller, pool_id: str) -> None:
    caller.require_admin()
    with ctx.mutator.mutate(caller, subject=("pool", pool_id)) as m:
        pool = repository.get(m.session, pool_id)
        if pool is None:
            raise NotFound("pool not found")
        routes = repository.routes_using(m.session, pool_id)
        if routes:
            raise Conflict(
                f"routes {', '.join(routes)} send requests to this pool; change them first"
            )
        drills.end_with_target(ctx, m, pool_id, None, "pool deleted")
        m.session.delete(pool)
        m.record("pool.delete", "pool", pool_id, {})
