"""`make demo`: the whole product on one machine, every figure measured in this run.

Two simulated model servers (recording what they served), `sluicegate serve` in front of them
with its admin API and SQLite ledger, a tenant key made through the admin API, a burst of mixed
traffic from the load generator, a fallback drill under load, then the key's usage and latency
from the ledger, checked against the simulators' own record, and `sluicegate status` / `doctor`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

MODEL = "demo-chat"
# Realistic lengths, mostly streaming.
SHAPE = [
    "--stream-ratio",
    "0.8",
    "--prompt-tokens",
    "lognormal:300:0.6",
    "--output-tokens",
    "lognormal:60:0.5",
]
# Two model servers of different speed, each computing at most 12 requests at once, and a
# smaller spare (4) for the fallback pool.
SIMS = {
    "sim-a": ["--ttft-ms", "lognormal:80:0.3", "--itl-ms", "lognormal:12:0.2"],
    "sim-b": ["--ttft-ms", "lognormal:140:0.3", "--itl-ms", "lognormal:18:0.2"],
    "sim-spare": ["--ttft-ms", "lognormal:100:0.3", "--itl-ms", "lognormal:15:0.2"],
}
SLOTS = {"sim-a": 12, "sim-b": 12, "sim-spare": 4}
MAIN = ("sim-a", "sim-b")


def mix(interactive: int, batch: int) -> list[str]:
    return ["--priority", f"interactive:{interactive}", "--priority", f"batch:{batch}"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def step(text: str) -> None:
    print(f"\n== {text}", flush=True)


class Processes:
    """Child processes, each logging to a file; all stopped on the way out."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.children: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> Path:
        log = self.workdir / f"{name}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "sluicegate", *args],
            stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the process
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=self.workdir,
        )
        self.children.append((name, proc))
        return log

    def wait_for(self, log: Path, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = re.search(pattern, log.read_text(errors="replace"))
            if match:
                return match
            if any(p.poll() is not None for _, p in self.children):
                break
            time.sleep(0.05)
        raise RuntimeError(f"{log.name}: no {pattern!r}\n{log.read_text(errors='replace')[-2000:]}")

    def stop_all(self) -> None:
        for _, proc in reversed(self.children):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _, proc in reversed(self.children):
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


@contextmanager
def processes(workdir: Path) -> Iterator[Processes]:
    procs = Processes(workdir)
    try:
        yield procs
    finally:
        procs.stop_all()


def config(workdir: Path, sims: dict[str, str]) -> tuple[Path, str, str]:
    data, admin = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    providers = "".join(
        f'[[bootstrap.providers]]\nid = "{name}"\nkind = "openai"\n'
        f'base_url = "http://{address}/v1"\n'
        for name, address in sims.items()
    )
    members = ", ".join(
        f'{{ provider_id = "{name}", max_concurrency = {SLOTS[name]} }}' for name in MAIN
    )
    text = f"""
[server]
data_listen = "{data}"
admin_listen = "{admin}"
shutdown_grace_seconds = 10
log_level = "warning"

# The demo is short: the doctor compares the last 40 s (the 30 s overload, its tail, and the
# 10-second slot it started in) with the 30 s before them (the steady load and the drill).
[doctor]
recent_seconds = 40
baseline_seconds = 30

[database]
url = "sqlite:///{workdir}/sluicegate.db"

[[bootstrap.tenants]]
id = "acme"
name = "Acme"

{providers}
[[bootstrap.pools]]
id = "chat"
members = [{members}]
admission = {{ batch = {{ max_depth = 64, max_wait_ms = 10000, weight = 1 }} }}

[[bootstrap.pools]]
id = "chat-fallback"
members = [{{ provider_id = "sim-spare", max_concurrency = {SLOTS["sim-spare"]} }}]
admission = {{ batch = {{ max_depth = 8, max_wait_ms = 10000, weight = 1 }}, tenant_share = 1.0 }}

[[bootstrap.routes]]
alias = "{MODEL}"
chain = [{{ pool = "chat", model = "sim-llm" }}, {{ pool = "chat-fallback", model = "sim-llm" }}]

[[bootstrap.prices]]
model = "{MODEL}"
input_micros_per_mtok = 500000
output_micros_per_mtok = 1500000
"""
    path = workdir / "sluicegate.toml"
    path.write_text(text)
    return path, data, admin


class Admin:
    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )

    def get(self, path: str, **params: Any) -> Any:
        r = self.client.get(path, params=params)
        r.raise_for_status()
        return r.json()

    def post(self, path: str, body: dict[str, Any]) -> Any:
        r = self.client.post(path, json=body)
        r.raise_for_status()
        return r.json()


def bench_command(url: str, key: str, args: list[str], report: Path) -> list[str]:
    """`sluicegate bench` against the demo's model, its JSON report written to `report`."""
    cmd = [sys.executable, "-m", "sluicegate", "bench", "--url", url, "--key", key]
    return [*cmd, "--model", MODEL, "--json", str(report), *args]


