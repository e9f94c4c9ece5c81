"""Replicas started at the same moment on a new database (as a shell loop starts them) all come
up: they take turns at the first writes of their start, so none fails on a row another one
inserted a moment earlier, and the fleet holds one of each."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.fleet.harness import Fleet


def test_replicas_started_together_on_a_new_database_all_come_up(new_fleet: Fleet) -> None:
    replicas = [new_fleet.add() for _ in range(3)]
    with ThreadPoolExecutor(len(replicas)) as starting:
        # Each start raises if its replica exits before it listens.
        list(starting.map(new_fleet.start, replicas))
    fleet = new_fleet.wait_in_step(timeout=30)
    assert sorted(r["name"] for r in fleet["replicas"]) == ["replica-0", "replica-1", "replica-2"]
    for replica in replicas:
        with new_fleet.admin(replica) as api:
            tokens = api.get("/v1/admin/tokens")
            assert tokens.status_code == 200, tokens.text
            rows = tokens.json()["items"]
            live = [t for t in rows if t["name"] == "bootstrap" and t.get("revoked_at") is None]
            assert len(live) == 1, rows
