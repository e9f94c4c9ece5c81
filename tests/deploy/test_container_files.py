"""The Dockerfile, compose.yaml and the pins around them, read as text: every SLUICEGATE_* name
they set is one `serve` reads, the ports they expose are the ones serve listens on, the tools
are pinned once (uv here and in the Makefile, maturin in uv.lock), and compose never asks for a
bridge network. `make image-check` runs the image itself (tests/image/)."""

from __future__ import annotations

import re
import tomllib
from typing import Any

import yaml

from control.process.listen import HostPort
from control.process.settings import ENV
from tests.deploy.manifests import REPO

DOCKERFILE = (REPO / "Dockerfile").read_text()


def dockerfile_env() -> dict[str, str]:
    """The SLUICEGATE_* variables the runtime stage's ENV sets."""
    runtime = DOCKERFILE.split(" AS runtime\n", 1)[1]
    (block,) = re.findall(r"^ENV .*?(?=^\S)", runtime, re.M | re.S)
    return dict(re.findall(r"(SLUICEGATE_\w+)=(\S+)", block))


def test_dockerfile_sets_only_settings_serve_reads() -> None:
    env = dockerfile_env()
    assert env and set(env) <= set(ENV), sorted(set(env) - set(ENV))
    listens = {HostPort.parse(env[f"SLUICEGATE_{n}_LISTEN"]).port for n in ("DATA", "ADMIN")}
    (exposed,) = re.findall(r"^EXPOSE (.+)$", DOCKERFILE, re.M)
    assert {int(p) for p in exposed.split()} == listens
    # The database, its key file and the journal (beside it by default) are on the volume.
    (volume,) = re.findall(r'^VOLUME \["(.+)"\]$', DOCKERFILE, re.M)
    assert env["SLUICEGATE_DATABASE_URL"] == f"sqlite:///{volume}/sluicegate.db"
    uid = re.search(r"useradd .*--uid (\d+)", DOCKERFILE)
    assert uid and f"USER {uid.group(1)}:{uid.group(1)}" in DOCKERFILE
    assert 'CMD ["python3", "-m", "sluicegate.healthcheck"]' in DOCKERFILE
    assert 'ENTRYPOINT ["sluicegate"]' in DOCKERFILE and "STOPSIGNAL SIGTERM" in DOCKERFILE


def test_dockerfile_defaults_are_the_official_images() -> None:
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", DOCKERFILE, re.M))
    assert args["BUILDER_IMAGE"].startswith("rust:") and "bookworm" in args["BUILDER_IMAGE"]
    assert args["PYTHON_IMAGE"] == "python:3.11-slim-bookworm"
    rust = re.match(r"rust:(\d+\.\d+)", args["BUILDER_IMAGE"])
    workspace = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]
    assert rust and tuple(map(int, rust.group(1).split("."))) >= tuple(
        map(int, workspace["rust-version"].split("."))
    )


def test_tools_are_pinned_once() -> None:
    makefile = (REPO / "Makefile").read_text()
    (uv_make,) = re.findall(r"^UV_VERSION := (\S+)$", makefile, re.M)
    (uv_docker,) = re.findall(r"^ARG UV_VERSION=(\S+)$", DOCKERFILE, re.M)
    assert uv_make == uv_docker
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    # maturin < 1.12 leaves control/ out of the wheel; the lock pins the one make and the
    # image build with.
    assert project["build-system"]["requires"] == ["maturin>=1.12,<2"]
    assert project["dependency-groups"]["build"] == ["maturin>=1.12,<2"]
    lock = tomllib.loads((REPO / "uv.lock").read_text())
    (maturin,) = [p for p in lock["package"] if p["name"] == "maturin"]
    major, minor = map(int, maturin["version"].split(".")[:2])
    assert (major, minor) >= (1, 12)
    assert "$(UV) sync --quiet --locked" in makefile
    # One documented command updates the lock.
    assert re.search(r"^lock:.*\n(\t.*\n)*\t\$\(UV\) lock --upgrade$", makefile, re.M)
    assert "`make lock` is the one command that updates it" in (REPO / "README.md").read_text()


def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((REPO / "compose.yaml").read_text())
    return data


def test_compose_uses_the_host_network_and_settings_serve_reads() -> None:
    services = compose()["services"]
    assert {"postgres", "redis", "sluicegate-1", "sluicegate-2"} == set(services)
    ports: list[int] = []
    for name, service in services.items():
        assert service["network_mode"] == "host", name
        assert "ports" not in service and "networks" not in service, name
        if name.startswith("sluicegate-"):
            env = service["environment"]
            assert set(env) <= set(ENV), sorted(set(env) - set(ENV))
            for var in ("SLUICEGATE_DATA_LISTEN", "SLUICEGATE_ADMIN_LISTEN"):
                where = HostPort.parse(env[var])
                assert where.host == "127.0.0.1"
                ports.append(where.port)
            url = env["SLUICEGATE_DATABASE_URL"]
            assert url.startswith("postgresql+psycopg://") and ":5433/" in url
            assert env["SLUICEGATE_REDIS_URL"].endswith(":6380/0")
            grace = int(service["stop_grace_period"].rstrip("s"))
            # serve's defaults: 30 s in-flight grace, as long again for the usage drainer.
            assert grace >= int(env["SLUICEGATE_UNREADY_SECONDS"]) + 2 * 30
            (volume,) = service["volumes"]
            assert volume.endswith(":/var/lib/sluicegate")
    assert len(ports) == len(set(ports)) == 4
    assert "--port" in services["redis"]["command"] and "6380" in services["redis"]["command"]
    assert "port=5433" in services["postgres"]["command"]
    journals = {s["volumes"][0] for n, s in services.items() if n.startswith("sluicegate-")}
    assert len(journals) == 2


def test_dockerignore_admits_only_what_the_build_copies() -> None:
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    admitted = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    copied = set()
    for sources in re.findall(r"^COPY (?!--from)(.+) \S+$", DOCKERFILE, re.M):
        copied |= set(sources.split())
    assert copied == admitted
