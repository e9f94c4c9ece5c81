"""The Grafana dashboards in deploy/grafana/dashboards/ against a real Prometheus (Debian's
`prometheus` server on loopback, a temporary directory, a 1 s scrape interval) scraping
`sluicegate serve` through `/metrics` on the data port (with its bearer token) while it is
under load: every panel's PromQL and every variable's query must return data. Each dashboard
is also checked field by field against the dashboard JSON model of the schema version it
declares (`tests/e2e/grafana_schema.py`).

About a minute: `serve`, its setup through the CLI, Prometheus and six seconds of load under a
1 s scrape interval; the panels need real scrapes of real traffic, so it cannot be shorter."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e import helpers
from tests.e2e.grafana_schema import check_dashboard
from tests.e2e.helpers import cli
from tests.support.procs import start_sim

DASHBOARDS = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "dashboards"
METRICS_TOKEN = "dashboards-metrics-token-0123456789"
JOB = "sluicegate"
# What Grafana puts in place of the dashboards' variables.
VARIABLES = {"$__rate_interval": "30s", "$job": JOB, "$pool": "sims", "$tenant": "acme"}


def prometheus_binary() -> str:
    path = shutil.which("prometheus")
    if path is None:
        message = "prometheus is missing (`make test` installs Debian's prometheus package)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


def dashboards() -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))]
    assert {d["uid"] for d in found} == {
        "sluicegate-fleet",
        "sluicegate-pool",
        "sluicegate-tenant",
        "sluicegate-doctor",
    }
    return found


def substitute(expr: str) -> str:
    for name, value in VARIABLES.items():
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway under load for a few seconds, scraped every second by Prometheus; yields the
    Prometheus URL once the load is over and scraped."""
    binary = prometheus_binary()
    tmp = tmp_path_factory.mktemp("dashboards")
    sim = start_sim(tmp, "--ttft-ms", "lognormal:20:0.3", "--itl-ms", "fixed:3", "--workers", "1")
    closed = free_port()  # the trace exporter's collector is away: its losses are counted
    extra = (
        f'[metrics]\ndata_port = true\ndata_port_token = "{METRICS_TOKEN}"\n'
        f'[tracing]\nendpoint = "http://127.0.0.1:{closed}/v1/traces"\nsample_ratio = 1.0\n'
        "batch_delay_ms = 100\n"
    )
    proc, admin, token = helpers.start_serve(tmp, extra)
    prometheus: subprocess.Popen[bytes] | None = None
    try:
        cli(admin, token, "providers", "create", "--id", "sim", "--kind", "openai",
            "--base-url", f"{sim.url}/v1")  # fmt: skip
        cli(admin, token, "pools", "create", "--id", "sims", "--member", "sim",
            "--max-inflight", "8")  # fmt: skip
        cli(admin, token, "routes", "create", "--alias", "chat", "--target", "sims:sim-llama")
        cli(admin, token, "tenants", "create", "--id", "acme", "--name", "Acme",
            "--quota-period", "daily", "--quota-tokens", "100000000")  # fmt: skip
        key = cli(admin, token, "keys", "create", "--tenant", "acme",
                  "--quota-period", "daily", "--quota-tokens", "50000000")["key"]  # fmt: skip
        port = free_port()
        config = tmp / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"scrape_configs:\n  - job_name: {JOB}\n    scrape_interval: 1s\n"
            "    scrape_timeout: 1s\n"
            f"    authorization:\n      credentials: {METRICS_TOKEN}\n"
            f"    static_configs:\n      - targets: ['{proc.address}']\n"
        )
        log = open(tmp / "prometheus.log", "wb")  # noqa: SIM115 - closed with the process
        prometheus = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
            stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        wait_ready(url, prometheus)
        # Scraped before the load starts: what the load adds is an increase Prometheus sees.
        wait_scraped(url, minimum=2)
        # Refusals (an unknown model) beside the traffic, so the refusal panels have data.
        for _ in range(3):
            httpx.post(
                f"http://{proc.address}/v1/chat/completions",
                json={"model": "nope", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {key}"},
                timeout=10,
            )
        done = subprocess.run(
            [sys.executable, "-m", "sluicegate", "bench", "--url", f"http://{proc.address}",
             "--model", "chat", "--key", key, "--rate", "40", "--duration", "6s",
             "--stream-ratio", "0.7", "--output-tokens", "8", "--prompt-tokens", "20",
             "--workers", "1", "--quiet"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        wait_scraped(url, minimum=8)
        yield url
    finally:
        if prometheus is not None:
            prometheus.terminate()
            try:
                prometheus.wait(10)
            except subprocess.TimeoutExpired:
                prometheus.kill()
        proc.kill()
        sim.stop()


def wait_ready(url: str, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError("prometheus exited early")
        try:
            if httpx.get(url + "/-/ready", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError("prometheus did not become ready")


def query(url: str, expr: str) -> list[dict[str, Any]]:
    answer = httpx.get(url + "/api/v1/query", params={"query": expr}, timeout=10).json()
    assert answer["status"] == "success", (expr, answer)
    return list(answer["data"]["result"])


def wait_scraped(url: str, minimum: int, timeout: float = 30) -> None:
    """Until Prometheus holds `minimum` successful scrapes of the gateway."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = query(url, f'count_over_time(up{{job="{JOB}"}}[1m])')
        healthy = query(url, f'up{{job="{JOB}"}}')
        if result and float(result[0]["value"][1]) >= minimum and healthy:
            assert float(healthy[0]["value"][1]) == 1.0, (
                "the data port's /metrics refused the scrape"
            )
            return
        time.sleep(0.5)
    raise AssertionError("prometheus did not scrape the gateway")


def targets(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]


def test_every_dashboard_follows_its_schema_version() -> None:
    for dashboard in dashboards():
        check_dashboard(dashboard)


def test_every_panel_returns_data_from_a_real_prometheus(scraped: str) -> None:
    empty = []
    checked = 0
    for dashboard in dashboards():
        for title, expr in targets(dashboard):
            result = query(scraped, substitute(expr))
            checked += 1
            values = [float(r["value"][1]) for r in result]
            if not any(v == v for v in values):  # every value NaN, or no series at all
                empty.append(f"{dashboard['uid']} / {title}: {expr}")
    assert checked >= 40
    assert not empty, "panels without data:\n" + "\n".join(empty)


def test_every_variable_lists_values(scraped: str) -> None:
    for dashboard in dashboards():
        for variable in dashboard["templating"]["list"]:
            if variable["type"] != "query":
                continue
            match = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
            assert match, variable["query"]
            selector, label = substitute(match.group(1)), match.group(2)
            answer = httpx.get(
                f"{scraped}/api/v1/label/{label}/values", params={"match[]": selector}, timeout=10
            ).json()
            assert answer["status"] == "success" and answer["data"], (variable["name"], answer)
            wanted = VARIABLES.get(f"${variable['name']}")
            assert wanted in answer["data"], (variable["name"], answer["data"])


def test_the_data_port_metrics_need_their_token(scraped: str) -> None:
    up = query(scraped, f'up{{job="{JOB}"}}')
    address = up[0]["metric"]["instance"]
    assert httpx.get(f"http://{address}/metrics", timeout=10).status_code == 401
    wrong = {"Authorization": "Bearer not-the-token-at-all-xx"}
    assert httpx.get(f"http://{address}/metrics", headers=wrong, timeout=10).status_code == 401
    right = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    scrape = httpx.get(f"http://{address}/metrics", headers=right, timeout=10)
    assert scrape.status_code == 200 and "sluicegate_pool_scale_advice" in scrape.text
    assert "gen_ai_server_time_to_first_token_seconds_bucket" in scrape.text
    assert 'sluicegate_tenant_tokens_total{tenant="acme",type="output"}' in scrape.text
