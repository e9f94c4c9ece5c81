"""Replicas killed with SIGKILL and started again under streaming load: each replays its own
journal into the shared ledger, which then equals the simulator's record, nothing lost or
doubled (the billing policy of ARCHITECTURE.md for requests a replica died in)."""

from __future__ import annotations

import itertools
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from tests.e2e.ledger import BODY, compare, ledger
from tests.fleet.conftest import configure
from tests.fleet.harness import Fleet, Replica
from tests.support.jsonl import whole_lines


def _stream(client: httpx.Client, replica: Replica, key: str, outcomes: Counter[str]) -> None:
    try:
        with client.stream(
            "POST",
            replica.data + "/v1/chat/completions",
            json=BODY,
            headers={"Authorization": f"Bearer {key}"},
        ) as response:
            body = b"".join(response.iter_bytes())
        outcomes[
            "complete"
            if response.status_code == 200 and body.rstrip().endswith(b"[DONE]")
            else f"other {response.status_code}"
        ] += 1
    except httpx.HTTPError:
        outcomes["cut"] += 1
        time.sleep(0.02)


def test_killed_replicas_bill_every_request_once(new_fleet: Fleet, sims, tmp_path: Path) -> None:
    f = new_fleet
    sim = sims("--ttft-ms", "20", "--itl-ms", "10")
    replicas = [f.add(), f.add(), f.add()]
    for replica in replicas:
        f.start(replica)
    key = configure(f, sim)["key"]
    f.wait_in_step()
    outcomes: Counter[str] = Counter()
    stop = threading.Event()
    cycle = itertools.cycle(replicas)

    def load() -> None:
        with httpx.Client(timeout=httpx.Timeout(10, connect=1)) as client:
            while not stop.is_set():
                replica = next(cycle)
                if replica.proc is None:
                    continue
                _stream(client, replica, key, outcomes)

    workers = [threading.Thread(target=load, daemon=True) for _ in range(9)]
    for w in workers:
        w.start()
    for round_ in range(3):
        time.sleep(1.5)
        victim = replicas[round_ % 3]
        f.stop(victim, signal.SIGKILL)
        time.sleep(0.5)
        f.start(victim)
    time.sleep(1.5)
    stop.set()
    for w in workers:
        w.join(30)
    for replica in replicas:
        f.stop(replica)  # SIGTERM: drain, write the rest of each journal
    time.sleep(0.5)
    counts = compare(ledger(f.database_url), whole_lines(tmp_path / "sim0.jsonl"))
    print(f"\nload: {dict(outcomes)}; ledger: {counts}")
    assert counts.get("complete", 0) > 50
