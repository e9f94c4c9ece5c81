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

    def served_by(replica: object, upstream: str) -> bool:
        r = httpx.post(replica.data + "/v1/chat/completions", json=BODY, headers=headers)  # type: ignore[attr-defined]
        return r.status_code == 200 and r.headers.get("x-sluicegate-upstream") == upstream

    with f.admin(a) as api:
        r = api.post(
            "/v1/admin/providers",
            json={"id": "sim2", "kind": "openai", "base_url": f"{second.url}/v1"},
        )
        assert r.status_code == 201, r.text
        r = api.patch("/v1/admin/pools/sims", json={"members": [{"provider_id": "sim2"}]})
        assert r.status_code == 200, r.text
        changed_at = time.monotonic()
    for replica in (b, c):
        _until(lambda r=replica: served_by(r, "sims/sim2"), timeout=5)
        assert time.monotonic() - changed_at < 1.0

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
    changed_at = time.monotonic()

    def runs_it(replica: object) -> bool:
        with f.admin(replica) as api:  # type: ignore[arg-type]
            return bool(
                (api.get("/v1/admin/config/version").json()["acknowledged_version"] or 0) >= target
            )

    for replica in (b, c):
        _until(lambda r=replica: runs_it(r), timeout=5)
    assert time.monotonic() - changed_at < 1.0
