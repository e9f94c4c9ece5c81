"""Running `sluicegate bench` (the load generator) and reading its JSON report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from bench.procs import pinned, sluicegate


def run(
    workdir: Path, name: str, url: str, args: list[str], cpu: int | None, key: str | None = None
) -> dict[str, Any]:
    out = workdir / f"{name}.json"
    cmd = sluicegate(
        "bench",
        "--url",
        url,
        "--json",
        str(out),
        "--label",
        name,
        "--quiet",
        "--workers",
        "1",
        *args,
    )
    if key:
        cmd += ["--key", key]
    done = subprocess.run(pinned(cmd, cpu), capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"bench {name} failed:\n{done.stderr[-3000:]}")
    report: dict[str, Any] = json.loads(out.read_text())
    print(
        f"[bench] {name}: {report['requests']} requests, {report['requests_per_s']:.0f} req/s, "
        f"p50 {report['total_ms']['p50']} ms, p99 {report['total_ms']['p99']} ms",
        flush=True,
    )
    return report
