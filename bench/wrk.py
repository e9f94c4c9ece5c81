"""Running wrk (Debian's package), the standard HTTP/1.1 load generator, and reading what it
printed: requests per second, the latency distribution and its errors. A figure taken with our
own load generator alone could hide that generator's ceiling; wrk is the second opinion."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.procs import pinned

UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}
SCRIPT = """wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
{auth}
"""


@dataclass(frozen=True)
class Request:
    """One POST, the same for every request wrk sends."""

    path: str
    body: str
    key: str | None = None

    def script(self, workdir: Path, name: str) -> Path:
        auth = f'wrk.headers["Authorization"] = "Bearer {self.key}"' if self.key else ""
        path = workdir / f"{name}.lua"
        path.write_text(SCRIPT.format(body=lua_string(self.body), auth=auth))
        return path


def lua_string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ensure_installed() -> str:
    found = shutil.which("wrk")
    if found:
        return found
    print("[bench] wrk not found: installing it from Debian (apt-get install wrk)", flush=True)
    subprocess.run(["apt-get", "update", "-qq"], check=False)
    install = ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "wrk"]
    subprocess.run(install, check=True)
    return shutil.which("wrk") or "/usr/bin/wrk"


def run(
    workdir: Path,
    name: str,
    url: str,
    request: Request,
    connections: int,
    seconds: float,
    cpu: int | None,
) -> dict[str, Any]:
    """wrk with one thread and `connections` keep-alive connections for `seconds`."""
    script = request.script(workdir, name)
    cmd = [
        ensure_installed(),
        "-t1",
        f"-c{connections}",
        f"-d{seconds}s",
        "--latency",
        "--timeout",
        "5s",
        "-s",
        str(script),
        url.rstrip("/") + request.path,
    ]
    done = subprocess.run(
        pinned(cmd, cpu), capture_output=True, text=True, timeout=seconds + 60, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"wrk {name} failed:\n{done.stderr[-2000:]}")
    report = parse(done.stdout)
    report["name"] = name
    print(
        f"[bench] wrk {name}: {report['requests']} requests, {report['requests_per_s']:.0f} req/s,"
        f" p50 {report['latency_ms']['p50']} ms, p99 {report['latency_ms']['p99']} ms,"
        f" errors {report['errors']}",
        flush=True,
    )
    return report


def parse(text: str) -> dict[str, Any]:
    """wrk's text report: `N requests in Ts`, `Requests/sec`, the `--latency` distribution, the
    socket errors and non-2xx answers (each an error: the bench's requests all succeed)."""
    requests = re.search(r"(\d+) requests in", text)
    rate = re.search(r"Requests/sec:\s+([\d.]+)", text)
    if not (requests and rate):
        raise RuntimeError(f"wrk printed no totals:\n{text[-2000:]}")
    latency = {}
    for q, value, unit in re.findall(r"^\s+(50|75|90|99)%\s+([\d.]+)(us|ms|s)\s*$", text, re.M):
        latency[f"p{q}"] = round(float(value) * UNITS[unit], 4)
    errors = 0
    socket = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", text
    )
    if socket:
        errors += sum(int(x) for x in socket.groups())
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    if non_2xx:
        errors += int(non_2xx.group(1))
    return {
        "requests": int(requests.group(1)),
        "requests_per_s": float(rate.group(1)),
        "latency_ms": latency,
        "errors": errors,
    }
