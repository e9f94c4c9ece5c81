"""What `serve`'s periodic control-plane work costs the proxy's CPU: the heartbeat (its replica
row and the count of the live ones, every `fleet.heartbeat_ms`) and the fleet's follower (the
committed config version and the drills, as often; PostgreSQL only). Both run once a second in
every replica, on the CPU the request path uses, and a thread that holds that CPU delays a woken
request-path worker (`bench/README.md`, the c=1 tail).

The app runs in this process with its real core, on SQLite and on PostgreSQL, with a pool, a
route and a key, after some traffic through its data plane to an instant nginx upstream (so the
status the heartbeat publishes has figures in it). Each job is then called `--calls` times; the
figure is the calling thread's own CPU time (`time.thread_time`) per call, and the wall time.

    python -m bench.background [--calls 200]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet
from fastapi.testclient import TestClient
from sluicegate._core import Core

from bench import postgres
from bench.nginx import start_instant_upstream
from bench.procs import write_results
from bench.services import free_port
from bench.standard_client import BODY, wait_port
from control.api.app import create_app
from control.bridge.core_bridge import CoreBridge
from control.fleet.heartbeat import Heartbeat
from control.process.jobs import BackgroundJobs
from control.process.settings import load_settings

ADMIN_TOKEN = "bench-background-admin-token-0123"
MODEL = "bench-model"
WARM_REQUESTS = 300


def _configure(client: TestClient, upstream: str) -> str:
    """A provider, a pool, a route and a key; returns the key."""
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = client.post(path, json=body, headers=headers)
        if response.status_code >= 300:
            raise RuntimeError(f"{path}: {response.status_code} {response.text}")
        created: dict[str, Any] = response.json()
        return created

    post("/v1/admin/tenants", {"id": "bench", "name": "Bench"})
    post("/v1/admin/providers", {"id": "up", "kind": "openai", "base_url": f"http://{upstream}/v1"})
    post("/v1/admin/pools", {"id": "pool", "members": [{"provider_id": "up"}]})
    post("/v1/admin/routes", {"alias": MODEL, "chain": [{"pool": "pool", "model": "sim-model"}]})
    return str(post("/v1/admin/keys", {"tenant_id": "bench", "name": "bench"})["key"])


def _per_call(job: Callable[[], object], calls: int) -> dict[str, float]:
    for _ in range(5):
        job()
    cpu, wall = time.thread_time(), time.perf_counter()
    for _ in range(calls):
        job()
    return {
        "cpu_ms": round((time.thread_time() - cpu) * 1000 / calls, 3),
        "wall_ms": round((time.perf_counter() - wall) * 1000 / calls, 3),
    }


def measure(database_url: str, upstream: str, calls: int) -> dict[str, dict[str, float]]:
    values = {
        "SLUICEGATE_DATABASE_URL": database_url,
        "SLUICEGATE_ADMIN_TOKEN": ADMIN_TOKEN,
        "SLUICEGATE_KEY_PEPPER": "bench-background-pepper-0123456789",
        "SLUICEGATE_ENCRYPTION_KEY": Fernet.generate_key().decode(),
        "SLUICEGATE_DATA_LISTEN": "127.0.0.1:0",
        "SLUICEGATE_ADMIN_LISTEN": f"127.0.0.1:{free_port()}",
    }
    bridge = CoreBridge(Core(workers=1))
    bridge.start("127.0.0.1:0")
    try:
        with TestClient(create_app(load_settings(None, values), bridge)) as client:
            key = _configure(client, upstream)
            with httpx.Client(base_url=f"http://{bridge.address}", timeout=10) as data:
                for _ in range(WARM_REQUESTS):
                    answer = data.post(
                        "/v1/chat/completions",
                        content=BODY.replace("sim-model", MODEL),
                        headers={"Authorization": f"Bearer {key}"},
                    )
                    answer.raise_for_status()
            ctx = client.app.state.ctx  # type: ignore[attr-defined]
            # The app's own heartbeat writes the row first (two first beats would both insert).
            time.sleep(2 * ctx.settings.fleet.heartbeat_ms / 1000)
            jobs = BackgroundJobs(ctx)  # not started: its follower and leadership are read
            beat = Heartbeat(ctx, jobs.follower, jobs.leadership)
            out = {"heartbeat": _per_call(beat.beat, calls)}
            if ctx.fleet_schema is not None:
                out["follower"] = _per_call(jobs.follower.sync, calls)
            return out
    finally:
        bridge.stop(0)


def run(calls: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sluicegate-bench-background-") as tmp:
        workdir = Path(tmp)
        port = free_port()
        upstream_proc = start_instant_upstream(workdir, port, None)
        upstream = f"127.0.0.1:{port}"
        try:
            wait_port(upstream)
            data: dict[str, Any] = {"calls": calls, "databases": {}}
            data["databases"]["sqlite"] = measure(
                f"sqlite:///{workdir}/control.db", upstream, calls
            )
            pg_url = postgres.fresh_database("sluicegate_bench_background")
            if pg_url:
                data["databases"]["postgresql"] = measure(pg_url, upstream, calls)
            return data
        finally:
            upstream_proc.stop()


def markdown(data: dict[str, Any]) -> str:
    lines = [
        f"# The control plane's periodic work ({data['calls']} calls each, per call)",
        "",
        "| database | job | CPU ms (its thread) | wall ms |",
        "|---|---|---:|---:|",
    ]
    for database, jobs in data["databases"].items():
        for job, figures in jobs.items():
            lines.append(f"| {database} | {job} | {figures['cpu_ms']} | {figures['wall_ms']} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    data = run(parser.parse_args().calls)
    write_results("background", data, markdown(data))


if __name__ == "__main__":
    main()
