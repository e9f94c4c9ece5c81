"""`sluicegate serve` as a process, and the CLI run against it, for the end-to-end tests."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.procs import Proc, start_cli

PEPPER = "e2e-CANARY-pepper-5c1d2e3f4a5b"
ENCRYPTION_KEY = "ZTJlLUNBTkFSWS1lbmNyeXB0aW9uLWtleS0wMTIzNDU="
UPSTREAM_SECRET = "sk-e2e-CANARY-upstream-7a8b9c0d1e"
ADMIN = re.compile(r"\(admin https?://(\S+)\)")
GENERATED_TOKEN = re.compile(r"SLUICEGATE_ADMIN_TOKEN=(\S+)")


def start_serve(tmp_path: Path, extra_config: str = "", server: str = "") -> tuple[Proc, str, str]:
    """A started `sluicegate serve` on loopback (with `extra_config` appended to its TOML and
    `server` lines added to its `[server]` table); returns it, the admin address and the
    generated admin token."""
    config = tmp_path / "sluicegate.toml"
    config.write_text(
        f"""
[server]
data_listen = "127.0.0.1:0"
admin_listen = "127.0.0.1:0"
shutdown_grace_seconds = 5
{server}

[database]
url = "sqlite:///{tmp_path}/sluicegate.db"

[secrets]
key_pepper = "{PEPPER}"
encryption_key = "{ENCRYPTION_KEY}"

[core]
workers = 2
expose_upstream = true

[usage]
drain_timeout_ms = 50
{extra_config}"""
    )
    proc = start_cli(["serve", "--config", str(config)], tmp_path / "serve.log", timeout=60)
    text = proc.log.read_text()
    admin = ADMIN.search(text)
    token = GENERATED_TOKEN.search(text)
    if not (admin and token):
        proc.kill()
        raise AssertionError(text)
    return proc, admin.group(1), token.group(1)


def cli(admin: str, token: str, *args: str, ok: bool = True) -> Any:
    """An admin command's answer as JSON (`--json`), or its error message with `ok=False`."""
    env = {**os.environ, "SLUICEGATE_ADMIN_TOKEN": token, "SIM_KEY": UPSTREAM_SECRET}
    done = subprocess.run(
        [sys.executable, "-m", "sluicegate", *args, "--json", "--admin-url", f"http://{admin}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    if not ok:
        assert done.returncode != 0, done.stdout
        return done.stderr
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None
