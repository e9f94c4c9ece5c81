"""`sluicegate serve` as a real process: set up a pool of two simulators, a tenant and a key with
the CLI, call the gateway with the `openai` SDK, rotate and revoke the key, SIGTERM, and find the
usage rows in SQL."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.e2e.helpers import ENCRYPTION_KEY, PEPPER, UPSTREAM_SECRET, cli
from tests.support.procs import Proc


def chat(data: str, key: str, stream: bool = False) -> bool:
    """True if the gateway answered, False if it refused the key."""
    client = openai.OpenAI(base_url=f"http://{data}/v1", api_key=key, max_retries=0)
    messages: Any = [{"role": "user", "content": "hello"}]
    try:
        if stream:
            chunks = client.chat.completions.create(
                model="chat", messages=messages, max_tokens=4, stream=True
            )
            text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        else:
            answer = client.chat.completions.create(model="chat", messages=messages, max_tokens=4)
            text = answer.choices[0].message.content or ""
    except openai.AuthenticationError:
        return False
    assert text
    return True


def test_serve_end_to_end(
    serve: Callable[[], tuple[Proc, str, str]], sim_factory: Callable[..., Proc], tmp_path: Path
) -> None:
    sims = [
        sim_factory("--api-key", UPSTREAM_SECRET, "--ttft-ms", "5", "--itl-ms", "1", name=n)
        for n in ("a", "b")
    ]
    proc, admin, token = serve()
    data = proc.address
    assert httpx.get(f"http://{admin}/readyz").json()["ready"] is True
    assert httpx.get(f"http://{admin}/openapi.json").status_code == 200
    # A head the admin port cannot parse: the API's error format (`admin_protocol.py`).
    host, port = admin.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(b"HELLO\r\n\r\n")
        refused = conn.makefile("rb").read()
    assert refused.startswith(b"HTTP/1.1 400 ")
    assert json.loads(refused.partition(b"\r\n\r\n")[2])["error"]["code"] == "bad_request"

    for name, sim in zip(("sim-a", "sim-b"), sims, strict=True):
        provider = cli(
            admin, token, "providers", "create", "--id", name, "--kind", "openai",
            "--base-url", f"http://{sim.address}/v1", "--credential-env", "SIM_KEY",
        )  # fmt: skip
        assert provider["credential_mask"].endswith(UPSTREAM_SECRET[-4:])
    pool = cli(admin, token, "pools", "create", "--id", "sims", "--member", "sim-a",
               "--member", "sim-b:2:64", "--first-byte-ms", "10000")  # fmt: skip
    assert [m["weight"] for m in pool["members"]] == [1, 2]
    cli(admin, token, "routes", "create", "--alias", "chat", "--target", "sims:sim-llama")
    cli(admin, token, "tenants", "create", "--id", "acme", "--name", "Acme", "--rpm", "600")
    key = cli(admin, token, "keys", "create", "--tenant", "acme", "--name", "app")
    assert cli(admin, token, "keys", "list", "--tenant", "acme")["items"][0]["id"] == key["id"]

    answered = 0
    for stream in (False, True, False, True):
        assert chat(data, key["key"], stream)
        answered += 1

    rotated = cli(admin, token, "keys", "rotate", key["id"], "--overlap", "120")
    new = rotated["key"]
    assert chat(data, key["key"]) and chat(data, new["key"])
    answered += 2
    cli(admin, token, "keys", "revoke", key["id"])
    assert not chat(data, key["key"])
    assert chat(data, new["key"])
    answered += 1
    cli(admin, token, "keys", "revoke", new["id"])
    assert not chat(data, new["key"])

    missing = cli(admin, token, "tenants", "show", "nobody", ok=False)
    assert "HTTP 404 not_found" in missing
    refused = cli(admin, token, "keys", "create", "--tenant", "acme", "--rpm", "601", ok=False)
    assert "rpm: exceeds the tenant's rpm (600)" in refused

    assert proc.stop(signal.SIGTERM, timeout=30) == 0
    log = proc.log.read_text()
    assert "stopped" in log
    db = sqlite3.connect(tmp_path / "sluicegate.db")
    rows = db.execute("SELECT tenant_id, key_id, upstream, status FROM usage_records").fetchall()
    assert len(rows) == answered
    assert {r[0] for r in rows} == {"acme"} and {r[3] for r in rows} == {200}
    assert {r[1] for r in rows} == {key["id"], new["id"]}
    assert {r[2] for r in rows} <= {"sim-a", "sim-b"}

    # Secrets: the generated admin token was printed exactly once; nothing else ever.
    assert log.count(token) == 1
    for secret in (PEPPER, ENCRYPTION_KEY, UPSTREAM_SECRET, key["key"], new["key"]):
        assert secret not in log


def test_serve_refuses_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[server]\ndata_listen = "nowhere"\n')
    done = subprocess.run(
        [sys.executable, "-m", "sluicegate", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "server.data_listen" in done.stderr
