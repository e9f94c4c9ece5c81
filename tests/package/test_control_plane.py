"""A `control` package that is not sluicegate's, first on the path (as an unrelated distribution
of that name would be): `serve` and the admin commands stop with one line naming it, no
traceback; `--version` and the core's own commands still run. (An installed distribution over
ours is tests/package/test_installed_wheel.py's last test.)"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def sluicegate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    foreign = tmp_path / "elsewhere" / "control"
    foreign.mkdir(parents=True, exist_ok=True)
    (foreign / "__init__.py").write_text('"""Some other project\'s `control`."""\n')
    env = {**os.environ, "PYTHONPATH": str(foreign.parent)}
    return subprocess.run(
        [sys.executable, "-m", "sluicegate", *args],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip


def test_serve_refuses_a_control_package_that_is_not_ours(tmp_path: Path) -> None:
    done = sluicegate(tmp_path, "serve")
    assert done.returncode == 1
    assert done.stderr.startswith("sluicegate: the package `control` at ")
    assert "elsewhere/control is not sluicegate's control plane" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "sluicegate.db").exists()


def test_admin_commands_say_the_same(tmp_path: Path) -> None:
    done = sluicegate(tmp_path, "tenants", "list")
    assert done.returncode == 1 and "is not sluicegate's control plane" in done.stderr
    assert "Traceback" not in done.stderr


def test_version_and_the_core_commands_need_no_control_plane(tmp_path: Path) -> None:
    version = sluicegate(tmp_path, "--version")
    assert version.returncode == 0 and version.stdout.startswith("sluicegate 0.1.0 (core 0.1.0, ")
    assert sluicegate(tmp_path, "sim", "--help").returncode == 0
