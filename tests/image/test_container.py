"""The image as a container (`make image-check`, which builds it and sets SLUICEGATE_IMAGE):
run with `--network host` only (no bridge network), listening on loopback, its state on a named
volume. A simulator on the host is the upstream; the host's CLI provisions through the
container's admin API. Checked: start to ready, the HEALTHCHECK turning healthy, a streamed
request, SIGTERM while a stream is open (the stream ends properly, the container exits 0), and
the usage of both requests in the database on the volume when a new container starts on it.
Prints the image's size and the start-to-ready time."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx
import pytest

from tests.package.smoke import admin_cli, provision, stream_chat
from tests.support.procs import Proc

IMAGE = os.environ.get("SLUICEGATE_IMAGE", "")
pytestmark = pytest.mark.skipif(not IMAGE, reason="make image-check builds the image and runs it")
TOKEN = "sgt_" + "c" * 40
CLI = [sys.executable, "-m", "sluicegate"]


def docker(*args: str, check: bool = True, timeout: float = 120) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)
    if check:
        assert done.returncode == 0, (args, done.stderr)
    return done.stdout.strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Container:
    name: str
    data: str
    admin: str

    def logs(self) -> str:
        done = subprocess.run(["docker", "logs", self.name], capture_output=True, text=True)
        return done.stdout + done.stderr

    def state(self) -> dict[str, object]:
        state: dict[str, object] = json.loads(docker("inspect", "--format", "{{json .State}}",
                                                      self.name))  # fmt: skip
        return state

    def health(self) -> str:
        return docker("inspect", "--format", "{{.State.Health.Status}}", self.name)


@pytest.fixture
def volume() -> Iterator[str]:
    name = f"sluicegate-check-{uuid.uuid4().hex[:8]}"
    docker("volume", "create", name)
    yield name
    docker("volume", "rm", "-f", name, check=False)


@pytest.fixture
def run_container(volume: str) -> Iterator[Callable[[], tuple[Container, float]]]:
    """Start a container on the volume; returns it and the seconds from `docker run` to a 200
    from `/readyz` on its data port."""
    started: list[Container] = []

    def run() -> tuple[Container, float]:
        c = Container(f"sluicegate-check-{uuid.uuid4().hex[:8]}",
                      f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")  # fmt: skip
        t0 = time.monotonic()
        docker(
            "run", "--detach", "--name", c.name, "--network", "host",
            "--volume", f"{volume}:/var/lib/sluicegate",
            "--env", f"SLUICEGATE_DATA_LISTEN={c.data}",
            "--env", f"SLUICEGATE_ADMIN_LISTEN={c.admin}",
            "--env", f"SLUICEGATE_ADMIN_TOKEN={TOKEN}",
            "--env", "SLUICEGATE_SHUTDOWN_GRACE_SECONDS=20",
            "--health-interval", "1s", "--health-start-period", "60s",
            IMAGE,
        )  # fmt: skip
        started.append(c)
        deadline = t0 + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"http://{c.data}/readyz", timeout=1).status_code == 200:
                    return c, time.monotonic() - t0
            except httpx.TransportError:
                pass
            assert c.state()["Running"], c.logs()
            time.sleep(0.05)
        raise AssertionError(f"not ready in 120 s:\n{c.logs()}")

    yield run
    for c in started:
        docker("rm", "--force", c.name, check=False)


def test_container_serves_streams_and_drains_on_sigterm(
    run_container: Callable[[], tuple[Container, float]], sim_factory: Callable[..., Proc]
) -> None:
    size = int(docker("image", "inspect", "--format", "{{.Size}}", IMAGE))
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "100")
    c, ready_after = run_container()
    user = docker("exec", c.name, "id", "-u")
    assert user == "10001"
    key = provision(CLI, c.admin, TOKEN, sim.address)
    assert stream_chat(c.data, key, max_tokens=4)
    # The HEALTHCHECK (run every second here) finds the data plane ready.
    deadline = time.monotonic() + 30
    while c.health() != "healthy":
        assert time.monotonic() < deadline, c.logs()
        time.sleep(0.5)

    # SIGTERM while a stream of ~3 s is open: it ends with [DONE], then the container exits 0.
    stopping: list[subprocess.Popen[str]] = []

    def stop() -> None:
        stopping.append(subprocess.Popen(["docker", "stop", "--time", "65", c.name], text=True))

    text = stream_chat(c.data, key, max_tokens=30, on_first=stop)
    assert stopping and len(text) > 0
    assert stopping[0].wait(90) == 0
    state = c.state()
    assert state["ExitCode"] == 0, c.logs()
    logs = c.logs()
    assert "draining in-flight requests" in logs and "stopped" in logs
    assert logs.count(TOKEN) == 0

    # A new container on the same volume: both requests are in its SQLite ledger.
    again, _ = run_container()
    usage = admin_cli(CLI, again.admin, TOKEN, "usage", "list", "--tenant-id", "acme")
    assert len(usage["items"]) == 2, usage
    assert {row["status"] for row in usage["items"]} == {200}
    print(
        f"\nimage {IMAGE}: {size / 1e6:.0f} MB; start to ready (docker run to /readyz 200): "
        f"{ready_after:.2f} s"
    )


def test_image_configuration() -> None:
    """The image's configuration as `docker inspect` shows it: user, ports, volume, health."""
    config = json.loads(docker("image", "inspect", "--format", "{{json .Config}}", IMAGE))
    assert config["User"] == "10001:10001"
    assert set(config["ExposedPorts"]) == {"8080/tcp", "8081/tcp"}
    assert set(config["Volumes"]) == {"/var/lib/sluicegate"}
    assert config["Healthcheck"]["Test"] == ["CMD", "python3", "-m", "sluicegate.healthcheck"]
    assert config["Entrypoint"] == ["sluicegate"] and config["Cmd"] == ["serve"]
    version = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", IMAGE, "--version"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert version.stdout.startswith("sluicegate 0.1.0 (core 0.1.0, release build"), version
