"""The demo's child processes (simulators, `serve`, the load generator), each logging to a file
and all stopped on the way out."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
