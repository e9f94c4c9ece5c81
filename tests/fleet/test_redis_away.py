"""Redis stopped for 20 s under load: the replicas keep serving on local shares (no 5xx from the
gateway), say so, go back to shared limits by themselves when Redis returns, and the quota is
not overshot."""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time

import httpx

from tests.fleet.conftest import configure
from tests.fleet.harness import Fleet

# 10 prompt tokens + max_tokens 10: 20 tokens reserved and used per request.
BODY = {"model": "chat", "max_tokens": 10, "messages": [{"role": "user", "content": "x" * 40}]}
QUOTA = 20 * 400


def _modes(f: Fleet) -> set[str]:
    with f.admin() as api:
        return {r["limits_mode"] for r in api.get("/v1/admin/fleet").json()["replicas"]}


def _wait_modes(f: Fleet, want: str, timeout: float) -> float:
    start = time.monotonic()
    while _modes(f) != {want}:
        if time.monotonic() - start > timeout:
            raise AssertionError(f"the replicas did not all go {want}: {_modes(f)}")
        time.sleep(0.1)
    return time.monotonic() - start


def test_redis_away_for_twenty_seconds_under_load(new_fleet: Fleet, sims) -> None:
    f = new_fleet
    sim = sims("--ttft-ms", "60", "--itl-ms", "1")
    replicas = [f.add(), f.add(), f.add()]
    for replica in replicas:
        f.start(replica)
    created = configure(
        f, sim, rpm=60_000, max_concurrency=30, quota={"period": "daily", "tokens": QUOTA}
    )
    key = created["key"]
    f.wait_in_step()
    assert _modes(f) == {"shared"}
    codes: list[int] = []
    transport_errors: list[str] = []
    stop = threading.Event()
    targets = itertools.cycle(replicas)

    def load() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                try:
                    r = client.post(
                        next(targets).data + "/v1/chat/completions",
                        json=BODY,
                        headers={"Authorization": f"Bearer {key}"},
                    )
                    codes.append(r.status_code)
                except httpx.TransportError as e:
                    codes.append(0)
                    transport_errors.append(f"{time.monotonic() - began:.2f} s: {e!r}")
                if codes[-1] == 429:
                    time.sleep(0.05)

    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        workers = [pool.submit(load) for _ in range(6)]
        time.sleep(3)
        print(f"\nRedis stopped at {time.monotonic() - began:.2f} s")
        f.redis.stop()
        went = _wait_modes(f, "fallback", timeout=5)
        time.sleep(20 - went)
        f.redis.start()
        back = _wait_modes(f, "shared", timeout=10)
        time.sleep(3)
        stop.set()
        for w in workers:
            w.result()
    print(
        f"\nfallback after {went:.1f} s, shared again {back:.1f} s after Redis returned; "
        f"{codes.count(200)} served, {codes.count(429)} refused"
    )
    assert codes.count(200) > 0
    assert set(codes) <= {200, 429}, (sorted(set(codes)), transport_errors)
    # The ledger, once every replica drained: never above the quota.
    used = None
    deadline = time.monotonic() + 15
    with f.admin() as api:
        while time.monotonic() < deadline:
            quota = api.get(f"/v1/admin/keys/{created['id']}/quota").json()
            if used == quota["used_tokens"]:
                break
            used = quota["used_tokens"]
            time.sleep(1)
    print(f"ledger: {used} of {QUOTA} tokens")
    assert used is not None and used <= QUOTA
