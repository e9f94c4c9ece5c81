"""`GET /v1/admin/status`, `GET /v1/admin/diagnosis` and `GET /metrics` through the admin app
with a real data plane and simulator: what they report, who may read them, and bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from control.observability.collector import SluicegateCollector, core_family
from tests.control.helpers import Api, Harness, error_fields
from tests.support.procs import Proc


@pytest.fixture
def served(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> tuple[Harness, str]:
    sim = sim_factory("--ttft-ms", "fixed:20", "--itl-ms", "fixed:2", "--workers", "1")
    harness = harness_factory(start_core=True)
    admin = harness.admin
    admin.create_provider(id="sim", base_url=f"{sim.url}/v1")
    admin.create_pool(id="p", members=[{"provider_id": "sim"}], admission={"max_inflight": 4})
    admin.create_route(alias="chat", chain=[{"pool": "p", "model": "m"}], slo_ttft_p95_ms=900)
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme")["key"]
    body = {"model": "chat", "stream": True, "max_tokens": 4, "messages": [{"role": "user"}]}
    for _ in range(6):
        answer = httpx.post(
            f"{harness.data_url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key}"},
        )
        assert answer.status_code == 200, answer.text
    return harness, key


def test_status_reports_each_pool_and_route_over_its_windows(served: tuple[Harness, str]) -> None:
    harness, _ = served
    status = harness.admin.get("/v1/admin/status").json()
    assert [w["name"] for w in status["windows"]] == ["1m", "5m", "1h", "prev_5m"]
    (pool,) = status["pools"]
    assert pool["id"] == "p" and pool["inflight_limit"] == 4 and pool["inflight"] == 0
    assert pool["queue_limit"] == {"interactive": 256, "batch": 1024}
    assert pool["members"][0]["id"] == "sim" and pool["members"][0]["state"] == "ready"
    minute = pool["windows"]["1m"]
    assert minute["requests"] == 6 and minute["error_rate"] == 0 and minute["rejected"] == 0
    ttft = minute["ttft_ms"]
    assert ttft["n"] == 6 and 20 <= ttft["p50"] <= ttft["p95"] <= ttft["p99"]
    assert minute["tpot_ms"]["p50"] > 1 and minute["total_ms"]["p50"] > ttft["p50"]
    assert pool["windows"]["1h"]["requests"] == 6 and pool["windows"]["prev_5m"]["requests"] == 0
    (route,) = status["routes"]
    assert route["alias"] == "chat" and route["chain"] == ["p"]
    assert route["slo_ttft_p95_ms"] == 900 and route["windows"]["5m"]["requests"] == 6


def test_diagnosis_judges_each_pool_over_the_windows_asked(served: tuple[Harness, str]) -> None:
    harness, _ = served
    default = harness.admin.get("/v1/admin/diagnosis").json()
    assert (default["recent_seconds"], default["baseline_seconds"]) == (60, 300)
    assert default["thresholds"]["rise_ratio"] == 1.5
    (pool,) = default["pools"]
    # Six requests are not enough to judge (min_requests 20), and the doctor says so.
    assert (pool["pool"], pool["verdict"], pool["scale_advice"]) == ("p", "idle", 0)
    assert "6 requests" in pool["summary"]
    assert pool["objectives"] == [
        {
            "route": "chat",
            "slo_ttft_p95_ms": 900,
            "ttft_p95_ms": pool["objectives"][0]["ttft_p95_ms"],
        }
    ]
    chosen = harness.admin.get("/v1/admin/diagnosis", recent_seconds=20, baseline_seconds=30).json()
    assert (chosen["recent_seconds"], chosen["baseline_seconds"]) == (20, 30)
    assert chosen["pools"][0]["slots"] == 2 and chosen["pools"][0]["recent"]["requests"] == 6


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"recent_seconds": 15}, "recent_seconds"),
        ({"recent_seconds": 0}, "recent_seconds"),
        ({"recent_seconds": 610}, "recent_seconds"),
        ({"baseline_seconds": "soon"}, "baseline_seconds"),
        ({"recent_seconds": 600, "baseline_seconds": 3010}, "baseline_seconds"),
    ],
)
def test_bad_windows_are_refused_naming_the_parameter(
    harness: Harness, query: dict[str, Any], field: str
) -> None:
    response = harness.admin.get("/v1/admin/diagnosis", **query)
    assert response.status_code == 422, response.text
    assert set(error_fields(response)) == {field}
    assert response.json()["error"]["code"] == "validation_error"


def test_status_and_diagnosis_are_for_admins_metrics_for_the_scraper(
    harness: Harness, world: dict[str, Any]
) -> None:
    tenant = harness.as_token(harness.admin.create_tenant_token("acme"))
    anonymous = harness.as_token(None)
    for path in ("/v1/admin/status", "/v1/admin/diagnosis"):
        forbidden = tenant.get(path)
        assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden"
        assert anonymous.get(path).status_code == 401
    scrape = anonymous.get("/metrics")
    assert scrape.status_code == 200
    assert scrape.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert 'sluicegate_pool_scale_advice{pool="main"} 0.0' in scrape.text


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_carry_the_core_families_and_the_control_plane_own(
    served: tuple[Harness, str],
) -> None:
    harness, key = served
    text = Api(harness.client, None).get("/metrics").text
    found = samples(text)
    leg = {"model": "chat", "pool": "p", "upstream": "sim"}

    def value(name: str, **labels: str) -> float:
        return found[(name, frozenset(labels.items()))]

    requests = "sluicegate_requests_total"
    assert value(requests, endpoint="chat_completions", status_class="2xx", **leg) == 6
    ttft = "sluicegate_time_to_first_token_seconds"
    assert value(f"{ttft}_bucket", le="+Inf", **leg) == 6
    assert value(f"{ttft}_bucket", le="0.01", **leg) == 0  # the simulator takes 20 ms
    assert value(f"{ttft}_count", **leg) == 6 and value(f"{ttft}_sum", **leg) >= 6 * 0.02
    assert value("sluicegate_pool_inflight_limit", pool="p") == 4
    assert "# TYPE sluicegate_requests_total counter" in text
    assert "sluicegate_requests_total_total" not in text
    version = harness.admin.get("/v1/admin/config/version").json()["acknowledged_version"]
    assert value("sluicegate_control_config_acknowledged_version") == version
    assert value("sluicegate_pool_scale_advice", pool="p") == 0
    assert ("process_cpu_seconds_total", frozenset()) in found
    # No key or secret in any label; the tenant only in the per-tenant families (bounded).
    assert key not in text
    for line in text.splitlines():
        if "acme" in line:
            assert line.startswith("sluicegate_tenant_") and 'tenant="acme"' in line, line
    assert value("sluicegate_tenant_requests_total", tenant="acme", status_class="2xx") == 6


def test_a_scrape_survives_a_doctor_that_cannot_run(served: tuple[Harness, str]) -> None:
    harness, _ = served

    def broken() -> dict[str, int]:
        raise RuntimeError("database unavailable")

    registry = CollectorRegistry(auto_describe=False)
    registry.register(SluicegateCollector(harness.bridge, broken))
    text = generate_latest(registry).decode()
    assert "sluicegate_requests_total{" in text and "sluicegate_pool_scale_advice" not in text


def test_core_families_keep_their_names_types_and_buckets() -> None:
    counter = core_family(
        {
            "name": "sluicegate_retries_total",
            "type": "counter",
            "help": "Retries.",
            "labels": ["pool"],
            "samples": [{"labels": ["p"], "value": 3}],
        }
    )
    histogram = core_family(
        {
            "name": "sluicegate_queue_wait_seconds",
            "type": "histogram",
            "help": "Wait.",
            "labels": ["pool"],
            "samples": [
                {
                    "labels": ["p"],
                    "histogram": {"buckets": [[0.5, 1], [None, 3]], "sum": 2.25, "count": 3},
                }
            ],
        }
    )
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for s in histogram.samples}
    assert counter.type == "counter" and counter.samples[0].name == "sluicegate_retries_total"
    assert samples[("sluicegate_queue_wait_seconds_bucket", (("le", "0.5"), ("pool", "p")))] == 1
    assert samples[("sluicegate_queue_wait_seconds_bucket", (("le", "+Inf"), ("pool", "p")))] == 3
    assert samples[("sluicegate_queue_wait_seconds_count", (("pool", "p"),))] == 3
    assert samples[("sluicegate_queue_wait_seconds_sum", (("pool", "p"),))] == 2.25
