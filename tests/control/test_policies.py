"""Data-plane policies through the admin API: rate-limit bursts of tenants and keys, and per pool
admission, retries, outlier ejection and health checks. Reads show the values in force; shapes
are checked field by field; the core's operating ranges come back as its refusal, by field."""

from __future__ import annotations

import json
from typing import Any

from tests.control.helpers import Api, Harness, error_fields

DEFAULT_ADMISSION = {
    "max_inflight": None,
    "interactive": {"max_depth": 256, "max_wait_ms": 10_000, "weight": 8},
    "batch": {"max_depth": 1024, "max_wait_ms": 60_000, "weight": 1},
    "tenant_share": 0.5,
    "keepalive_ms": 1_000,
}
DEFAULT_RETRY = {
    "max_attempts": 3,
    "backoff_base_ms": 25,
    "backoff_cap_ms": 250,
    "budget_ratio": 0.2,
    "budget_min_per_second": 10.0,
    "retry_on": ["connect", "reset", "429", "500", "502", "503", "504"],
    "max_retry_after_ms": 10_000,
}
DEFAULT_EJECTION = {
    "consecutive_failures": 5,
    "base_ms": 30_000,
    "max_ms": 300_000,
    "max_ejected_percent": 50,
}


def _payload(harness: Harness) -> dict[str, Any]:
    with harness.ctx.sessions() as session:
        payload: dict[str, Any] = json.loads(harness.ctx.mutator.snapshot(session).payload)
    return payload


def _providers(admin: Api) -> None:
    admin.create_provider(id="a", base_url="http://127.0.0.1:9001/v1")
    admin.create_provider(id="b", base_url="http://127.0.0.1:9002/v1")


def test_bursts_round_trip_and_follow_their_rate(harness: Harness, admin: Api) -> None:
    tenant = admin.create_tenant(id="acme", name="Acme", rpm=600, rpm_burst=50, tpm=10_000)
    assert (tenant["rpm_burst"], tenant["tpm_burst"]) == (50, 10_000)  # unset: one minute's worth
    assert admin.get("/v1/admin/tenants/acme").json() == tenant
    key = admin.create_key(tenant_id="acme", rpm=100, rpm_burst=20, tpm=1_000, tpm_burst=500)
    assert (key["rpm_burst"], key["tpm_burst"]) == (20, 500)
    bare = admin.create_key(tenant_id="acme", rpm=40)
    assert (bare["rpm_burst"], bare["tpm_burst"]) == (40, None)

    payload = _payload(harness)
    assert payload["tenants"][0]["limits"] == {
        "rpm": 600,
        "tpm": 10_000,
        "max_concurrency": None,
        "rpm_burst": 50,
        "tpm_burst": None,  # the core makes it the tpm
    }
    limits = {k["id"]: k["limits"] for k in payload["keys"]}
    assert limits[key["id"]]["rpm_burst"] == 20 and limits[bare["id"]]["rpm_burst"] is None

    # An unset burst follows its rate; null unsets it again.
    assert admin.patch(f"/v1/admin/keys/{bare['id']}", {"rpm": 30}).json()["rpm_burst"] == 30
    cleared = admin.patch("/v1/admin/tenants/acme", {"rpm_burst": None, "rpm": 700}).json()
    assert cleared["rpm_burst"] == 700
    rotated = admin.post(f"/v1/admin/keys/{key['id']}/rotate", {}).json()["key"]
    assert (rotated["rpm_burst"], rotated["tpm_burst"]) == (20, 500)
    audit = admin.get("/v1/admin/audit", action="tenant.update").json()["items"][0]
    assert audit["summary"] == {"rpm_burst": None, "rpm": 700}


def test_a_burst_needs_its_rate(admin: Api) -> None:
    response = admin.post("/v1/admin/tenants", {"name": "T", "rpm_burst": 5, "tpm_burst": 5})
    assert response.status_code == 422
    assert set(error_fields(response)) == {"rpm_burst", "tpm_burst"}
    admin.create_tenant(id="acme", name="Acme", rpm=60, rpm_burst=5)
    unset_rate = admin.patch("/v1/admin/tenants/acme", {"rpm": None})
    assert unset_rate.status_code == 422
    assert "needs rpm" in error_fields(unset_rate)["rpm_burst"]
    response = admin.post("/v1/admin/keys", {"tenant_id": "acme", "rpm_burst": 5})
    assert response.status_code == 422 and set(error_fields(response)) == {"rpm_burst"}
    bad = admin.post("/v1/admin/keys", {"tenant_id": "acme", "rpm": 5, "tpm_burst": 0})
    assert bad.status_code == 422 and set(error_fields(bad)) == {"tpm_burst"}


