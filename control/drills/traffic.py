"""What a drill's routes carry now, read from the core's own counters (`metrics_snapshot`):
requests by route, pool, upstream and status class (`sluicegate_requests_total`, where `model`
is the route alias), each member's state (a member of a drilled pool reads `drilled`), and the
gateway's own refusals. Counters only: a
watcher (`sluicegate drill`) differences two readings."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.context import ControlContext
from control.drills.schemas import DrillTraffic, MemberState, UpstreamTraffic
from control.drills.service import get_row, to_out
from control.pools import repository as pools
from control.routes import repository as routes
from control.timeutil import utcnow

# sluicegate_upstream_state: 0 ready, 1 ejected, 2 cooling down after a 429, 3 failing health
# checks, 4 drilled.
STATES: dict[int, MemberState] = {
    0: "ready",
    1: "ejected",
    2: "cooling_down",
    3: "failing_checks",
    4: "drilled",
}


def _samples(family: dict[str, Any] | None) -> list[tuple[dict[str, str], float]]:
    if family is None:
        return []
    names = family["labels"]
    return [
        (dict(zip(names, s["labels"], strict=True)), float(s["value"]))
        for s in family["samples"]
        if s.get("value") is not None
    ]


def read(ctx: ControlContext, session: Session, caller: Caller, drill_id: str) -> DrillTraffic:
    drill = get_row(session, caller, drill_id)
    families = ctx.bridge.metrics_families()
    at = utcnow()

    requests: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for labels, value in _samples(families.get("sluicegate_requests_total")):
        leg = (labels["model"], labels["pool"], labels["upstream"])
        by_class = requests[leg]
        by_class[labels["status_class"]] = by_class.get(labels["status_class"], 0) + int(value)
    states = {
        (labels["pool"], labels["upstream"]): STATES.get(int(value), "unknown")
        for labels, value in _samples(families.get("sluicegate_upstream_state"))
    }
    drilled_pools = {
        labels["pool"]
        for labels, value in _samples(families.get("sluicegate_pool_drilled"))
        if value > 0
    }
    rejections = {
        labels["reason"]: int(value)
        for labels, value in _samples(families.get("sluicegate_rejections_total"))
    }

    aliases = (
        [drill.route_alias]
        if drill.route_alias is not None
        else pools.routes_using(session, drill.pool_id)
    )
    upstreams = []
    for alias in aliases:
        route = routes.get(session, alias)
        if route is None:
            continue
        for target in route.chain:
            pool = pools.get(session, target.pool_id)
            if pool is None:
                continue
            for member in pool.members:
                upstreams.append(
                    UpstreamTraffic(
                        route=alias,
                        pool=pool.id,
                        upstream=member.id,
                        state=(
                            "drilled"
                            if pool.id in drilled_pools
                            else states.get((pool.id, member.id), "unknown")
                        ),
                        requests=requests.get((alias, pool.id, member.id), {}),
                    )
                )
    return DrillTraffic(drill=to_out(drill, at), at=at, upstreams=upstreams, rejections=rejections)
