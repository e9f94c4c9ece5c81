"""A fleet on loopback: `sluicegate serve` replicas on one PostgreSQL schema of their own and one
Redis (a private `redis-server`, so a test may stop it), with simulators behind them."""

from __future__ import annotations

import os
import shutil
import signal
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.services import Redis, free_port
from tests.e2e.helpers import ENCRYPTION_KEY, PEPPER
from tests.support.pg import PG_URL, create_schema, drop_schema, with_search_path
from tests.support.procs import Proc, start_cli

ADMIN_TOKEN = "sgt_fleet-test-admin-token-0123456789"
ADMIN_LINE = "(admin http://"


@dataclass
class Replica:
    index: int
    data_port: int
    config: Path
    proc: Proc | None = None
    admin: str = ""

    @property
    def data(self) -> str:
        return f"http://127.0.0.1:{self.data_port}"

    @property
    def admin_url(self) -> str:
        return f"http://{self.admin}"


@dataclass
class Fleet:
    workdir: Path
    database_url: str
    redis: Redis
    replicas: list[Replica] = field(default_factory=list)
    prefix: str = field(default_factory=lambda: "sgtest-" + uuid.uuid4().hex[:8])

    def config_text(self, i: int, data_port: int, extra: str) -> str:
        return f"""
[server]
data_listen = "127.0.0.1:{data_port}"
admin_listen = "127.0.0.1:0"
shutdown_grace_seconds = 10
unready_seconds = 0.8

[database]
url = "{self.database_url}"

[secrets]
key_pepper = "{PEPPER}"
encryption_key = "{ENCRYPTION_KEY}"
admin_token = "{ADMIN_TOKEN}"

[core]
workers = 1
max_connections_per_client = 0
expose_upstream = true

[usage]
journal_dir = "{self.workdir}/journal-{i}"
drain_timeout_ms = 50
drain_linger_ms = 20

[redis]
url = "{self.redis.url}"
key_prefix = "{self.prefix}"
# A loaded two-core CI machine answers a script in more than the 50 ms default at times, and a
# replica then (rightly) falls back to its outage share: the shared-limit tests would see the
# fallback instead of the shared count. Redis-away tests stop the server (refused at once).
timeout_ms = 500

[fleet]
name = "replica-{i}"
heartbeat_ms = 200
dead_after_ms = 2000
{extra}"""

    def add(self, extra: str = "") -> Replica:
        i = len(self.replicas)
        port = free_port()
        config = self.workdir / f"replica-{i}.toml"
        config.write_text(self.config_text(i, port, extra))
        replica = Replica(i, port, config)
        self.replicas.append(replica)
        return replica

    def start(self, replica: Replica) -> None:
        log = self.workdir / f"replica-{replica.index}-{time.monotonic_ns()}.log"
        proc = start_cli(["serve", "--config", str(replica.config)], log, timeout=90)
        text = log.read_text()
        start = text.index(ADMIN_LINE) + len(ADMIN_LINE)
        replica.admin = text[start : text.index(")", start)]
        replica.proc = proc

    def stop(self, replica: Replica, sig: int = signal.SIGTERM) -> None:
        if replica.proc is not None:
            if sig == signal.SIGKILL:
                replica.proc.kill()
            else:
                replica.proc.stop(sig, timeout=60)
            replica.proc = None

    def admin(self, replica: Replica | None = None) -> httpx.Client:
        target = replica or next(r for r in self.replicas if r.proc is not None)
        return httpx.Client(
            base_url=target.admin_url,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )

    def wait_in_step(self, timeout: float = 15) -> dict[str, Any]:
        """Until every started replica runs the committed version and says so."""
        deadline = time.monotonic() + timeout
        running = {r.index for r in self.replicas if r.proc is not None}
        while True:
            with self.admin() as api:
                fleet = api.get("/v1/admin/fleet").json()
            names = {r["name"] for r in fleet["replicas"]}
            if fleet["in_step"] and names >= {f"replica-{i}" for i in running}:
                return dict(fleet)
            if time.monotonic() > deadline:
                raise AssertionError(f"the fleet is not in step: {fleet}")
            time.sleep(0.1)


def ensure_services() -> str | None:
    """Why the fleet tests cannot run here, or None."""
    from tests.support.pg import pg_problem

    problem = pg_problem()
    if problem:
        return problem
    if not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server")):
        return "redis-server is not installed"
    if not (shutil.which("haproxy") or os.path.exists("/usr/sbin/haproxy")):
        return "haproxy is not installed (make test installs it from Debian)"
    return None


@contextmanager
def fleet(workdir: Path) -> Iterator[Fleet]:
    schema = "fleet_" + uuid.uuid4().hex[:10]
    create_schema(PG_URL, schema)
    redis = Redis(workdir)
    redis.start()
    f = Fleet(workdir, with_search_path(PG_URL, schema), redis)
    try:
        yield f
    finally:
        for replica in f.replicas:
            if replica.proc is not None:
                replica.proc.kill()
        redis.stop()
        drop_schema(PG_URL, schema)
