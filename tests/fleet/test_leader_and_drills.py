"""Jobs that run once for the fleet move to another replica when their leader dies; drills
started through any replica move every replica's traffic, and end everywhere."""

from __future__ import annotations

import signal
import time

import httpx

from tests.fleet.conftest import configure
from tests.fleet.harness import Fleet

BODY = {"model": "chat", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}


def _fleet(f: Fleet) -> dict:  # type: ignore[type-arg]
    with f.admin() as api:
        return dict(api.get("/v1/admin/fleet").json())


def _two_pools(f: Fleet, sims) -> str:  # type: ignore[no-untyped-def]
    """Route `chat` on pool `sims`, falling back to pool `spare`."""
    main, spare = sims("--ttft-ms", "1"), sims("--ttft-ms", "1")
    key = configure(f, main)["key"]
    with f.admin() as api:
        assert (
            api.post(
                "/v1/admin/providers",
                json={"id": "spare", "kind": "openai", "base_url": f"{spare.url}/v1"},
            ).status_code
            == 201
        )
        assert (
            api.post(
                "/v1/admin/pools", json={"id": "spare", "members": [{"provider_id": "spare"}]}
            ).status_code
            == 201
        )
        r = api.patch(
            "/v1/admin/routes/chat",
            json={"chain": [{"pool": "sims", "model": "m"}, {"pool": "spare", "model": "m"}]},
        )
        assert r.status_code == 200, r.text
    return str(key)


def _served_by(url: str, key: str) -> str | None:
    r = httpx.post(
        url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"}
    )
    return r.headers.get("x-sluicegate-upstream") if r.status_code == 200 else None


def test_the_jobs_move_to_another_replica_when_their_leader_dies(new_fleet: Fleet, sims) -> None:
    f = new_fleet
    replicas = [f.add(), f.add(), f.add()]
    for replica in replicas:
        f.start(replica)
    _two_pools(f, sims)
    f.wait_in_step()
    deadline = time.monotonic() + 10
    while (leader := _fleet(f)["leader"]) is None:
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.1)
    leading = next(
        r
        for r in f.replicas
        if r.proc is not None
        and _fleet(f)["replicas"]
        and any(
            x["id"] == leader and x["name"] == f"replica-{r.index}" for x in _fleet(f)["replicas"]
        )
    )
    survivor = next(r for r in replicas if r is not leading)
    # A drill the leader's closer would record the end of: it must end with a leader gone.
    with f.admin(survivor) as api:
        drill = api.post("/v1/admin/drills", json={"pool": "sims", "seconds": 2}).json()
    f.stop(leading, signal.SIGKILL)
    killed_at = time.monotonic()
    while True:
        with f.admin(survivor) as api:
            fleet = api.get("/v1/admin/fleet").json()
        if fleet["leader"] not in (None, leader):
            break
        assert time.monotonic() - killed_at < 10, f"no new leader: {fleet}"
        time.sleep(0.1)
    took = time.monotonic() - killed_at
    print(f"\nanother replica leads {took:.1f} s after the leader was killed")
    # The new leader's drill closer records the end of the drill that ran its course.
    while True:
        with f.admin(survivor) as api:
            ended = api.get(f"/v1/admin/drills/{drill['id']}").json()
        if ended.get("ended_at") and ended.get("ended_by") is None:
            break
        assert time.monotonic() - killed_at < 10, ended
        time.sleep(0.2)


def test_a_drill_started_through_one_replica_moves_every_replicas_traffic(
    new_fleet: Fleet, sims
) -> None:
    f = new_fleet
    a, b, c = f.add(), f.add(), f.add()
    for replica in (a, b, c):
        f.start(replica)
    key = _two_pools(f, sims)
    f.wait_in_step()
    for replica in (a, b, c):
        assert _served_by(replica.data, key) == "sims/sim"
    with f.admin(a) as api:
        drill = api.post(
            "/v1/admin/drills", json={"pool": "sims", "route": "chat", "seconds": 60}
        ).json()
    started = time.monotonic()
    for replica in (b, c):
        while _served_by(replica.data, key) != "spare/spare":
            assert time.monotonic() - started < 2, "the drill did not reach every replica"
            time.sleep(0.02)
    with f.admin(b) as api:
        assert api.delete(f"/v1/admin/drills/{drill['id']}").status_code == 200
    ended = time.monotonic()
    for replica in (a, c):
        while _served_by(replica.data, key) != "sims/sim":
            assert time.monotonic() - ended < 2, "the drill did not end everywhere"
            time.sleep(0.02)
