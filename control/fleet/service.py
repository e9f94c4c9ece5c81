"""The fleet's live replicas, as they last said themselves."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.bridge.state import committed_version
from control.fleet.models import Replica
from control.fleet.schemas import FleetOut, ReplicaOut
from control.timeutil import utcnow


def live(session: Session, dead_after_ms: int) -> Sequence[Replica]:
    since = utcnow() - timedelta(milliseconds=dead_after_ms)
    query = select(Replica).where(Replica.heartbeat_at >= since).order_by(Replica.name, Replica.id)
    return session.scalars(query).all()


def fleet(session: Session, caller: Caller, dead_after_ms: int) -> FleetOut:
    """Admin only: the fleet is shared infrastructure."""
    caller.require_admin()
    replicas = [ReplicaOut.model_validate(r) for r in live(session, dead_after_ms)]
    committed = committed_version(session)
    leaders = [r.id for r in replicas if r.leader]
    return FleetOut(
        committed_version=committed,
        in_step=all(r.applied_version == committed for r in replicas),
        leader=leaders[0] if leaders else None,
        replicas=replicas,
    )
