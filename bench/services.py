"""Services the fleet needs beside its replicas, started on loopback for a test or a bench run and
stopped for sure: a private `redis-server` (so that an outage test may stop it, and its
`INFO commandstats` count only what the fleet asked) and HAProxy in front of the replicas."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Redis:
    """A `redis-server` of the test's own (stopped and started again by outage tests)."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server") or "/usr/bin/redis-server"
        self.proc = subprocess.Popen(
            [
                binary,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.proc = None

    def command(self, *args: str) -> str:
        """One command in RESP; returns a bulk or simple string reply (INFO, PING)."""
        request = f"*{len(args)}\r\n" + "".join(f"${len(a)}\r\n{a}\r\n" for a in args)
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(request.encode())
            reader = s.makefile("rb")
            head = reader.readline()
            if head.startswith(b"$"):
                size = int(head[1:].strip())
                return reader.read(size + 2)[:size].decode(errors="replace") if size >= 0 else ""
            return head[1:].strip().decode(errors="replace")

    def script_calls(self) -> int:
        """Scripts Redis ran (EVALSHA and EVAL), from INFO commandstats."""
        total = 0
        for line in self.command("INFO", "commandstats").splitlines():
            if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")):
                total += int(line.split("calls=")[1].split(",")[0])
        return total

    def commands(self) -> int:
        """Every command Redis ran (scripts and what they called), from INFO commandstats."""
        total = 0
        for line in self.command("INFO", "commandstats").splitlines():
            if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
                total += int(line.split("calls=")[1].split(",")[0])
        return total


class HAProxy:
    """A load balancer in front of the replicas' data ports, checking `GET /readyz` (Debian's
    haproxy, installed by `make fleet-tools`)."""

    def __init__(self, workdir: Path, ports: list[int], maxconn: int = 4096) -> None:
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "haproxy.cfg"
        servers = "\n".join(
            f"    server r{i} 127.0.0.1:{port} check inter 200ms fall 2 rise 2"
            for i, port in enumerate(ports)
        )
        self.config.write_text(f"""
global
    maxconn {maxconn}
defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    retries 3
    option redispatch
    retry-on conn-failure empty-response 503
frontend data
    bind 127.0.0.1:{self.port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /readyz
{servers}
""")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
        self.proc = subprocess.Popen(
            [binary, "-f", str(self.config), "-db"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("haproxy did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)
