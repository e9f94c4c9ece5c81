"""The fleet seen through any replica: `GET /v1/admin/status` counts every replica's requests,
`GET /v1/admin/fleet` and `sluicegate fleet` list the replicas, the config version each runs and
their limits' mode, and the doctor reads the fleet's figures."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import httpx

from tests.fleet.conftest import configure
from tests.fleet.harness import ADMIN_TOKEN, Fleet

BODY = {"model": "chat", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}


def test_status_fleet_and_doctor_cover_every_replica(new_fleet: Fleet, sims) -> None:
    f = new_fleet
    sim = sims("--ttft-ms", "1")
    a, b, c = f.add(), f.add(), f.add()
    for replica in (a, b, c):
        f.start(replica)
    key = configure(f, sim)["key"]
    f.wait_in_step()
    headers = {"Authorization": f"Bearer {key}"}
    for replica, n in ((b, 7), (c, 5)):
        for _ in range(n):
            assert (
                httpx.post(
                    replica.data + "/v1/chat/completions", json=BODY, headers=headers
                ).status_code
                == 200
            )
    deadline = time.monotonic() + 5
    with f.admin(a) as api:
        while True:
            status = api.get("/v1/admin/status").json()
            window = status["pools"][0]["windows"]["1m"]
            if window["requests"] == 12:
                break
            assert time.monotonic() < deadline, window
            time.sleep(0.2)
        assert window["total_ms"]["n"] == 12
        assert len(status["replicas"]) == 3
        diagnosis = api.get("/v1/admin/diagnosis")
        assert diagnosis.status_code == 200, diagnosis.text
    done = subprocess.run(
        [sys.executable, "-m", "sluicegate", "fleet", "--json", "--admin-url", a.admin_url],
        capture_output=True,
        text=True,
        env={"SLUICEGATE_ADMIN_TOKEN": ADMIN_TOKEN, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    fleet = json.loads(done.stdout)
    assert fleet["in_step"] and {r["limits_mode"] for r in fleet["replicas"]} == {"shared"}
    assert sum(r["leader"] for r in fleet["replicas"]) == 1
    table = subprocess.run(
        [sys.executable, "-m", "sluicegate", "fleet", "--admin-url", a.admin_url],
        capture_output=True,
        text=True,
        env={"SLUICEGATE_ADMIN_TOKEN": ADMIN_TOKEN, "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert "3 live replicas" in table.stdout and "replica-2" in table.stdout
