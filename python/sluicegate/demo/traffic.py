"""The demo's load (`sluicegate bench` runs), its drill, and the simulators' record of what they
served, against which the ledger is checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from sluicegate.cli.client import AdminClient
from sluicegate.demo.config import MODEL
from sluicegate.demo.processes import Processes


def mix(interactive: int, batch: int) -> list[str]:
    return ["--priority", f"interactive:{interactive}", "--priority", f"batch:{batch}"]


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


def wait_for_ledger(admin: AdminClient, key_id: str, requests: int) -> dict[str, Any]:
    """The key's totals once the drainer has written every request (or after 30 s)."""
    deadline = time.monotonic() + 30
    while True:
        totals: dict[str, Any] = admin.call("GET", f"/v1/admin/keys/{key_id}/usage/models")
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
