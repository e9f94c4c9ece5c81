"""Start real `sluicegate` processes on loopback and stop them reliably."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

LISTENING = re.compile(r"listening on https?://(\S+)")


@dataclass
class Proc:
    popen: subprocess.Popen[str]
    address: str
    log: Path
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        return self.popen.returncode

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(5)


def start_cli(
    args: list[str],
    log: Path,
    timeout: float = 20.0,
    command: list[str] | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> Proc:
    """Run `python -m sluicegate ARGS` (or `command ARGS`, in `env` and `cwd` when given) and
    wait for its 'listening on' line."""
    out = open(log, "w+")  # noqa: SIM115 - closed with the process
    popen = subprocess.Popen(
        [*(command or [sys.executable, "-m", "sluicegate"]), *args],
        stdout=out,
        stderr=subprocess.STDOUT,
        text=True,
        env={**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"},
        cwd=cwd,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text()
        match = LISTENING.search(text)
        if match:
            return Proc(popen, match.group(1), log)
        if popen.poll() is not None:
            raise RuntimeError(f"sluicegate {args[0]} exited early:\n{text}")
        time.sleep(0.05)
    popen.kill()
    raise RuntimeError(f"sluicegate {args[0]} did not start in {timeout}s:\n{log.read_text()}")


def start_sim(tmp: Path, *args: str, name: str = "sim") -> Proc:
    return start_cli(["sim", "--port", "0", *args], tmp / f"{name}.log")
