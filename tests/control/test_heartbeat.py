"""The replica's heartbeat row: what it publishes for its peers, and only where peers exist."""

from __future__ import annotations

import time

from sqlalchemy import select

from control.fleet.heartbeat import Heartbeat
from control.fleet.models import Replica
from control.process.jobs import BackgroundJobs
from tests.control.helpers import Harness


def test_the_status_is_published_for_peers_and_skipped_where_the_process_is_the_fleet(
    harness: Harness,
) -> None:
    ctx = harness.ctx
    # The app's own heartbeat writes the row first (two first beats at once would both insert it).
    deadline = time.monotonic() + 15
    while _row(harness) is None:
        assert time.monotonic() < deadline, "the app's heartbeat never wrote this replica's row"
        time.sleep(0.05)
    jobs = BackgroundJobs(ctx)  # not started: only its follower and leadership are read
    beat = Heartbeat(ctx, jobs.follower, jobs.leadership)
    assert beat.beat() >= 1
    row = _row(harness)
    assert row is not None
    if ctx.fleet_schema is None:
        # SQLite: this process is the whole fleet and nobody would merge its status.
        assert row.status is None
    else:
        assert row.status is not None
        assert "pools" in row.status
    # Either way the row says the replica is alive, ready and which version it runs.
    assert row.ready
    assert row.applied_version == harness.bridge.core_version


def _row(harness: Harness) -> Replica | None:
    ctx = harness.ctx
    with ctx.sessions() as session:
        return session.scalars(select(Replica).where(Replica.id == ctx.replica.id)).one_or_none()
