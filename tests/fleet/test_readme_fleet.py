"""README's "Run a fleet", followed as a newcomer would: its shell block run as written (only the
database, Redis and the journal directories pointed at the test's own), then what the text after
it says: a pool, a route and a key made as in "Run the gateway", the key given `--rpm 60
--rpm-burst 1`, requests sent through the balancer as fast as one client can. About one a second
passes, whichever replica serves it, and `sluicegate fleet` shows the three replicas sharing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import httpx

from tests.fleet.harness import Fleet
from tests.support.procs import Proc

REPO = Path(__file__).resolve().parents[2]
SECONDS = 8
# The lines of the block pointed elsewhere: the test's database and Redis, journals in its
# directory (a journal left in /var/tmp by an earlier run would replay into this database).
POINTED = {
    "export SLUICEGATE_DATABASE_URL=": "database",
    "export SLUICEGATE_REDIS_URL=": "redis",
}


def fleet_block() -> str:
    readme = (REPO / "README.md").read_text()
    section = readme.split("\n## Run a fleet\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    assert blocks, "README's Run a fleet has no sh block"
    return str(blocks[0])


def pointed_at(block: str, f: Fleet, journals: Path) -> str:
    targets = {"database": f.database_url, "redis": f.redis.url}
    lines, seen = [], set()
    for line in block.splitlines():
        for prefix, target in POINTED.items():
            if line.startswith(prefix):
                line, _ = prefix + targets[target], seen.add(prefix)
        lines.append(line)
    assert seen == set(POINTED), f"README's Run a fleet no longer sets {set(POINTED) - seen}"
    text = "\n".join(lines)
    assert "/var/tmp/sluicegate-journal-" in text, "README's journal directories changed"
    return text.replace("/var/tmp/sluicegate-journal-", f"{journals}/journal-")


def cli(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(REPO / ".venv" / "bin" / "sluicegate"), *args],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 0, f"sluicegate {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def until(check, timeout: float, what: str):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            result = check()
            if result:
                return result
        except (httpx.HTTPError, AssertionError) as e:
            last = e
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout} s (last: {last})")


def test_a_newcomer_following_run_a_fleet_sees_the_shared_limit_hold(
    new_fleet: Fleet, sims, tmp_path: Path
) -> None:
    sim: Proc = sims("--ttft-ms", "1", "--itl-ms", "0")
    (tmp_path / ".venv").symlink_to(REPO / ".venv")  # the block runs .venv/bin/sluicegate
    script = pointed_at(fleet_block(), new_fleet, tmp_path)
    # What the block exported, for the commands the text after it asks for.
    script += "\nenv | grep '^SLUICEGATE_' > sluicegate.env\nwait\n"
    shell = subprocess.Popen(
        ["bash", "-c", script], cwd=tmp_path, start_new_session=True,
        stdout=open(tmp_path / "block.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
    )  # fmt: skip
    try:
        env_file = tmp_path / "sluicegate.env"
        until(lambda: env_file.exists() and env_file.read_text(), 30, "the block's exports")
        env = {**os.environ}
        for line in env_file.read_text().splitlines():
            name, _, value = line.partition("=")
            env[name] = value
        assert env["SLUICEGATE_ADMIN_URL"] == "http://127.0.0.1:8091"

        def three_sharing() -> bool:
            fleet = json.loads(cli(env, "fleet", "--json"))
            modes = sorted((r["name"], r["limits_mode"], r["ready"]) for r in fleet["replicas"])
            return modes == [(f"edge-{i}", "shared", True) for i in (1, 2, 3)]

        until(three_sharing, 60, "three replicas sharing their limits")

        # "Create a pool, a route and a key as in Run the gateway (through any replica)".
        cli(env, "providers", "create", "--id", "sim-a", "--kind", "openai",
            "--base-url", f"{sim.url}/v1")  # fmt: skip
        cli(env, "pools", "create", "--id", "sims", "--member", "sim-a")
        cli(env, "routes", "create", "--alias", "demo-chat", "--target", "sims:sim-llama")
        cli(env, "tenants", "create", "--id", "acme", "--name", "Acme")
        limits = ["--rpm", "60", "--rpm-burst", "1"]
        created = json.loads(
            cli(env, "keys", "create", "--tenant", "acme", "--name", "laptop", *limits, "--json")
        )
        headers = {"Authorization": f"Bearer {created['key']}"}
        hello = [{"role": "user", "content": "hi"}]
        body = {"model": "demo-chat", "max_tokens": 2, "messages": hello}

        with httpx.Client(base_url="http://127.0.0.1:8080", headers=headers, timeout=10) as c:
            # The key is on every replica once the balancer's first request through it passes.
            until(lambda: c.post("/v1/chat/completions", json=body).status_code == 200, 15,
                  "the key in force through the balancer")  # fmt: skip
            time.sleep(1.5)  # the bucket full again: one request
            passed = refused = 0
            stop = time.monotonic() + SECONDS
            while time.monotonic() < stop:
                status = c.post("/v1/chat/completions", json=body).status_code
                if status == 200:
                    passed += 1
                elif status == 429:
                    refused += 1
                else:
                    raise AssertionError(f"unexpected status {status}")
        print(f"\n{passed} passed, {refused} refused in {SECONDS} s at 60 RPM, burst 1")
        # One a second, plus the one the full bucket held: the fleet shares one bucket (three
        # buckets of their own would pass about three a second).
        assert SECONDS - 1 <= passed <= SECONDS + 2, passed
        assert refused > 10 * passed
        assert "edge-1" in cli(env, "fleet")
    except AssertionError as e:
        # What the replicas and HAProxy printed says why (a replica that exited, a port taken).
        log = (tmp_path / "block.log").read_text(errors="replace")[-4000:]
        raise AssertionError(f"{e}\n--- the block's output (tail) ---\n{log}") from None
    finally:
        stop_group(shell)


def stop_group(shell: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the block's shell and everything it started (the replicas drain, HAProxy
    exits), then wait for all of them; SIGKILL what is left after 40 s."""
    os.killpg(shell.pid, signal.SIGTERM)
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        shell.poll()
        try:
            os.killpg(shell.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.killpg(shell.pid, signal.SIGKILL)
    shell.wait(5)
