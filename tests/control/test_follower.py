"""The follower of what the fleet committed: it applies a config version another replica
committed and holds (and ends) the drills started (and ended) through another replica, from
its own read of the database."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta

import pytest
import sqlalchemy as sa

from control.bridge.state import ControlState
from control.drills.models import Drill
from control.fleet.channel import channel_name
from control.fleet.follower import Follower
from control.timeutil import utcnow
from tests.control.helpers import Api, Harness
from tests.control.test_drills import _drilled, _topology


def _drill(drill_id: str, member: str, ends_in: timedelta, ended: bool = False) -> Drill:
    now = utcnow()
    return Drill(
        id=drill_id,
        pool_id="primary",
        member_id=member,
        route_alias=None,
        reason="committed by a peer",
        seconds=60,
        actor_id="tok_peer",
        actor_name="peer",
        started_at=now - timedelta(seconds=1),
        ends_at=now + ends_in,
        ended_at=now if ended else None,
    )


def test_the_follower_applies_what_peers_committed(harness: Harness, admin: Api) -> None:
    _topology(admin)
    ctx = harness.ctx
    follower = Follower(ctx, None)
    version = harness.bridge.core_version
    assert version is not None
    follower.sync()
    assert harness.bridge.core_version == version
    assert _drilled(harness) == (set(), set())

    # Rows a peer wrote: one drill active, one past its end, one ended early.
    with ctx.sessions() as session:
        session.add(_drill("drl_active", "sim-a", timedelta(seconds=60)))
        session.add(_drill("drl_past", "sim-b", timedelta(seconds=-1)))
        session.add(_drill("drl_ended", "sim-b", timedelta(seconds=60), ended=True))
        session.commit()
    follower.sync()
    assert _drilled(harness) == (set(), {("primary", "sim-a")})

    # Ended through the peer: ended here too.
    with ctx.sessions() as session:
        session.execute(sa.update(Drill).where(Drill.id == "drl_active").values(ended_at=utcnow()))
        session.commit()
    follower.sync()
    assert _drilled(harness) == (set(), set())

    # A version the peer committed (this core was not told): rebuilt and applied here.
    with ctx.sessions() as session:
        session.execute(
            sa.update(ControlState)
            .where(ControlState.id == 1)
            .values(config_version=ControlState.config_version + 1)
        )
        session.commit()
    follower.sync()
    assert harness.bridge.core_version == version + 1
    assert follower.refused is None


def test_a_stopping_follower_ends_its_wait_at_once(
    harness_factory: Callable[..., Harness], database_url: str
) -> None:
    """Waiting on its LISTEN connection for up to a heartbeat (a minute here), the follower
    returns as soon as it is woken: a stopping replica does not sit out the wait."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the follower listens on PostgreSQL only")
    harness = harness_factory(SLUICEGATE_FLEET_HEARTBEAT_MS="60000")
    follower = Follower(harness.ctx, channel_name("sgtest_follower_wake"))
    stop = threading.Event()
    thread = threading.Thread(target=follower.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while follower._waker is None and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # into its wait
        assert thread.is_alive()
        stop.set()
        started = time.monotonic()
        follower.wake()
        thread.join(5)
        assert not thread.is_alive()
        assert time.monotonic() - started < 2
        assert follower._waker is None  # its sockets closed
    finally:
        stop.set()
        follower.wake()
        thread.join(5)
