"""Drills: a pool or a member forced out of the core for a while. Not a config change (no
version, no push), an audit row at each end, admin tokens only, held again after a restart;
through the real data plane, traffic moves to the fallback without a client error and back."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from control.drills.closer import DrillCloser
from control.drills.models import Drill
from control.timeutil import utcnow
from tests.control.helpers import Api, Harness, error_fields
from tests.support.procs import Proc, start_sim

UPSTREAM_SECRET = "sk-upstream-for-the-drill-simulators"


def _topology(admin: Api, addresses: dict[str, str] | None = None) -> None:
    """chat: primary (a, b) then backup (c); solo: backup only."""
    for name in ("a", "b", "c"):
        address = (addresses or {}).get(name, f"127.0.0.1:{9000 + ord(name)}")
        admin.create_provider(
            id=f"sim-{name}", base_url=f"http://{address}/v1", credential=UPSTREAM_SECRET
        )
    admin.create_pool(id="primary", members=[{"provider_id": "sim-a"}, {"provider_id": "sim-b"}])
    admin.create_pool(id="backup", members=[{"provider_id": "sim-c"}])
    admin.create_route(
        alias="chat",
        chain=[{"pool": "primary", "model": "sim-llama"}, {"pool": "backup", "model": "sim-llama"}],
    )
    admin.create_route(alias="solo", chain=[{"pool": "backup", "model": "sim-llama"}])


def _versions(admin: Api) -> tuple[int, int]:
    state = admin.get("/v1/admin/config/version").json()
    return state["committed_version"], state["acknowledged_version"]


def _drilled(harness: Harness) -> tuple[set[str], set[tuple[str, str]]]:
    """Pools and members the core holds out now."""
    families = harness.bridge.metrics_families()
    pools = {
        s["labels"][0] for s in families["sluicegate_pool_drilled"]["samples"] if s["value"] == 1
    }
    members = {
        (s["labels"][0], s["labels"][1])
        for s in families["sluicegate_upstream_state"]["samples"]
        if s["value"] == 4
    }
    return pools, members


def test_drills_are_checked_recorded_and_no_config_change(harness: Harness, admin: Api) -> None:
    _topology(admin)
    for body, fields in [
        ({"pool": "ghost", "seconds": 5}, {"pool"}),
        ({"pool": "primary", "member": "sim-c", "seconds": 5}, {"member"}),
        ({"pool": "primary", "route": "nowhere", "seconds": 5}, {"route"}),
        ({"pool": "primary", "route": "solo", "seconds": 5}, {"route"}),
        ({"pool": "primary", "seconds": 0, "member": "bad id!"}, {"seconds", "member"}),
        ({"pool": "primary", "seconds": 5, "force": True}, {"force"}),
    ]:
        response = admin.post("/v1/admin/drills", body)
        assert response.status_code == 422, (body, response.text)
        assert set(error_fields(response)) == fields, body

    before = _versions(admin)
    drill = admin.post(
        "/v1/admin/drills",
        {"route": "chat", "pool": "primary", "member": "sim-a", "seconds": 60, "reason": "gameday"},
    )
    assert drill.status_code == 201, drill.text
    started = drill.json()
    assert started["state"] == "active" and started["ended_at"] is None
    assert (started["pool"], started["member"], started["route"]) == ("primary", "sim-a", "chat")
    assert started["actor_name"] == "bootstrap" and started["seconds"] == 60
    assert _drilled(harness) == (set(), {("primary", "sim-a")})
    assert _versions(admin) == before  # not a config change: no version, nothing pushed

    again = admin.post("/v1/admin/drills", {"pool": "primary", "member": "sim-a", "seconds": 5})
    assert again.status_code == 409 and started["id"] in again.json()["error"]["message"]
    # backup is the only pool of `solo`: a drill of it is an outage unless asked for.
    dark = admin.post("/v1/admin/drills", {"pool": "backup", "seconds": 5})
    assert dark.status_code == 409 and "solo" in dark.json()["error"]["message"]
    # With sim-a out, sim-b out too would leave chat to backup alone: still a path.
    second = admin.post("/v1/admin/drills", {"pool": "primary", "member": "sim-b", "seconds": 5})
    assert second.status_code == 201
    outage = admin.post("/v1/admin/drills", {"pool": "backup", "seconds": 5, "allow_outage": True})
    assert outage.status_code == 201
    assert _drilled(harness)[0] == {"backup"}

    ended = admin.delete(f"/v1/admin/drills/{started['id']}")
    assert ended.status_code == 200, ended.text
    body = ended.json()
    assert body["state"] == "ended" and body["ended_by"] == "bootstrap"
    assert body["ended_at"] < started["ends_at"]
    assert ("primary", "sim-a") not in _drilled(harness)[1]
    assert admin.delete(f"/v1/admin/drills/{started['id']}").json() == body  # changes nothing
    assert admin.get(f"/v1/admin/drills/{started['id']}").json() == body
    assert admin.delete("/v1/admin/drills/drl_nothing").status_code == 404
    assert _versions(admin) == before

    listed = admin.all_pages("/v1/admin/drills")
    assert [d["id"] for d in listed] == [outage.json()["id"], second.json()["id"], started["id"]]
    active = admin.all_pages("/v1/admin/drills", active="true", pool="primary")
    assert [d["id"] for d in active] == [second.json()["id"]]

    audit = list(reversed(admin.all_pages("/v1/admin/audit", resource_type="drill")))
    assert [(e["action"], e["resource_id"]) for e in audit] == [
        ("drill.start", started["id"]),
        ("drill.start", second.json()["id"]),
        ("drill.start", outage.json()["id"]),
        ("drill.end", started["id"]),
    ]
    assert audit[0]["summary"]["reason"] == "gameday" and audit[3]["summary"]["early"] is True
    assert all(e["config_version"] is None for e in audit)


def test_tenant_tokens_cannot_drill(harness: Harness, admin: Api) -> None:
    _topology(admin)
    admin.create_tenant(id="acme", name="Acme")
    drill = admin.post("/v1/admin/drills", {"pool": "primary", "seconds": 30}).json()
    acme = harness.as_token(admin.create_tenant_token("acme"))
    for method, path, body in [
        ("POST", "/v1/admin/drills", {"pool": "primary", "member": "sim-b", "seconds": 5}),
        ("GET", "/v1/admin/drills", None),
        ("GET", f"/v1/admin/drills/{drill['id']}", None),
        ("GET", f"/v1/admin/drills/{drill['id']}/traffic", None),
        ("DELETE", f"/v1/admin/drills/{drill['id']}", None),
    ]:
        response = acme.request(method, path, json=body)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["error"]["code"] == "forbidden"
    assert admin.get(f"/v1/admin/drills/{drill['id']}").json()["state"] == "active"
    assert _drilled(harness)[0] == {"primary"}


def test_a_restart_holds_unexpired_drills_again(
    harness_factory: Callable[..., Harness], admin: Api
) -> None:
    _topology(admin)
    running = admin.post("/v1/admin/drills", {"pool": "primary", "seconds": 600}).json()
    member = admin.post(
        "/v1/admin/drills", {"pool": "primary", "member": "sim-b", "seconds": 600}
    ).json()
    ended = admin.post(
        "/v1/admin/drills", {"pool": "backup", "seconds": 600, "allow_outage": True}
    ).json()
    admin.delete(f"/v1/admin/drills/{ended['id']}")

    restarted = harness_factory()  # a new core on the same database
    assert _drilled(restarted) == ({"primary"}, {("primary", "sim-b")})
    still = restarted.admin.get(f"/v1/admin/drills/{running['id']}").json()
    assert still["state"] == "active" and still["ends_at"] == running["ends_at"]
    assert restarted.admin.get(f"/v1/admin/drills/{member['id']}").json()["state"] == "active"


def test_drills_end_with_their_target(harness: Harness, admin: Api) -> None:
    _topology(admin)
    admin.create_pool(id="spare", members=[{"provider_id": "sim-c"}])
    spare = admin.post("/v1/admin/drills", {"pool": "spare", "seconds": 600}).json()
    member = admin.post(
        "/v1/admin/drills", {"pool": "primary", "member": "sim-b", "seconds": 600}
    ).json()
    assert admin.delete("/v1/admin/pools/spare").status_code == 204
    assert admin.get(f"/v1/admin/drills/{spare['id']}").json()["state"] == "ended"
    one = admin.patch("/v1/admin/pools/primary", {"members": [{"provider_id": "sim-a"}]})
    assert one.status_code == 200, one.text
    assert admin.get(f"/v1/admin/drills/{member['id']}").json()["state"] == "ended"
    # A member of the same id added back is not drilled.
    admin.patch(
        "/v1/admin/pools/primary",
        {"members": [{"provider_id": "sim-a"}, {"provider_id": "sim-b"}]},
    )
    assert _drilled(harness) == (set(), set())
    ends = admin.get("/v1/admin/audit", action="drill.end").json()["items"]
    assert [(e["resource_id"], e["summary"]["reason"]) for e in ends] == [
        (member["id"], "member removed from the pool"),
        (spare["id"], "pool deleted"),
    ]


def test_a_drill_whose_target_is_gone_is_ended_at_restart(
    harness_factory: Callable[..., Harness], harness: Harness, admin: Api
) -> None:
    _topology(admin)
    admin.create_pool(id="spare", members=[{"provider_id": "sim-c"}])
    drill = admin.post("/v1/admin/drills", {"pool": "spare", "seconds": 600}).json()
    # Removed behind the API's back (a restore from an older backup, a manual fix...).
    with harness.ctx.sessions() as session:
        session.execute(sa.text("DELETE FROM pool_members WHERE pool_id = 'spare'"))
        session.execute(sa.text("DELETE FROM pools WHERE id = 'spare'"))
        session.commit()
    restarted = harness_factory()
    after = restarted.admin.get(f"/v1/admin/drills/{drill['id']}").json()
    assert after["state"] == "ended" and after["ended_at"] is not None
    end = restarted.admin.get("/v1/admin/audit", action="drill.end").json()["items"][0]
    assert end["resource_id"] == drill["id"] and end["actor_role"] == "system"
    assert "no longer exists" in end["summary"]["reason"]


# --- through the data plane --------------------------------------------------------------------


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    tmp = tmp_path_factory.mktemp("drill-sims")
    args = ("--api-key", UPSTREAM_SECRET, "--ttft-ms", "2", "--itl-ms", "1")
    started = {name: start_sim(tmp, *args, name=name) for name in ("a", "b", "c")}
    yield started
    for proc in started.values():
        proc.stop()


@dataclass
class Answer:
    started: float
    status: int
    upstream: str | None
    fallback: bool


class Traffic:
    """One client sending requests back to back on a thread, recording every answer."""

    def __init__(self, url: str, key: str) -> None:
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                response = self._client.post("/v1/chat/completions", json=body)
                status = response.status_code
                upstream = response.headers.get("x-sluicegate-upstream")
                fallback = response.headers.get("x-sluicegate-fallback") == "1"
            except httpx.HTTPError:
                status, upstream, fallback = 0, None, False
            self.answers.append(Answer(started, status, upstream, fallback))

    def __enter__(self) -> Traffic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()

    def wait_for(self, more: int) -> float:
        """Block until `more` answers arrived after now; returns now."""
        now = time.monotonic()
        deadline = now + 10
        while sum(a.started > now for a in self.answers) < more:
            assert time.monotonic() < deadline, "no traffic"
            time.sleep(0.01)
        return now

    def between(self, start: float, end: float) -> list[Answer]:
        return [a for a in self.answers if start < a.started and a.started < end]


@pytest.fixture
def gateway(harness_factory: Callable[..., Harness], sims: dict[str, Proc]) -> tuple[Harness, str]:
    harness = harness_factory(start_core=True)
    admin = harness.admin
    _topology(admin, {name: sim.address for name, sim in sims.items()})
    admin.create_tenant(id="acme", name="Acme")
    key: str = admin.create_key(tenant_id="acme")["key"]
    return harness, key


def _counts(traffic: dict[str, Any]) -> dict[str, int]:
    return {
        f"{u['pool']}/{u['upstream']}": sum(u["requests"].values()) for u in traffic["upstreams"]
    }


def test_a_pool_drill_moves_traffic_to_the_fallback_and_back(
    gateway: tuple[Harness, str],
) -> None:
    harness, key = gateway
    admin = harness.admin
    with Traffic(harness.data_url, key) as traffic:
        traffic.wait_for(10)
        drill = admin.post("/v1/admin/drills", {"route": "chat", "pool": "primary", "seconds": 60})
        assert drill.status_code == 201, drill.text
        drilled_at = traffic.wait_for(20)
        during = admin.get(f"/v1/admin/drills/{drill.json()['id']}/traffic").json()
        ending = time.monotonic()
        ended = admin.delete(f"/v1/admin/drills/{drill.json()['id']}")
        assert ended.status_code == 200
        restored_at = traffic.wait_for(20)
    answers = traffic.answers
    assert answers and all(a.status == 200 for a in answers), "a client saw an error"
    moved = traffic.between(drilled_at, ending)
    assert len(moved) >= 20 and {a.upstream for a in moved} == {"backup/sim-c"}
    assert all(a.fallback for a in moved)
    back = traffic.between(restored_at, float("inf"))
    assert len(back) >= 20 and {a.upstream for a in back} <= {"primary/sim-a", "primary/sim-b"}

    assert {u["state"] for u in during["upstreams"] if u["pool"] == "primary"} == {"drilled"}
    counts = _counts(during)
    assert set(counts) == {"primary/sim-a", "primary/sim-b", "backup/sim-c"}
    assert counts["backup/sim-c"] >= 20 and sum(counts.values()) <= len(answers)
    assert during["drill"]["state"] == "active"


def test_a_member_drill_keeps_its_pool_serving(gateway: tuple[Harness, str]) -> None:
    harness, key = gateway
    admin = harness.admin
    with Traffic(harness.data_url, key) as traffic:
        traffic.wait_for(5)
        body = {"route": "chat", "pool": "primary", "member": "sim-a", "seconds": 60}
        drill = admin.post("/v1/admin/drills", body).json()
        drilled_at = traffic.wait_for(20)
        during = admin.get(f"/v1/admin/drills/{drill['id']}/traffic").json()
        ending = time.monotonic()
        admin.delete(f"/v1/admin/drills/{drill['id']}")
    assert all(a.status == 200 for a in traffic.answers)
    moved = traffic.between(drilled_at, ending)
    assert len(moved) >= 20 and {a.upstream for a in moved} == {"primary/sim-b"}
    states = {f"{u['pool']}/{u['upstream']}": u["state"] for u in during["upstreams"]}
    assert states == {
        "primary/sim-a": "drilled",
        "primary/sim-b": "ready",
        "backup/sim-c": "ready",
    }
    after = admin.get(f"/v1/admin/drills/{drill['id']}/traffic").json()
    assert {u["state"] for u in after["upstreams"]} == {"ready"}


def test_drills_that_ran_their_course_are_recorded_as_ended(harness: Harness, admin: Api) -> None:
    _topology(admin)
    first = admin.post("/v1/admin/drills", {"pool": "primary", "seconds": 30}).json()
    later = admin.post(
        "/v1/admin/drills", {"pool": "primary", "member": "sim-a", "seconds": 45}
    ).json()
    closer = DrillCloser(harness.ctx)
    assert 28 < closer.close_due() <= 30.2  # it sleeps until the first end
    assert admin.get("/v1/admin/audit", action="drill.end").json()["items"] == []
    # Time passes (the database is told so): the first drill's end is due.
    with harness.ctx.sessions() as session:
        drill = session.get(Drill, first["id"])
        assert drill is not None
        drill.ends_at = utcnow() - timedelta(seconds=1)
        session.commit()
    assert 43 < closer.close_due() <= 45.2  # recorded; next: the other drill's end
    ended = admin.get(f"/v1/admin/drills/{first['id']}").json()
    assert ended["state"] == "ended" and ended["ended_by"] is None
    closer.close_due()  # recorded once
    ends = admin.get("/v1/admin/audit", action="drill.end").json()["items"]
    assert [(e["resource_id"], e["actor_role"], e["summary"]["early"]) for e in ends] == [
        (first["id"], "system", False)
    ]
    # Ending it again through the API changes nothing; the other drill still runs.
    assert admin.delete(f"/v1/admin/drills/{first['id']}").json() == ended
    assert admin.get(f"/v1/admin/drills/{later['id']}").json()["state"] == "active"