def read_report(report: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(report.read_text())
    return result


def bench(url: str, key: str, args: list[str], report: Path) -> dict[str, Any]:
    subprocess.run(bench_command(url, key, args, report), check=True)
    return read_report(report)


def record_totals(paths: list[Path]) -> tuple[int, int, int]:
    """Requests, prompt and completion tokens the simulators served (their ground truth)."""
    requests = prompt = completion = 0
    for path in paths:
        for line in path.read_text().splitlines():
            row = json.loads(line)
            requests += 1
            prompt += row["prompt_tokens"]
            completion += row["completion_tokens"]
    return requests, prompt, completion


def wait_for_ledger(admin: Admin, key_id: str, requests: int) -> dict[str, Any]:
    """The key's totals once the drainer has written every request (or after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        totals: dict[str, Any] = admin.get(f"/v1/admin/keys/{key_id}/usage/models")
        if totals["total"]["requests"] >= requests or time.monotonic() > deadline:
            return totals
        time.sleep(0.3)


def drill_under_load(procs: Processes, url: str, key: str, env: dict[str, str]) -> dict[str, Any]:
    """Eject sim-a for 6 s while traffic flows: the route must keep answering."""
    report = procs.workdir / "drill-load.json"
    args = ["--quiet", "--concurrency", "8", "--duration", "10s", "--output-tokens", "fixed:20"]
    load = subprocess.Popen(bench_command(url, key, args, report))
    time.sleep(2)
    cmd = [sys.executable, "-m", "sluicegate", "drill", "--route", MODEL, "--eject", "chat:sim-a"]
    subprocess.run([*cmd, "--for", "6s", "--reason", "demo"], check=True, env={**os.environ, **env})
    load.wait(60)
    return read_report(report)


def main() -> int:
    started = time.monotonic()
    token = "demo-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="sluicegate-demo-") as tmp, processes(Path(tmp)) as p:
        workdir = Path(tmp)
        step("three simulated model servers, recording every request they serve")
        records, sims = [], {}
        for name, timing in SIMS.items():
            record = workdir / f"{name}.jsonl"
            records.append(record)
            log = p.start(
                name,
                "sim",
                "--port",
                "0",
                "--max-concurrency",
                str(SLOTS[name]),
                "--record",
                str(record),
                *timing,
            )
            sims[name] = p.wait_for(log, r"listening on http://(\S+)").group(1)
            print(f"  {name}: http://{sims[name]} ({' '.join(timing)}, {SLOTS[name]} slots)")

        step("sluicegate serve: data plane, admin API, SQLite ledger")
        path, data, admin_address = config(workdir, sims)
        env = {"SLUICEGATE_ADMIN_TOKEN": token, "SLUICEGATE_ADMIN_URL": f"http://{admin_address}"}
        log = p.start("serve", "serve", "--config", str(path), env=env)
        p.wait_for(log, r"listening on http://\S+ \(admin http://\S+\)")
        url = f"http://{data}"
        print(f"  gateway {url}, admin http://{admin_address}")
        print("  route demo-chat -> pool chat (sim-a, sim-b) -> pool chat-fallback (sim-spare)")

        step("a key for tenant acme, made through the admin API")
        admin = Admin(f"http://{admin_address}", token)
        created = admin.post("/v1/admin/keys", {"tenant_id": "acme", "name": "demo"})
        key, key_id = created["key"], created["id"]
        print(f"  key {created['prefix']}... (id {key_id}); the secret is shown once")

        step("steady load: 12 clients for 20 s (the pool has 24 slots), 80% streaming")
        steady_args = [*SHAPE, *mix(3, 1), "--concurrency", "12", "--duration", "20s", "--quiet"]
        steady = bench(url, key, steady_args, workdir / "steady.json")

        step("fallback drill: sim-a ejected for 6 s under load")
        drill = drill_under_load(p, url, key, env)
        print(
            f"  during the drill: {drill['requests']} requests, {drill['ok']} ok, "
            f"error rate {drill['error_rate']:.2%}, timeout rate {drill['timeout_rate']:.2%}"
        )

        step("overload: 26 requests/s for 30 s (the slots serve about 21), batch:interactive 3:1")
        overload_args = [*SHAPE, *mix(1, 3), "--rate", "26", "--duration", "30s", "--quiet"]
        burst = bench(url, key, overload_args, workdir / "burst.json")
        shed = burst["status"].get("503", 0)
        print(
            f"  {shed} of {burst['requests']} shed with 503 + Retry-After "
            f"({burst['retry_after_seen']} carried it); {burst['ok']} served"
        )

        step("the ledger: the key's usage in SQL against what the simulators served")
        served = steady["ok"] + drill["ok"] + burst["ok"]
        totals = wait_for_ledger(admin, key_id, served)
        upstream, prompt, completion = record_totals(records)
        t = totals["total"]
        print(f"  {'':20} {'requests':>9} {'prompt':>9} {'completion':>11} {'cost (USD)':>11}")
        for m in totals["models"]:
            cost = m["cost_micros"] / 1e6
            print(
                f"  ledger {m['model']:13} {m['requests']:>9} {m['prompt_tokens']:>9} "
                f"{m['completion_tokens']:>11} {cost:>11.4f}"
            )
        print(f"  {'simulators served':20} {upstream:>9} {prompt:>9} {completion:>11}")
        agree = (t["requests"], t["prompt_tokens"], t["completion_tokens"]) == (
            upstream,
            prompt,
            completion,
        )
        print(f"  ledger equals the simulators' record: {'yes' if agree else 'NO'}")
        latency = admin.get(f"/v1/admin/keys/{key_id}/usage/latency")
        for name in ("ttft_ms", "tpot_ms"):
            q = latency[name]
            print(
                f"  key {name[:-3].upper():5} p50 {q['p50']:.1f} ms  p95 {q['p95']:.1f} ms  "
                f"p99 {q['p99']:.1f} ms  ({q['count']} requests)"
            )

        step("sluicegate status")
        subprocess.run([sys.executable, "-m", "sluicegate", "status"], env={**os.environ, **env})
        step("sluicegate doctor")
        subprocess.run([sys.executable, "-m", "sluicegate", "doctor"], env={**os.environ, **env})

    ok = (
        agree
        and t["requests"] == served
        and all(r["error_rate"] == 0 for r in (steady, drill))
        and burst["ok"] + shed == burst["requests"]
    )
    print(f"\ndemo {'finished' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
