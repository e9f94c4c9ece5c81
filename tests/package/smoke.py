"""What the installed-wheel test and the container check do with a running `serve`, through a
given `sluicegate` command: provision a pool of one simulator, a tenant and a key with the admin
CLI, then stream a chat completion through the data plane."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import httpx

from tests.support.sse import events


def admin_cli(
    command: list[str], admin: str, token: str, *args: str, env: dict[str, str] | None = None
) -> Any:
    """An admin command's `--json` answer, run as `command ARGS` (e.g. a venv's `sluicegate`)
    in `env` (default: this process's)."""
    done = subprocess.run(
        [*command, *args, "--json", "--admin-url", f"http://{admin}"],
        capture_output=True,
        text=True,
        env={**(os.environ if env is None else env), "SLUICEGATE_ADMIN_TOKEN": token},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else None


def provision(
    command: list[str], admin: str, token: str, sim: str, env: dict[str, str] | None = None
) -> str:
    """The route `chat` to the simulator at `sim`, and a new key of tenant `acme`."""

    def call(*args: str) -> Any:
        return admin_cli(command, admin, token, *args, env=env)

    call("providers", "create", "--id", "sim", "--kind", "openai", "--base-url", f"http://{sim}/v1")
    call("pools", "create", "--id", "sims", "--member", "sim")
    call("routes", "create", "--alias", "chat", "--target", "sims:sim-llama")
    call("tenants", "create", "--id", "acme", "--name", "Acme")
    key: str = call("keys", "create", "--tenant", "acme")["key"]
    return key


def stream_chat(data: str, key: str, max_tokens: int = 8, on_first: Any = None) -> str:
    """The text of one streamed chat completion, checked to end with `[DONE]` after content;
    `on_first()` is called once the first content chunk has arrived."""
    body = {
        "model": "chat",
        "stream": True,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": "hello"}],
    }
    headers = {"authorization": f"Bearer {key}"}
    lines: list[str] = []
    with httpx.stream(
        "POST", f"http://{data}/v1/chat/completions", json=body, headers=headers, timeout=60
    ) as answer:
        assert answer.status_code == 200, answer.read()
        assert answer.headers["x-request-id"]
        for line in answer.iter_lines():
            lines.append(line)
            if on_first is not None and line.startswith("data: {"):
                on_first()
                on_first = None
    got = events(lines)
    assert got and got[-1].get("data") == "[DONE]", lines[-5:]
    chunks = [e["data"] for e in got[:-1] if isinstance(e.get("data"), dict)]
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text, lines
    return text
