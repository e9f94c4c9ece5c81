"""The replica's heartbeat row: what it publishes for its peers, and only where peers exist."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

from sqlalchemy import select

from control.fleet.heartbeat import Heartbeat
from control.fleet.models import Replica
from control.process.jobs import BackgroundJobs
from control.timeutil import utcnow
from tests.control.helpers import Harness


def test_the_status_is_published_for_peers_and_skipped_where_the_process_is_the_fleet(
    harness: Harness,
) -> None:
    ctx = harness.ctx
    _wait_for_the_apps_row(harness)
    jobs = BackgroundJobs(ctx)  # not started: only its follower and leadership are read
    beat = Heartbeat(ctx, jobs.follower, jobs.leadership)
    assert beat.beat() >= 1
    row = _row(harness)
    assert row is not None
    if ctx.fleet_schema is None:
        # SQLite: this process is the whole fleet and nobody would merge its status.
        assert row.status is None
    else:
        # The core's text stored as JSON, not as a string of it.
        assert isinstance(row.status, dict)
        assert "pools" in row.status
    # Either way the row says the replica is alive, ready and which version it runs.
    assert row.ready
    assert row.applied_version == harness.bridge.core_version


def test_a_beat_updates_its_own_row_and_counts_the_live_replicas(harness: Harness) -> None:
    ctx = harness.ctx
    jobs = BackgroundJobs(ctx)
    beat = Heartbeat(ctx, jobs.follower, jobs.leadership)
    _wait_for_the_apps_row(harness)
    dead_after = timedelta(milliseconds=ctx.settings.fleet.dead_after_ms)
    with ctx.sessions() as session:
        for name, age in (("peer-live", timedelta(0)), ("peer-dead", 2 * dead_after)):
            session.add(_peer(name, utcnow() - age))
        session.commit()
    first = _row(harness)
    assert first is not None
    time.sleep(0.01)
    # Itself and the live peer; the dead peer is not counted.
    assert beat.beat() == 2
    again = _row(harness)
    assert again is not None
    assert again.heartbeat_at > first.heartbeat_at
    with ctx.sessions() as session:
        mine = session.scalars(select(Replica).where(Replica.id == ctx.replica.id)).all()
        assert len(mine) == 1
        session.query(Replica).filter(Replica.id.like("peer-%")).delete()
        session.commit()
    # Its own row stale (the process paused longer than dead_after): still counted once.
    with ctx.sessions() as session:
        stale = session.get(Replica, ctx.replica.id)
        assert stale is not None
        stale.heartbeat_at = utcnow() - 2 * dead_after
        session.commit()
    assert beat.beat() == 1


def _peer(name: str, heartbeat_at: datetime) -> Replica:
    return Replica(
        id=name,
        name=name,
        data_address="127.0.0.1:1",
        admin_address="127.0.0.1:2",
        package_version="0",
        started_at=heartbeat_at,
        heartbeat_at=heartbeat_at,
        applied_version=None,
        refused_version=None,
        refused_message=None,
        limits_mode="local",
        leader=False,
        ready=True,
        status=None,
    )


def _wait_for_the_apps_row(harness: Harness) -> None:
    """The app's own heartbeat writes the row first (two first beats at once would both insert
    it)."""
    deadline = time.monotonic() + 15
    while _row(harness) is None:
        assert time.monotonic() < deadline, "the app's heartbeat never wrote this replica's row"
        time.sleep(0.05)


def _row(harness: Harness) -> Replica | None:
    ctx = harness.ctx
    with ctx.sessions() as session:
        return session.scalars(select(Replica).where(Replica.id == ctx.replica.id)).one_or_none()
