"""Drill operations (admin only). A drill acts on the core's memory, not on its snapshot: no
config version, no push. Its start and its end are audit rows, written in the transaction that
records them; the core is told inside that transaction and untold if it does not commit.

A drill must not black out a route by accident: one that would leave a route using the pool
without any pool able to serve (counting the drills already running) needs `allow_outage`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.orm import Session

from control.api.caller import SYSTEM, Caller
from control.api.errors import Conflict, FieldError, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.bridge.mutation import Mutation
from control.context import ControlContext
from control.drills import repository
from control.drills.models import Drill
from control.drills.schemas import DrillCreate, DrillOut
from control.ids import new_id
from control.pools import repository as pools
from control.pools.models import Pool
from control.routes import repository as routes
from control.timeutil import utcnow

log = logging.getLogger("sluicegate.control")

# (pool, member); member None: the whole pool.
Target = tuple[str, str | None]


def to_out(drill: Drill, now: datetime | None = None) -> DrillOut:
    now = now or utcnow()
    ended_at = drill.ended_at
    if ended_at is None and drill.ends_at <= now:
        ended_at = drill.ends_at  # ran its course; nobody had to end it
    return DrillOut(
        id=drill.id,
        state="ended" if ended_at is not None else "active",
        route=drill.route_alias,
        pool=drill.pool_id,
        member=drill.member_id,
        reason=drill.reason,
        seconds=drill.seconds,
        actor_id=drill.actor_id,
        actor_name=drill.actor_name,
        started_at=drill.started_at,
        ends_at=drill.ends_at,
        ended_at=ended_at,
        ended_by=drill.ended_by,
    )


def _target(drill: Drill) -> Target:
    return drill.pool_id, drill.member_id


def get_row(session: Session, caller: Caller, drill_id: str) -> Drill:
    caller.require_admin()
    drill = repository.get(session, drill_id)
    if drill is None:
        raise NotFound("drill not found")
    return drill


def get(session: Session, caller: Caller, drill_id: str) -> DrillOut:
    return to_out(get_row(session, caller, drill_id))


def list_page(
    session: Session,
    caller: Caller,
    *,
    pool: str | None,
    active: bool,
    limit: int,
    cursor: str | None,
) -> Page[DrillOut]:
    caller.require_admin()
    now = utcnow()
    rows = repository.page(
        session,
        pool=pool,
        active_at=now if active else None,
        after=decode_cursor(cursor, str),
        limit=limit,
    )
    items, next_cursor = page(rows, limit, lambda d: d.id)
    return Page(items=[to_out(d, now) for d in items], next_cursor=next_cursor)


def _check_target(session: Session, data: DrillCreate) -> Pool:
    errors = []
    pool = pools.get(session, data.pool)
    if pool is None:
        errors.append(FieldError("pool", "unknown pool"))
    elif data.member is not None and data.member not in {m.id for m in pool.members}:
        errors.append(FieldError("member", f"not a member of pool {data.pool!r}"))
    if data.route is not None:
        route = routes.get(session, data.route)
        if route is None:
            errors.append(FieldError("route", "unknown route"))
        elif data.pool not in {t.pool_id for t in route.chain}:
            errors.append(FieldError("route", f"does not send requests to pool {data.pool!r}"))
    if errors or pool is None:
        raise Validation("invalid drill", errors)
    return pool


def _serves(pool: Pool | None, out: set[Target]) -> bool:
    if pool is None or (pool.id, None) in out:
        return False
    return any(m.weight > 0 and (pool.id, m.id) not in out for m in pool.members)


def _blacked_out(session: Session, pool_id: str, out: set[Target]) -> list[str]:
    """Routes using the pool that no pool of their chain could serve with `out` held out."""
    dark = []
    for alias in pools.routes_using(session, pool_id):
        route = routes.get(session, alias)
        if route is None:
            continue
        if not any(_serves(pools.get(session, t.pool_id), out) for t in route.chain):
            dark.append(alias)
    return dark


def _summary(drill: Drill) -> dict[str, Any]:
    return {
        "pool": drill.pool_id,
        "member": drill.member_id,
        "route": drill.route_alias,
        "seconds": drill.seconds,
        "ends_at": drill.ends_at.isoformat(),
        "reason": drill.reason,
    }


def start(ctx: ControlContext, caller: Caller, data: DrillCreate) -> DrillOut:
    caller.require_admin()
    with ctx.mutator.mutate(caller, affects_core=False) as m:
        _check_target(m.session, data)
        now = utcnow()
        target: Target = (data.pool, data.member)
        running = repository.active(m.session, now)
        for other in running:
            if _target(other) == target:
                raise Conflict(
                    f"drill {other.id} holds this target out until {other.ends_at.isoformat()}; "
                    "end it first"
                )
        if not data.allow_outage:
            dark = _blacked_out(m.session, data.pool, {_target(d) for d in running} | {target})
            if dark:
                raise Conflict(
                    f"routes {', '.join(dark)} would have no pool left to serve them; "
                    "set allow_outage to drill anyway"
                )
        drill = Drill(
            id=new_id("drl"),
            pool_id=data.pool,
            member_id=data.member,
            route_alias=data.route,
            reason=data.reason,
            seconds=data.seconds,
            actor_id=caller.token_id,
            actor_name=caller.name,
            started_at=now,
            ends_at=now + timedelta(seconds=data.seconds),
        )
        m.session.add(drill)
        m.record("drill.start", "drill", drill.id, _summary(drill))
        _tell_core(ctx, m, target, float(data.seconds), undo_seconds=0.0)
    ctx.drills_changed.set()  # the closer's next wake-up may be this drill's end
    return to_out(drill, now)


def end(ctx: ControlContext, caller: Caller, drill_id: str) -> DrillOut:
    """Ends a drill early (the core lets the target back in at once), or records the end of one
    that ran its course. Ending an ended drill changes nothing."""
    caller.require_admin()
    with ctx.mutator.mutate(caller, affects_core=False) as m:
        drill = get_row(m.session, caller, drill_id)
        if drill.ended_at is not None:
            return to_out(drill)
        record_end(ctx, m, drill, caller)
    return to_out(drill)


def record_end(
    ctx: ControlContext,
    m: Mutation,
    drill: Drill,
    caller: Caller,
    *,
    reason: str | None = None,
    core_knows: bool = True,
) -> None:
    """Record the end of `drill` in mutation `m`; if it still runs (and the core still knows its
    target), the core lets the target back in now."""
    now = utcnow()
    early = drill.ends_at > now
    drill.ended_at = min(now, drill.ends_at)
    drill.ended_by = caller.name if early else None
    summary: dict[str, Any] = {"pool": drill.pool_id, "member": drill.member_id, "early": early}
    if reason is not None:
        summary["reason"] = reason
    m.record("drill.end", "drill", drill.id, summary)
    if early and core_knows:
        remaining = (drill.ends_at - now).total_seconds()
        _tell_core(ctx, m, _target(drill), 0.0, undo_seconds=remaining)


def end_with_target(
    ctx: ControlContext, m: Mutation, pool_id: str, members: set[str] | None, reason: str
) -> None:
    """In a change that removes a pool (`members` None) or some of its members: their running
    drills end with it, so that no drill outlives its target (nor comes back with a new pool or
    member of the same id)."""
    for drill in repository.active(m.session, utcnow()):
        if drill.pool_id != pool_id:
            continue
        if members is None or drill.member_id in members:
            record_end(ctx, m, drill, m.caller, reason=reason)


def _tell_core(
    ctx: ControlContext, m: Mutation, target: Target, seconds: float, *, undo_seconds: float
) -> None:
    pool, member = target
    try:
        ctx.bridge.drill(pool, member, seconds)
    except ValueError as e:
        # The database and the snapshot in force name the same pools; this is a race with a
        # change of the pool, and the caller may retry.
        raise Conflict(f"the data plane does not know this target now ({e}); retry") from None
    m.undo_on_failure(lambda: ctx.bridge.drill(pool, member, undo_seconds))


def reapply(ctx: ControlContext) -> list[str]:
    """At start, before any request: drills whose end is still ahead are held again for what is
    left of them. One whose pool or member is gone is recorded as ended. Returns their ids."""
    now = utcnow()
    with ctx.sessions() as session:
        running = list(repository.active(session, now))
    held = []
    gone = []
    for drill in running:
        remaining = (drill.ends_at - now).total_seconds()
        try:
            ctx.bridge.drill(drill.pool_id, drill.member_id, remaining)
            held.append(drill.id)
        except ValueError as e:
            log.warning("drill %s cannot be held again: %s", drill.id, e)
            gone.append(drill.id)
    _end_gone(ctx, gone)
    return held


def _end_gone(ctx: ControlContext, drill_ids: Iterable[str]) -> None:
    for drill_id in drill_ids:
        with ctx.mutator.mutate(SYSTEM, affects_core=False) as m:
            drill = repository.get(m.session, drill_id)
            if drill is not None and drill.ended_at is None:
                record_end(
                    ctx,
                    m,
                    drill,
                    SYSTEM,
                    reason="its pool or member no longer exists",
                    core_knows=False,
                )
