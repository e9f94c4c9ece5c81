"""A rolling restart of three replicas behind a load balancer, under streaming load: every
request succeeds. Each replica, on SIGTERM, turns `/readyz` unready while it still serves (the
balancer stops sending it new requests), then drains its streams and exits; the new process takes
traffic once ready."""

from __future__ import annotations

import threading
import time
from collections import Counter

import httpx

from bench.services import HAProxy
from tests.fleet.conftest import configure
from tests.fleet.harness import Fleet

BODY = {
    "model": "chat",
    "stream": True,
    "max_tokens": 20,
    "messages": [{"role": "user", "content": "y" * 40}],
}


def test_a_rolling_restart_under_streaming_load_fails_no_request(
    new_fleet: Fleet, sims, tmp_path
) -> None:
    f = new_fleet
    sim = sims("--ttft-ms", "20", "--itl-ms", "15")
    replicas = [f.add(), f.add(), f.add()]
    for replica in replicas:
        f.start(replica)
    key = configure(f, sim)["key"]
    f.wait_in_step()
    lb = HAProxy(tmp_path, [r.data_port for r in replicas])
    lb.start()
    outcomes: Counter[str] = Counter()
    stop = threading.Event()

    def load() -> None:
        with httpx.Client(timeout=30) as client:
            while not stop.is_set():
                try:
                    with client.stream(
                        "POST",
                        lb.url + "/v1/chat/completions",
                        json=BODY,
                        headers={"Authorization": f"Bearer {key}"},
                    ) as r:
                        body = b"".join(r.iter_bytes())
                    ok = r.status_code == 200 and body.rstrip().endswith(b"data: [DONE]")
                    outcomes["complete" if ok else f"failed {r.status_code}"] += 1
                except httpx.HTTPError as e:
                    outcomes[f"error {type(e).__name__}"] += 1

    try:
        time.sleep(1.5)  # the balancer's checks find every replica ready
        workers = [threading.Thread(target=load, daemon=True) for _ in range(12)]
        for w in workers:
            w.start()
        time.sleep(1)
        for replica in replicas:
            f.stop(replica)  # SIGTERM: unready, serve on, drain, exit
            f.start(replica)
            time.sleep(1.5)  # ready again, and seen so by the balancer
        time.sleep(1)
        stop.set()
        for w in workers:
            w.join(60)
    finally:
        lb.stop()
    print(f"\n{dict(outcomes)}")
    assert outcomes["complete"] > 100
    assert set(outcomes) == {"complete"}, dict(outcomes)
