"""What is committed through one replica is in force on the others within a second: key
revocations (p99 over 50 trials), pool and price changes."""

from __future__ import annotations

import time

import httpx

from tests.fleet.conftest import configure
from tests.fleet.harness import Fleet

BODY = {"model": "chat", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}


def _until(check: object, timeout: float = 5.0) -> float:
    """Seconds until `check()` is true (AssertionError past `timeout`)."""
    start = time.monotonic()
    while not check():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise AssertionError("not in force in time")
        time.sleep(0.005)
    return time.monotonic() - start


def _all_until(checks: list, timeout: float = 5.0) -> float:  # type: ignore[type-arg]
    """Seconds until every check is true, polled together (so that a slow answer from one
    replica does not count against the next), each counted from its first true answer."""
    start = time.monotonic()
    pending = list(checks)
    latest = 0.0
    while pending:
        for check in list(pending):
            if check():
                latest = time.monotonic() - start
                pending.remove(check)
        if pending and time.monotonic() - start > timeout:
            raise AssertionError("not in force in time")
        time.sleep(0.005)
    return latest


def _status(url: str, key: str) -> int:
    r = httpx.post(
        url + "/v1/chat/completions", json=BODY, headers={"Authorization": f"Bearer {key}"}
    )
    return r.status_code


def test_a_key_revoked_through_one_replica_is_refused_by_the_others_within_a_second(
    new_fleet: Fleet, sims
) -> None:
    f = new_fleet
    sim = sims("--ttft-ms", "1", "--itl-ms", "0")
    a, b, c = f.add(), f.add(), f.add()
    for replica in (a, b, c):
        f.start(replica)
    configure(f, sim)
    f.wait_in_step()
    delays: list[float] = []
    with f.admin(a) as api:
        for _ in range(50):
            created = api.post("/v1/admin/keys", json={"tenant_id": "acme"}).json()
            secret = created["key"]
            for replica in (b, c):
                _until(lambda r=replica, s=secret: _status(r.data, s) == 200)
            assert api.post(f"/v1/admin/keys/{created['id']}/revoke").status_code == 200
            revoked_at = time.monotonic()
            for replica in (b, c):
                _until(lambda r=replica, s=secret: _status(r.data, s) == 401)
                delays.append(time.monotonic() - revoked_at)
    delays.sort()
    p50, p99 = delays[len(delays) // 2], delays[int(len(delays) * 0.99) - 1]
    print(f"\nrevocation in force elsewhere: p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms")
    assert p99 < 1.0


def test_pool_and_price_changes_are_in_force_everywhere_within_a_second(
    new_fleet: Fleet, sims
) -> None:
    f = new_fleet
    first, second = sims("--ttft-ms", "1"), sims("--ttft-ms", "1")
    a, b, c = f.add(), f.add(), f.add()
    for replica in (a, b, c):
        f.start(replica)
    key = configure(f, first)["key"]
    f.wait_in_step()
    headers = {"Authorization": f"Bearer {key}"}

    clients = {r.index: httpx.Client(base_url=r.data, headers=headers) for r in (b, c)}

    def served_by(replica: object, upstream: str) -> bool:
        r = clients[replica.index].post("/v1/chat/completions", json=BODY)  # type: ignore[attr-defined]
        return r.status_code == 200 and r.headers.get("x-sluicegate-upstream") == upstream

    for replica in (b, c):
        assert served_by(replica, "sims/sim")

    with f.admin(a) as api:
        r = api.post(
            "/v1/admin/providers",
            json={"id": "sim2", "kind": "openai", "base_url": f"{second.url}/v1"},
        )
        assert r.status_code == 201, r.text
        r = api.patch("/v1/admin/pools/sims", json={"members": [{"provider_id": "sim2"}]})
        assert r.status_code == 200, r.text
    took = _all_until([lambda r=replica: served_by(r, "sims/sim2") for replica in (b, c)])
    print(f"\npool change in force on both other replicas after {took:.3f} s")
    assert took < 1.0

    # Warm admin connections: a replica's first admin request opens its database pool, which
    # is not what the change's propagation costs.
    admins = {r.index: f.admin(r) for r in (b, c)}
    for api in admins.values():
        assert api.get("/v1/admin/config/version").status_code == 200
    with f.admin(a) as api:
        r = api.post(
            "/v1/admin/prices",
            json={
                "model": "chat",
                "input_micros_per_mtok": 1_000_000,
                "output_micros_per_mtok": 2_000_000,
            },
        )
        assert r.status_code == 201, r.text
        target = api.get("/v1/admin/config/version").json()["committed_version"]

    def runs_it(replica: object) -> bool:
        version = admins[replica.index].get("/v1/admin/config/version").json()  # type: ignore[attr-defined]
        return bool((version["acknowledged_version"] or 0) >= target)

    took = _all_until([lambda r=replica: runs_it(r) for replica in (b, c)])
    print(f"price change in force on both other replicas after {took:.3f} s")
    assert took < 1.0
    for client in [*clients.values(), *admins.values()]:
        client.close()
