"""`sluicegate drill` against `sluicegate serve`: a route with a fallback pool, a client sending
requests the whole time; the primary pool is drilled out for 3 s (traffic moves to the fallback
with no client error, the CLI prints it second by second, ends the drill and sums it up), then a
member drill cut short with Ctrl-C, which still puts the member back."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

from tests.e2e.helpers import UPSTREAM_SECRET, cli
from tests.support.procs import Proc

SECOND = re.compile(r"^\+(\d+)s  (.*)  \| (\d+) requests, (\d+) errors .* (\d+) refused", re.M)


def drill(admin: str, token: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "sluicegate", "drill", *args, "--admin-url", f"http://{admin}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SLUICEGATE_ADMIN_TOKEN": token, "PYTHONUNBUFFERED": "1"},
    )


@contextmanager
def traffic(data: str, key: str) -> Iterator[list[tuple[float, int, str | None]]]:
    """Requests back to back on a thread: (start time, status, x-sluicegate-upstream)."""
    answers: list[tuple[float, int, str | None]] = []
    stop = threading.Event()
    body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}

    def run() -> None:
        with httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=10) as client:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    r = client.post(f"http://{data}/v1/chat/completions", json=body)
                    answers.append((started, r.status_code, r.headers.get("x-sluicegate-upstream")))
                except httpx.HTTPError:
                    answers.append((started, 0, None))

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield answers
    finally:
        stop.set()
        thread.join(10)


def test_drill_command_end_to_end(
    serve: Callable[[], tuple[Proc, str, str]], sim_factory: Callable[..., Proc]
) -> None:
    sims = {
        n: sim_factory("--api-key", UPSTREAM_SECRET, "--ttft-ms", "2", "--itl-ms", "1", name=n)
        for n in ("a", "b")
    }
    proc, admin, token = serve()
    for name, sim in sims.items():
        cli(admin, token, "providers", "create", "--id", f"sim-{name}", "--kind", "openai",
            "--base-url", f"http://{sim.address}/v1", "--credential-env", "SIM_KEY")  # fmt: skip
    cli(admin, token, "pools", "create", "--id", "primary", "--member", "sim-a")
    cli(admin, token, "pools", "create", "--id", "backup", "--member", "sim-b")
    cli(admin, token, "routes", "create", "--alias", "chat",
        "--target", "primary:sim-llama", "--target", "backup:sim-llama")  # fmt: skip
    cli(admin, token, "tenants", "create", "--id", "acme", "--name", "Acme")
    key = cli(admin, token, "keys", "create", "--tenant", "acme")["key"]

    with traffic(proc.address, key) as answers:
        while len(answers) < 5:
            time.sleep(0.01)
        run = drill(admin, token, "--route", "chat", "--pool", "primary", "--for", "3s")
        assert run.stdout is not None
        header = run.stdout.readline()  # printed once the drill is in force
        started = time.monotonic()
        out, err = run.communicate(timeout=30)
        finished = time.monotonic()
        assert run.returncode == 0, err
        while not any(t > finished for t, _, _ in answers[-3:]):
            time.sleep(0.01)

        # Second case: a member (found in the route's pools), cut short with Ctrl-C.
        cut = drill(admin, token, "--route", "chat", "--eject", "sim-a", "--for", "60s")
        assert cut.stdout is not None
        lines = [cut.stdout.readline(), cut.stdout.readline()]
        assert lines[1].startswith("+1s"), lines
        cut.send_signal(signal.SIGINT)
        cut_out, cut_err = cut.communicate(timeout=30)
        cut_at = time.monotonic()
        while not any(t > cut_at for t, _, _ in answers[-3:]):
            time.sleep(0.01)

    assert {status for _, status, _ in answers} == {200}, "a client saw an error"
    assert re.match(r"drill drl_\w+: pool primary out of route chat for 3s \(until ", header)
    seconds = SECOND.findall(out)
    assert [int(s[0]) for s in seconds] == [1, 2, 3]
    for _, legs, total, errors, refused in seconds:
        assert "primary/sim-a 0" in legs and f"backup/sim-b {total}" in legs
        assert (errors, refused) == ("0", "0")
    assert "ended after" in out and "the target is back in service" in out
    during = [u for t, _, u in answers if started < t < started + 2.5]
    assert during and set(during) == {"backup/sim-b"}
    summary = re.search(r"backup/sim-b\s+(\d+)\nerrors: 0 of (\d+) requests", out)
    assert summary and summary.group(1) == summary.group(2) and int(summary.group(1)) > 5
    assert re.search(r"primary/sim-a\s+0\n", out)
    # Restored: the primary serves again.
    assert answers[-1][2] == "primary/sim-a"

    assert cut.returncode == 130, cut_err
    assert "member sim-a of pool primary out of route chat" in lines[0]
    assert "ended early (interrupted)" in cut_out

    refused = drill(admin, token, "--route", "chat", "--eject", "nobody", "--for", "3s")
    _, refused_err = refused.communicate(timeout=30)
    assert refused.returncode == 1
    assert "no pool of route 'chat' (primary, backup) has a member 'nobody'" in refused_err
    too_long = drill(admin, token, "--route", "chat", "--pool", "backup", "--for", "25h")
    _, too_long_err = too_long.communicate(timeout=30)
    assert too_long.returncode == 1
    assert "HTTP 422 validation_error" in too_long_err and "seconds:" in too_long_err

    drills = httpx.get(
        f"http://{admin}/v1/admin/drills", headers={"Authorization": f"Bearer {token}"}
    ).json()["items"]
    assert [(d["pool"], d["member"], d["state"]) for d in drills] == [
        ("primary", "sim-a", "ended"),
        ("primary", None, "ended"),
    ]
    assert drills[0]["ended_by"] == "bootstrap" and drills[1]["ended_by"] is None
    audit = cli(admin, token, "drills", "list")["items"]
    assert len(audit) == 2
    ends = httpx.get(
        f"http://{admin}/v1/admin/audit",
        params={"action": "drill.end"},
        headers={"Authorization": f"Bearer {token}"},
    ).json()["items"]
    assert [e["summary"]["early"] for e in ends] == [True, False]
