"""The wheel as a user installs it: built by maturin, `pip install`ed into a fresh virtual
environment, run from outside the repository with no repository path anywhere (the dev venv's
`.pth` would hide a file missing from the wheel). `sluicegate --version`, `serve` on SQLite with
an admin token from the environment, `sim`, `bench` and the admin CLI from that venv, a streamed
request through the data plane, the console's pages and files, SIGTERM; then an unrelated
distribution named `control` installed over it, which `serve` refuses.

The wheel is built with the dev profile (the extension `make build-dev` just compiled, so the
build is a packaging step), unless SLUICEGATE_WHEEL names one (e.g. a release wheel)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.package.smoke import admin_cli, provision, stream_chat
from tests.support.procs import Proc, start_cli

REPO = Path(__file__).resolve().parents[2]
TOKEN = "sgt_" + "w" * 40
VERSION = re.compile(r"^sluicegate (\S+) \(core (\S+), (debug|release) build, rustc \d+\.\d+")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("SLUICEGATE_WHEEL")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("wheel")
    maturin = Path(sys.executable).with_name("maturin")
    subprocess.run(
        [maturin, "build", "--quiet", "--profile", "dev", "--out", out, "-i", sys.executable],
        cwd=REPO,
        check=True,
        timeout=1800,
    )
    (built,) = out.glob("sluicegate-*.whl")
    return built


def clean_env(venv: Path) -> dict[str, str]:
    """The environment of a user's shell with only the new venv on PATH: no PYTHONPATH, no
    VIRTUAL_ENV of the repository, no CI variables the tests read."""
    keep = ("HOME", "LANG", "TMPDIR", "SSL_CERT_FILE", "PIP_CERT", "PIP_INDEX_URL")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env["PATH"] = f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh venv with the wheel and its `postgres` extra installed (as README's "Install"
    does), its dependencies resolved from the wheel's own
    metadata and held to uv.lock's versions by a constraints file. uv installs them: pip does
    the same in about ten times as long here (an index round trip per package); the image's
    build installs this same kind of wheel with pip."""
    root = tmp_path_factory.mktemp("installed")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=120)
    constraints = root / "constraints.txt"
    uv = Path(sys.executable).with_name("uv")
    subprocess.run(
        [uv, "export", "--quiet", "--frozen", "--no-dev", "--all-extras", "--no-hashes",
         "--no-emit-project", "-o", constraints],
        cwd=REPO, check=True, timeout=120,
    )  # fmt: skip
    subprocess.run(
        [uv, "pip", "install", "--quiet", "--python", venv / "bin" / "python",
         "-c", constraints, f"{wheel}[postgres]"],
        cwd=root, env={**clean_env(venv), "UV_PYTHON_DOWNLOADS": "never"}, check=True,
        timeout=900,
    )  # fmt: skip
    yield venv


def run(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [venv / "bin" / "sluicegate", *args],
        cwd=cwd,
        env=clean_env(venv),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_carries_the_control_plane(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "control/__init__.py",
        "control/process/serve.py",
        "control/migrations/env.py",
        "control/sluicegate.example.toml",
        "control/console/static/vendor/htmx.min.js",
        "sluicegate/healthcheck.py",
        "sluicegate/_core.pyi",
    ):
        assert needed in names, needed
    assert any(re.fullmatch(r"sluicegate/_core\..*\.so", n) for n in names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_installed_wheel_serves(venv: Path, tmp_path: Path) -> None:
    site = run(venv, "--version", cwd=tmp_path)
    assert site.returncode == 0, site.stderr
    version = VERSION.match(site.stdout)
    assert version and version.group(1) == version.group(2) == "0.1.0", site.stdout
    where = subprocess.run(
        [venv / "bin" / "python", "-c", "import control, sluicegate; "
         "print(control.__file__); print(sluicegate.__file__)"],
        cwd=tmp_path, env=clean_env(venv), capture_output=True, text=True, check=True,
    )  # fmt: skip
    for path in where.stdout.split():
        assert Path(path).is_relative_to(venv), where.stdout
    assert REPO.as_posix() not in where.stdout

    env = clean_env(venv)
    command = [str(venv / "bin" / "sluicegate")]
    sim = start_cli(["sim", "--port", "0", "--ttft-ms", "5", "--itl-ms", "2"],
                    tmp_path / "sim.log", command=command, env=env, cwd=tmp_path)  # fmt: skip
    serve: Proc | None = None
    try:
        serve = start_cli(
            ["serve"],
            tmp_path / "serve.log",
            timeout=60,
            command=command,
            env={
                **env,
                "SLUICEGATE_ADMIN_TOKEN": TOKEN,
                "SLUICEGATE_DATA_LISTEN": "127.0.0.1:0",
                "SLUICEGATE_ADMIN_LISTEN": "127.0.0.1:0",
            },
            cwd=tmp_path,
        )
        admin = re.search(r"\(admin http://(\S+)\)", serve.log.read_text())
        assert admin, serve.log.read_text()
        key = provision(command, admin.group(1), TOKEN, sim.address, env=env)
        assert stream_chat(serve.address, key)
        load = run(venv, "bench", "--url", serve.url, "--model", "chat", "--key", key,
                   "--requests", "5", "--concurrency", "2", "--output-tokens", "4",
                   "--quiet", "--json", str(tmp_path / "bench.json"), cwd=tmp_path)  # fmt: skip
        assert load.returncode == 0, load.stderr
        figures = json.loads((tmp_path / "bench.json").read_text())
        assert figures, load.stdout
        usage = admin_cli(
            command, admin.group(1), TOKEN, "usage", "list", "--tenant-id", "acme", env=env
        )
        assert usage["items"], usage
        # The console's templates and static files came with the wheel.
        page = httpx.get(f"http://{admin.group(1)}/console/sign-in")
        assert page.status_code == 200 and "<form" in page.text
        script = httpx.get(f"http://{admin.group(1)}/console/static/vendor/htmx.min.js")
        assert script.status_code == 200 and len(script.content) > 10_000
        assert serve.stop(signal.SIGTERM, timeout=60) == 0
        assert "stopped" in serve.log.read_text()
        assert (tmp_path / "sluicegate.db").exists()
    finally:
        if serve is not None:
            serve.kill()
        sim.stop()


def fake_control_wheel(directory: Path) -> Path:
    """A wheel of a distribution `control` that is not ours (as the PyPI one of that name)."""
    files = {
        "control/__init__.py": b'"""Some other project\'s `control` package."""\n',
        "control-9.9.dist-info/METADATA": b"Metadata-Version: 2.1\nName: control\nVersion: 9.9\n",
        "control-9.9.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\n"
        b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append("control-9.9.dist-info/RECORD,,")
    path = directory / "control-9.9-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as whl:
        for name, data in files.items():
            whl.writestr(name, data)
        whl.writestr("control-9.9.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def test_serve_refuses_a_foreign_control_package(venv: Path, tmp_path: Path) -> None:
    """Runs last in this module: it breaks the venv's control plane on purpose."""
    subprocess.run(
        [venv / "bin" / "pip", "install", "--quiet", "--no-deps", fake_control_wheel(tmp_path)],
        env=clean_env(venv), check=True, timeout=120,
    )  # fmt: skip
    refused = run(venv, "serve", cwd=tmp_path)
    assert refused.returncode == 1
    assert "also installed by control" in refused.stderr
    assert "pip uninstall control" in refused.stderr
    assert "Traceback" not in refused.stderr
    # The version still answers: it is how a broken installation is diagnosed.
    assert run(venv, "--version", cwd=tmp_path).returncode == 0
