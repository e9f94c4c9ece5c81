"""`sluicegate serve` as a process, traffic from `sluicegate bench`, then what an operator reads:
a real scrape of /metrics checked by `promtool check metrics`, `sluicegate status` and
`sluicegate doctor`, and their errors."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sluicegate.cli.tables import triple

from tests.e2e import helpers
from tests.e2e.helpers import cli
from tests.support.procs import Proc, start_sim


def start_serve(tmp_path: Path) -> tuple[Proc, str, str]:
    """`sluicegate serve` whose doctor compares the last 20 s with the 30 s before."""
    return helpers.start_serve(tmp_path, "[doctor]\nrecent_seconds = 20\nbaseline_seconds = 30\n")


def run(admin: str, token: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLUICEGATE_ADMIN_TOKEN"}
    if token is not None:
        env["SLUICEGATE_ADMIN_TOKEN"] = token
    return subprocess.run(
        [sys.executable, "-m", "sluicegate", *args, "--admin-url", f"http://{admin}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        message = "promtool is missing (`make test` installs Debian's prometheus package)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def _counter_sum(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        match = re.match(rf"^{name}{{(.*)}} (\S+)$", line)
        if match and all(f'{k}="{v}"' in match.group(1) for k, v in labels.items()):
            total += float(match.group(2))
    return total


@pytest.fixture(scope="module")
def operated(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Proc, str, str, dict[str, Any]]]:
    """A gateway that served a few seconds of open-loop traffic through one simulator (shared
    by the module's tests, which only read)."""
    tmp_path = tmp_path_factory.mktemp("observability")
    sim = start_sim(tmp_path, "--ttft-ms", "fixed:20", "--itl-ms", "fixed:3", "--workers", "1")
    proc, admin, token = start_serve(tmp_path)
    try:
        cli(admin, token, "providers", "create", "--id", "sim", "--kind", "openai",
            "--base-url", f"{sim.url}/v1")  # fmt: skip
        cli(
            admin,
            token,
            "pools",
            "create",
            "--id",
            "sims",
            "--member",
            "sim",
            "--max-inflight",
            "8",
        )
        cli(admin, token, "routes", "create", "--alias", "chat", "--target", "sims:sim-llama",
            "--slo-ttft-p95-ms", "2000")  # fmt: skip
        cli(admin, token, "tenants", "create", "--id", "acme", "--name", "Acme")
        key = cli(admin, token, "keys", "create", "--tenant", "acme")["key"]
        report = tmp_path / "bench.json"
        done = subprocess.run(
            [sys.executable, "-m", "sluicegate", "bench", "--url", f"http://{proc.address}",
             "--model", "chat", "--key", key, "--rate", "20", "--duration", "3s",
             "--output-tokens", "6", "--prompt-tokens", "10", "--workers", "1", "--quiet",
             "--json", str(report)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        yield proc, admin, token, json.loads(report.read_text())
    finally:
        proc.kill()
        sim.stop()


def test_a_real_scrape_passes_promtool(
    operated: tuple[Proc, str, str, dict[str, Any]], tmp_path: Path
) -> None:
    tool = promtool()
    _, admin, _, report = operated
    scrape = httpx.get(f"http://{admin}/metrics", timeout=10)
    assert scrape.status_code == 200
    text = scrape.text
    exposition = tmp_path / "metrics.txt"
    exposition.write_text(text)
    with exposition.open() as stdin:
        checked = subprocess.run(
            [tool, "check", "metrics"], stdin=stdin, capture_output=True, text=True, timeout=60
        )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # The counters are the bench's requests, the histograms saw every stream.
    assert report["ok"] > 20
    assert (
        _counter_sum(text, "sluicegate_requests_total", model="chat", status_class="2xx")
        == (report["ok"])
    )
    assert (
        _counter_sum(text, "sluicegate_time_to_first_token_seconds_count", pool="sims")
        == (report["ok"])
    )
    assert 'sluicegate_pool_scale_advice{pool="sims"}' in text
    assert "sluicegate_control_config_acknowledged_version" in text


def test_status_and_doctor_read_like_tables(
    operated: tuple[Proc, str, str, dict[str, Any]],
) -> None:
    _, admin, token, report = operated
    status = run(admin, token, "status")
    assert status.returncode == 0, status.stderr
    text = status.stdout
    assert "pool sims (openai)" in text and "in flight 0 of 8" in text
    assert "members: sim ready" in text
    assert "route chat -> sims; SLO: P95 of TTFT 2000 ms" in text
    api = json.loads(run(admin, token, "status", "--json").stdout)
    hour = api["pools"][0]["windows"]["1h"]
    assert hour["requests"] == report["ok"]
    # The row of the hour, as the API gave it: percentiles, never a mean.
    (row,) = [line for line in text.splitlines() if line.strip().startswith("1h")][:1]
    assert triple(hour["ttft_ms"]) in row and triple(hour["tpot_ms"]) in row

    # The doctor's windows slide with the clock, so its verdict may change between two calls
    # (traffic leaving the recent window): the text must say what the API said just before it
    # or just after it.
    before = json.loads(run(admin, token, "doctor", "--json").stdout)
    doctor = run(admin, token, "doctor", "--verbose")
    after = json.loads(run(admin, token, "doctor", "--json").stdout)
    assert doctor.returncode == 0, doctor.stderr
    assert "the last 20 s against the 30 s before" in doctor.stdout
    headlines: set[str] = set()
    for answer in (before, after):
        (pool,) = answer["pools"]
        verdict = pool["verdict"].replace("_", " ").upper()
        headlines.add(f"pool sims: {verdict} (scale advice {pool['scale_advice']})")
    assert any(line in doctor.stdout for line in headlines), (headlines, doctor.stdout)
    wider = json.loads(
        run(admin, token, "doctor", "--recent", "1m", "--baseline", "5m", "--json").stdout
    )
    assert (wider["recent_seconds"], wider["baseline_seconds"]) == (60, 300)


def test_status_and_doctor_errors(operated: tuple[Proc, str, str, dict[str, Any]]) -> None:
    _, admin, token, _ = operated
    bad = run(admin, token, "doctor", "--recent", "15s")
    assert bad.returncode == 1
    assert "HTTP 422 validation_error" in bad.stderr and "recent_seconds" in bad.stderr
    tenant = cli(admin, token, "tenants", "token", "acme", "--name", "ops")["token"]
    forbidden = run(admin, tenant, "status")
    assert forbidden.returncode == 1 and "HTTP 403 forbidden" in forbidden.stderr
    assert run(admin, None, "doctor").returncode == 2
    unreachable = run("127.0.0.1:9", token, "status")
    assert unreachable.returncode == 1 and "cannot reach the admin API" in unreachable.stderr
