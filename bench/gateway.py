"""sluicegate serve as the benchmarks run it: everything on (auth, limits, usage accounting into
SQLite, metrics), one core worker pinned to one CPU, bootstrapped over the admin API."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography.fernet import Fernet

from bench.procs import Proc, sluicegate, start, wait_for_line
from bench.services import free_port

ADMIN_TOKEN = "bench-admin-token-0123456789"
MODEL = "bench-model"
# The simulator's per-request controls (`x-sim-ttft-ms`, ...): client headers the gateway passes
# only to providers that name them.
SIM_HEADERS = ["x-sim-ttft-ms", "x-sim-itl-ms", "x-sim-output-tokens", "x-sim-fault"]


@dataclass
class Gateway:
    proc: Proc
    url: str
    admin: str
    key: str

    def metric(self, name: str) -> float | None:
        """A counter or gauge from the admin API's /metrics, summed over its labels (None
        without an admin API or without the metric)."""
        if not self.admin:
            return None
        text = httpx.get(self.admin + "/metrics", timeout=30).text
        values = [
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith(name + " ") or line.startswith(name + "{")
        ]
        return sum(values) if values else None

    def admin_get(self, path: str, **params: Any) -> Any:
        r = httpx.get(
            self.admin + path,
            params=params,
            headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
            timeout=30,
        )
        r.raise_for_status()
        return r.json()


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(v)


def config(
    workdir: Path,
    sim: str,
    pool: dict[str, Any],
    workers: int,
    database_url: str | None,
    extra: str = "",
) -> str:
    """The bench's `sluicegate.toml`; `extra`: more tables (a fleet's `[redis]` and `[fleet]`)."""
    data, admin = free_port(), free_port()
    tables: list[tuple[str, dict[str, Any]]] = [
        ("tenants", {"id": "bench", "name": "Bench"}),
        (
            "providers",
            {
                "id": "sim",
                "kind": "openai",
                "base_url": f"http://{sim}/v1",
                "forward_headers": SIM_HEADERS,
            },
        ),
        ("pools", {"id": "pool", **pool}),
        ("routes", {"alias": MODEL, "chain": [{"pool": "pool", "model": "sim-model"}]}),
    ]
    lines = [
        "[server]",
        f'data_listen = "127.0.0.1:{data}"',
        f'admin_listen = "127.0.0.1:{admin}"',
        "shutdown_grace_seconds = 5",
        'log_level = "warning"',
        "[database]",
        f'url = "{database_url or f"sqlite:///{workdir}/bench.db"}"',
        "[usage]",
        f'journal_dir = "{workdir}/journal"',
        "[core]",
        f"workers = {workers}",
        "max_connections = 20000",
        # The load generator's thousands of connections all come from one address.
        "max_connections_per_client = 0",
    ]
    for table, fields in tables:
        lines.append(f"[[bootstrap.{table}]]")
        lines.extend(f"{k} = {toml_value(v)}" for k, v in fields.items())
    return "\n".join(lines) + "\n" + extra


def start_gateway(
    workdir: Path,
    sim: str,
    cpu: int | None,
    pool: dict[str, Any] | None = None,
    workers: int = 1,
    database_url: str | None = None,
    extra: str = "",
    name: str | None = None,
    env: dict[str, str] | None = None,
) -> Gateway:
    """`serve` on SQLite in `workdir`, or on `database_url` (PostgreSQL, with its secrets);
    `extra`: more tables (the TLS phase's `[tls]`, the tracing phase's `[tracing]`); `env`: more
    environment (settings a phase varies); `name`: the process's name in the bench's output."""
    pool = pool or {"members": [{"provider_id": "sim"}]}
    conf = config(workdir, sim, pool, workers, database_url, extra)
    serve = serve_env(Fernet.generate_key().decode() if database_url else None) | (env or {})
    name = name or ("gateway-pg" if database_url else "gateway")
    proc, url, admin = start_serve(workdir, name, conf, cpu, serve)
    try:
        key = create_key(admin)
    except BaseException:
        proc.stop()
        raise
    return Gateway(proc, url, admin, key)


def serve_env(encryption_key: str | None) -> dict[str, str]:
    """The admin token, and on PostgreSQL the secrets every replica of a fleet must share."""
    env = {
        "SLUICEGATE_ADMIN_TOKEN": ADMIN_TOKEN,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    }
    if encryption_key:
        env["SLUICEGATE_KEY_PEPPER"] = "bench-pepper-0123456789abcdef"
        env["SLUICEGATE_ENCRYPTION_KEY"] = encryption_key
    return env


def start_serve(
    workdir: Path, name: str, conf: str, cpu: int | None, env: dict[str, str]
) -> tuple[Proc, str, str]:
    """`serve` with the config text `conf`; its process, data URL and admin URL once it listens."""
    path = workdir / "sluicegate.toml"
    path.write_text(conf)
    proc = start(
        name, sluicegate("serve", "--config", str(path)), workdir, cpu, env={**os.environ, **env}
    )
    try:
        match = wait_for_line(proc, r"listening on (https?://\S+) \(admin (https?://\S+)\)")
    except BaseException:
        proc.stop()
        raise
    return proc, match.group(1), match.group(2)


def create_key(admin: str, **limits: Any) -> str:
    """A key of the bench tenant, with `limits` (rpm, tpm, max_concurrency, quota)."""
    created = httpx.post(
        admin + "/v1/admin/keys",
        json={"tenant_id": "bench", "name": "bench", **limits},
        headers={"Authorization": f"Bearer {ADMIN_TOKEN}"},
        timeout=30,
    )
    created.raise_for_status()
    return str(created.json()["key"])


def start_bare_core(
    workdir: Path, sim: str, cpu: int | None, journal: bool = False, checkout: Path | None = None
) -> Gateway:
    """The data plane alone (`bench/bare_core.py`): the "usage off" baseline; with `journal`,
    the data plane journaling its usage events, undrained. With `checkout`, that checkout's data
    plane (its own `.venv`, built there) instead of this one's."""
    root = checkout.resolve() if checkout else Path(__file__).resolve().parents[1]
    python = str(root / ".venv" / "bin" / "python") if checkout else sys.executable
    env = {"PYTHONPATH": str(root)}
    name = "bare-core-journal" if journal else "bare-core"
    if checkout:
        name += "-" + root.name
    # Each data plane its own journal: one side's segments are no other's replay.
    extra = [str(workdir / "journals" / name)] if journal else []
    proc = start(
        name,
        [python, "-m", "bench.bare_core", sim, *extra],
        workdir,
        cpu,
        env={**os.environ, **env},
    )
    try:
        match = wait_for_line(proc, r"listening on (http://\S+) key (\S+)")
    except BaseException:
        proc.stop()
        raise
    return Gateway(proc, match.group(1), "", match.group(2))