def test_key_bursts_never_exceed_the_tenants(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme", rpm=600, rpm_burst=100, tpm=10_000)
    over = admin.post(
        "/v1/admin/keys", {"tenant_id": "acme", "rpm": 300, "rpm_burst": 101, "tpm_burst": 20_000}
    )
    assert over.status_code == 422
    assert error_fields(over) == {
        "rpm_burst": "exceeds the tenant's rpm_burst (100)",
        "tpm_burst": "needs tpm: a burst is the bucket size of the per-minute limit",
    }
    over = admin.post("/v1/admin/keys", {"tenant_id": "acme", "tpm": 5_000, "tpm_burst": 20_000})
    assert error_fields(over) == {"tpm_burst": "exceeds the tenant's tpm_burst (10000)"}
    # A key's unset burst is its rpm: above the tenant's burst, it must be set lower.
    derived = admin.post("/v1/admin/keys", {"tenant_id": "acme", "rpm": 300})
    assert derived.status_code == 422
    assert "set a rpm_burst of at most 100" in error_fields(derived)["rpm_burst"]
    key = admin.create_key(tenant_id="acme", rpm=300, rpm_burst=100)
    raised = admin.patch(f"/v1/admin/keys/{key['id']}", {"rpm_burst": 101})
    assert raised.status_code == 422 and set(error_fields(raised)) == {"rpm_burst"}

    # The tenant cannot go below its keys: by its burst, or by its rate when its burst is unset.
    lowered = admin.patch("/v1/admin/tenants/acme", {"rpm_burst": 99})
    assert lowered.status_code == 422 and "1 key(s)" in error_fields(lowered)["rpm_burst"]
    admin.patch("/v1/admin/tenants/acme", {"rpm_burst": None})
    lowered = admin.patch("/v1/admin/tenants/acme", {"rpm": 310})
    assert lowered.status_code == 200, lowered.text
    lowered = admin.patch("/v1/admin/tenants/acme", {"rpm": 90})
    assert lowered.status_code == 422
    assert set(error_fields(lowered)) == {"rpm"}
    assert admin.get("/v1/admin/tenants/acme").json()["rpm"] == 310


def test_pool_policies_round_trip(harness: Harness, admin: Api) -> None:
    _providers(admin)
    plain = admin.create_pool(
        id="plain",
        members=[
            {"provider_id": "a", "max_concurrency": 8},
            {"provider_id": "b", "max_concurrency": 4},
        ],
    )
    assert plain["admission"] == DEFAULT_ADMISSION | {"max_inflight": 12}  # derived, in force
    assert plain["retry"] == DEFAULT_RETRY and plain["ejection"] == DEFAULT_EJECTION
    assert plain["health_check"] is None

    tuned = admin.create_pool(
        id="tuned",
        members=[{"provider_id": "a"}],
        admission={"max_inflight": 64, "batch": {"max_depth": 10}, "tenant_share": 0.25},
        retry={"max_attempts": 2, "retry_on": ["connect", "503"], "budget_ratio": 0.1},
        ejection={"consecutive_failures": 0},
        health_check={"interval_ms": 1_000},
    )
    assert tuned["admission"] == DEFAULT_ADMISSION | {
        "max_inflight": 64,
        "batch": {"max_depth": 10, "max_wait_ms": 60_000, "weight": 1},
        "tenant_share": 0.25,
    }
    assert tuned["retry"] == DEFAULT_RETRY | {
        "max_attempts": 2,
        "retry_on": ["connect", "503"],
        "budget_ratio": 0.1,
    }
    assert tuned["ejection"] == DEFAULT_EJECTION | {"consecutive_failures": 0}
    assert tuned["health_check"] == {
        "path": "/models",
        "interval_ms": 1_000,
        "timeout_ms": 2_000,
        "unhealthy_after": 2,
    }
    assert admin.get("/v1/admin/pools/tuned").json() == tuned
    sent = {p["id"]: p for p in _payload(harness)["pools"]}
    assert sent["plain"]["admission"]["max_inflight"] is None  # the core derives it
    for name in ("admission", "retry", "ejection", "health_check"):
        assert sent["tuned"][name] == tuned[name]

    changed = admin.patch(
        "/v1/admin/pools/tuned",
        {
            "admission": {"interactive": {"weight": 4}, "max_inflight": None},
            "retry": {"backoff_cap_ms": 500},
            "health_check": None,
        },
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()
    assert body["admission"]["interactive"] == {
        "max_depth": 256,
        "max_wait_ms": 10_000,
        "weight": 4,
    }
    assert body["admission"]["batch"]["max_depth"] == 10
    assert body["admission"]["max_inflight"] is None  # derived: a member without a cap
    assert body["retry"]["backoff_cap_ms"] == 500 and body["retry"]["max_attempts"] == 2
    assert body["health_check"] is None
    audit = admin.get("/v1/admin/audit", action="pool.update").json()["items"][0]
    assert audit["summary"] == {
        "admission": {
            "max_inflight": None,
            "interactive": {"max_depth": 256, "max_wait_ms": 10_000, "weight": 4},
        },
        "retry": {"backoff_cap_ms": 500},
        "health_check": {"enabled": False},
    }
    version = admin.get("/v1/admin/config/version").json()["committed_version"]
    same = admin.patch("/v1/admin/pools/tuned", {"retry": {"backoff_cap_ms": 500}})
    assert same.status_code == 200
    assert admin.get("/v1/admin/config/version").json()["committed_version"] == version


def test_the_core_runs_the_admission_it_was_given(harness: Harness, admin: Api) -> None:
    _providers(admin)
    admin.create_pool(
        id="p",
        members=[{"provider_id": "a"}],
        admission={"max_inflight": 7, "interactive": {"max_depth": 3}},
    )
    families = harness.bridge.metrics_families()
    limits = {tuple(s["labels"]): s["value"] for s in families["sluicegate_queue_limit"]["samples"]}
    assert limits == {("p", "interactive"): 3, ("p", "batch"): 1024}
    inflight = families["sluicegate_pool_inflight_limit"]["samples"]
    assert inflight == [{"labels": ["p"], "value": 7}]


def test_policy_shapes_are_checked_field_by_field(admin: Api) -> None:
    _providers(admin)
    response = admin.post(
        "/v1/admin/pools",
        {
            "members": [{"provider_id": "a"}],
            "admission": {
                "interactive": {"max_depth": -1, "weight": 0},
                "tenant_share": 0,
                "lanes": 2,
            },
            "retry": {"max_attempts": 0, "retry_on": ["connect", "404", "connect"]},
            "ejection": {"max_ejected_percent": 101, "base_ms": None},
            "health_check": {"path": "models"},
        },
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "validation_error"
    assert set(error_fields(response)) == {
        "admission.interactive.max_depth",
        "admission.interactive.weight",
        "admission.tenant_share",
        "admission.lanes",
        "retry.max_attempts",
        "retry.retry_on[1]",
        "ejection.max_ejected_percent",
        "ejection.base_ms",
        "health_check.path",
    }
    admin.create_pool(id="p", members=[{"provider_id": "a"}])
    nulls = admin.patch("/v1/admin/pools/p", {"retry": None, "admission": {"batch": None}})
    assert set(error_fields(nulls)) == {"retry", "admission.batch"}
    twice = admin.patch("/v1/admin/pools/p", {"retry": {"retry_on": ["503", "503"]}})
    assert "more than once" in error_fields(twice)["retry.retry_on"]


def test_operating_ranges_are_the_cores_and_name_the_field(harness: Harness, admin: Api) -> None:
    _providers(admin)
    pool = admin.create_pool(id="p", members=[{"provider_id": "a"}])
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"retry": {"max_attempts": 11}}, "retry.max_attempts", "must be 1 to 10"),
        (
            {"admission": {"batch": {"max_wait_ms": 7_200_000}}},
            "admission.batch.max_wait_ms",
            "must be at most one hour",
        ),
        (
            {"ejection": {"base_ms": 600_000}},
            "ejection.base_ms",
            "must be positive and at most max_ms",
        ),
        (
            {"health_check": {"interval_ms": 50}},
            "health_check.interval_ms",
            "must be at least 100 ms, with a positive timeout",
        ),
    ]
    for body, field, message in cases:
        response = admin.patch("/v1/admin/pools/p", body)
        assert response.status_code == 422, (body, response.text)
        assert response.json()["error"]["code"] == "core_rejected"
        assert error_fields(response) == {field: message}
    assert admin.get("/v1/admin/pools/p").json() == pool
    created = admin.post(
        "/v1/admin/pools",
        {"id": "q", "members": [{"provider_id": "b"}], "retry": {"backoff_cap_ms": 120_000}},
    )
    assert created.status_code == 422
    assert error_fields(created) == {"retry.backoff_cap_ms": "must be at most 60 s"}
    assert admin.get("/v1/admin/pools/q").status_code == 404
