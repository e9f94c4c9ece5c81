"""A route's latency objective (`slo_ttft_p95_ms`): stored, audited, cleared, validated, and kept
out of the data plane's snapshot (a change of it alone pushes nothing)."""

from __future__ import annotations

import json

import pytest
from sluicegate.cli.parser import build_parser

from tests.control.helpers import Api, Harness, error_fields


@pytest.fixture
def routed(admin: Api) -> Api:
    admin.create_provider(id="up", base_url="http://127.0.0.1:9/v1")
    admin.create_pool(id="main", members=[{"provider_id": "up"}])
    return admin


def _versions(admin: Api) -> tuple[int, int]:
    body = admin.get("/v1/admin/config/version").json()
    return body["committed_version"], body["acknowledged_version"]


def test_the_slo_is_stored_and_changed_without_a_push(harness: Harness, routed: Api) -> None:
    admin = routed
    created = admin.create_route(
        alias="chat", chain=[{"pool": "main", "model": "m"}], slo_ttft_p95_ms=800
    )
    assert created["slo_ttft_p95_ms"] == 800
    before = _versions(admin)

    changed = admin.patch("/v1/admin/routes/chat", {"slo_ttft_p95_ms": 1200})
    assert changed.status_code == 200 and changed.json()["slo_ttft_p95_ms"] == 1200
    assert _versions(admin) == before  # control-plane data: no new snapshot
    audit = admin.get("/v1/admin/audit", resource_type="route").json()["items"]
    assert audit[0]["action"] == "route.update"
    assert audit[0]["summary"] == {"slo_ttft_p95_ms": 1200}

    # The core's snapshot has no such field (the core refuses unknown fields anyway).
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    assert "slo_ttft_p95_ms" not in payload["routes"][0]

    # A change that also touches what the core runs is pushed as usual.
    both = admin.patch("/v1/admin/routes/chat", {"slo_ttft_p95_ms": None, "max_output_tokens": 9})
    assert both.status_code == 200 and both.json()["slo_ttft_p95_ms"] is None
    assert _versions(admin)[0] == before[0] + 1
    assert admin.get("/v1/admin/routes/chat").json()["slo_ttft_p95_ms"] is None


@pytest.mark.parametrize("bad", [0, -5, 3_600_001, "fast", 1.5])
def test_an_invalid_slo_is_refused_naming_the_field(routed: Api, bad: object) -> None:
    admin = routed
    response = admin.post(
        "/v1/admin/routes",
        {"alias": "chat", "chain": [{"pool": "main", "model": "m"}], "slo_ttft_p95_ms": bad},
    )
    assert response.status_code == 422
    assert set(error_fields(response)) == {"slo_ttft_p95_ms"}
    admin.create_route(alias="chat", chain=[{"pool": "main", "model": "m"}])
    patched = admin.patch("/v1/admin/routes/chat", {"slo_ttft_p95_ms": bad})
    assert patched.status_code == 422
    assert set(error_fields(patched)) == {"slo_ttft_p95_ms"}


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["routes", "create", "--alias", "chat", "--target", "p:m", "--slo-ttft-p95-ms", "900"],
            (
                "POST",
                "/v1/admin/routes",
                {"alias": "chat", "chain": [{"pool": "p", "model": "m"}], "slo_ttft_p95_ms": 900},
                {},
            ),
        ),
        (
            ["routes", "update", "a/b", "--slo-ttft-p95-ms", "none"],
            ("PATCH", "/v1/admin/routes/a/b", {"slo_ttft_p95_ms": None}, {}),
        ),
        (
            ["routes", "update", "chat", "--target", "q:x", "--max-output-tokens", "64"],
            (
                "PATCH",
                "/v1/admin/routes/chat",
                {"chain": [{"pool": "q", "model": "x"}], "max_output_tokens": 64},
                {},
            ),
        ),
    ],
)
def test_the_cli_sets_and_clears_the_slo(argv: list[str], expected: tuple[object, ...]) -> None:
    args = build_parser().parse_args(argv)
    assert args.handler(args) == expected
