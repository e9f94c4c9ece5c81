"""Processes under measurement: started pinned to a CPU, read from /proc (RSS, CPU seconds),
stopped for sure."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Proc:
    popen: subprocess.Popen[bytes]
    name: str
    log: Path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def cpu_seconds(self) -> float:
        """User + system CPU time of the process, its threads and its live descendants (nginx
        serves from a worker process under its master)."""
        stats = {}
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                # After the name: state, ppid, ..., utime (11), stime (12).
                stats[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
        tree, grew = {self.pid}, True
        while grew:
            grew = False
            for pid, (ppid, _) in stats.items():
                if ppid in tree and pid not in tree:
                    tree.add(pid)
                    grew = True
        total = sum(stats[pid][1] for pid in tree if pid in stats)
        return total / TICKS

    def stop(self, timeout: float = 20.0) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def cpus() -> tuple[int | None, int | None]:
    """Proxy under test on CPU 1; simulator and load generator on CPU 0 (when there are two)."""
    if len(os.sched_getaffinity(0)) >= 2:
        return 1, 0
    return None, None


def pinned(cmd: list[str], cpu: int | None) -> list[str]:
    if cpu is None or (os.cpu_count() or 1) < 2:
        return cmd
    return ["taskset", "-c", str(cpu), *cmd]


def start(
    name: str,
    cmd: list[str],
    workdir: Path,
    cpu: int | None = None,
    env: dict[str, str] | None = None,
) -> Proc:
    log = workdir / f"{name}.log"
    popen = subprocess.Popen(
        pinned(cmd, cpu),
        stdout=open(log, "wb"),  # noqa: SIM115 - lives as long as the process
        stderr=subprocess.STDOUT,
        env={**os.environ, **(env or {})},
        cwd=workdir,
    )
    return Proc(popen, name, log)


def wait_for_line(proc: Proc, pattern: str, timeout: float = 60.0) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = proc.log.read_text(errors="replace")
        match = re.search(pattern, text)
        if match:
            return match
        if proc.popen.poll() is not None:
            raise RuntimeError(f"{proc.name} exited:\n{text[-3000:]}")
        time.sleep(0.05)
    raise RuntimeError(f"{proc.name} did not print {pattern!r} in {timeout}s")


def start_instant_sim(workdir: Path, cpu: int | None) -> tuple[Proc, str]:
    """The simulator that answers at once (no TTFT, no gap), so that what a proxy adds is all
    that is measured; returns it and its address."""
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = sluicegate("sim", "--port", "0", "--ttft-ms", "0", "--itl-ms", "0", "--workers=1")
    sim = start("sim", cmd, workdir, cpu)
    return sim, wait_for_line(sim, r"listening on http://(\S+)").group(1)


def wait_http(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"{url} did not answer in {timeout}s")


def sluicegate(*args: str) -> list[str]:
    return [sys.executable, "-m", "sluicegate", *args]


def write_results(name: str, data: object, text: str) -> None:
    """A phase run alone: its figures as `results/NAME.json` and its report as `NAME.md`, and
    the report printed."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(data, indent=2))
    (RESULTS / f"{name}.md").write_text(text if text.endswith("\n") else text + "\n")
    print(text)
