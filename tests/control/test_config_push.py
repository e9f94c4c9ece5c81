"""Every change is applied to the core before it commits; a refusal rolls it back (ACK/NACK)."""

from __future__ import annotations

import json
import threading

from sluicegate._core import ConfigError, StaleConfigError

from control.bridge.mutation import core_rejection
from control.bridge.snapshot import Snapshot, SnapshotIndex
from tests.control.helpers import Api, Harness, error_fields


def _pool_body(total_ms: int) -> dict[str, object]:
    return {"id": "big", "members": [{"provider_id": "p"}], "timeouts": {"total_ms": total_ms}}


def test_versions_are_acknowledged_by_the_core(harness: Harness, admin: Api) -> None:
    first = admin.get("/v1/admin/config/version").json()
    assert first["acknowledged_version"] == first["committed_version"] >= 1
    assert first["last_rejection"] is None
    admin.create_tenant(id="acme", name="Acme")
    after = admin.get("/v1/admin/config/version").json()
    assert (
        after["acknowledged_version"]
        == after["committed_version"]
        == first["committed_version"] + 1
    )
    assert harness.bridge.core_version == after["acknowledged_version"]
    audit = admin.get("/v1/admin/audit", action="tenant.create").json()["items"][0]
    assert audit["config_version"] == after["committed_version"]


def test_a_refused_snapshot_rolls_the_change_back(harness: Harness, admin: Api) -> None:
    admin.create_provider(id="p", base_url="http://127.0.0.1:9001/v1")
    before = admin.get("/v1/admin/config/version").json()
    # The core accepts timeouts of 1 ms to 24 h; the API only checks the shape.
    response = admin.post("/v1/admin/pools", _pool_body(25 * 3600 * 1000))
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "core_rejected"
    assert "pool 'big'" in error["message"]
    assert error_fields(response) == {"timeouts.total_ms": "must be 1 ms to 24 h"}

    assert admin.get("/v1/admin/pools/big").status_code == 404
    after = admin.get("/v1/admin/config/version").json()
    assert after["committed_version"] == before["committed_version"]
    assert after["acknowledged_version"] == before["acknowledged_version"]
    rejection = after["last_rejection"]
    assert rejection["version"] == before["committed_version"] + 1
    assert "timeouts.total_ms" in rejection["message"]
    # The core still runs the previous snapshot, and the next change reuses the version.
    assert harness.bridge.core_version == before["acknowledged_version"]
    admin.create_pool(**_pool_body(60_000))  # type: ignore[arg-type]
    assert admin.get("/v1/admin/config/version").json()["committed_version"] == rejection["version"]

    refused = admin.get("/v1/admin/audit", action="config.rejected").json()["items"]
    assert len(refused) == 1 and refused[0]["resource_id"] == "big"
    assert refused[0]["summary"]["attempted"] == ["pool.create pool:big"]
    assert (
        admin.get("/v1/admin/audit", action="pool.create").json()["items"][0]["summary"][
            "timeouts"
        ]["total_ms"]
        == 60_000
    )


def test_a_refusal_caused_by_an_update_keeps_the_old_values(admin: Api) -> None:
    admin.create_provider(id="p", base_url="http://127.0.0.1:9001/v1")
    admin.create_pool(**_pool_body(60_000))  # type: ignore[arg-type]
    response = admin.patch("/v1/admin/pools/big", {"timeouts": {"connect_ms": 10**11}})
    assert response.status_code == 422
    assert error_fields(response) == {"timeouts.connect_ms": "must be 1 ms to 24 h"}
    assert admin.get("/v1/admin/pools/big").json()["timeouts"]["connect_ms"] == 5000


def test_concurrent_changes_get_increasing_versions(harness: Harness, admin: Api) -> None:
    start = admin.get("/v1/admin/config/version").json()["committed_version"]
    errors: list[str] = []

    def create(i: int) -> None:
        response = admin.post("/v1/admin/tenants", {"id": f"t{i}", "name": f"T{i}"})
        if response.status_code != 201:
            errors.append(response.text)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    versions = [
        e["config_version"] for e in admin.all_pages("/v1/admin/audit", action="tenant.create")
    ]
    assert sorted(versions) == list(range(start + 1, start + 9))
    state = admin.get("/v1/admin/config/version").json()
    assert state["acknowledged_version"] == state["committed_version"] == start + 8
    # The core runs a snapshot holding all eight tenants.
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    assert {t["id"] for t in payload["tenants"]} == {f"t{i}" for i in range(8)}


def test_the_snapshot_matches_what_the_core_accepts(
    harness: Harness, admin: Api, world: dict[str, object]
) -> None:
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    assert set(payload) == {"auth", "tenants", "keys", "pools", "routes", "prices"}
    assert payload["pools"][0]["members"][0] == {
        "id": "up1",
        "kind": "openai",
        "base_url": "http://127.0.0.1:9/v1",
        "credential": "sk-up-1-abcdefgh",
        "weight": 1,
        "max_concurrency": None,
        "http2": False,
        "internal": False,
        "headers": {},
        "forward_headers": [],
    }
    key = payload["keys"][0]
    assert set(key) == {
        "id",
        "tenant_id",
        "hash",
        "prefix",
        "status",
        "expires_at",
        "models",
        "priority",
        "limits",
        "quota",
    }
    assert key["quota"] is None and payload["tenants"][0]["quota"] is None
    assert payload["tenants"][0]["limits"] == {
        "rpm": 600,
        "tpm": 100_000,
        "max_concurrency": 20,
        "rpm_burst": None,  # the core's default: one minute's worth
        "tpm_burst": None,
    }
    pool = payload["pools"][0]
    assert set(pool) == {"id", "members", "timeouts", "admission", "retry", "ejection"} | {
        "health_check"
    }
    assert pool["admission"]["max_inflight"] is None and pool["health_check"] is None
    assert pool["retry"]["max_attempts"] == 3 and pool["ejection"]["max_ejected_percent"] == 50
    # Applying it again as a newer version is accepted as-is.
    version = harness.bridge.core_version
    assert version is not None
    assert harness.bridge.apply(version + 1, json.dumps(payload)) == version + 1


def test_a_core_ahead_of_the_database_is_resynchronized(harness: Harness, admin: Api) -> None:
    # As after a commit that failed once the core had acknowledged (and a resync that failed too):
    # the core runs a version the database never committed.
    with harness.ctx.sessions() as session:
        payload = harness.ctx.mutator.snapshot(session).payload
    ahead = (harness.bridge.core_version or 0) + 5
    harness.bridge.apply(ahead, payload)
    admin.create_tenant(id="acme", name="Acme")
    state = admin.get("/v1/admin/config/version").json()
    assert state["committed_version"] == state["acknowledged_version"] == ahead + 1
    assert harness.bridge.core_version == ahead + 1
    assert state["last_rejection"] is None  # a stale version is not a refusal of the change
    audit = admin.get("/v1/admin/audit", action="tenant.create").json()["items"][0]
    assert audit["config_version"] == ahead + 1


def test_refusals_are_told_in_the_api_s_words() -> None:
    index = SnapshotIndex(
        tenants=["acme"], keys=["key_1"], pools=["big"], members={(0, 1): "prov"}, routes=["chat"]
    )
    snapshot = Snapshot("{}", index)

    def field_of(path: str, subject: tuple[str, str] | None) -> dict[str, str]:
        error = ConfigError(f"invalid config: {path}: nope", path, "nope")
        return {f.field: f.message for f in core_rejection(error, snapshot, subject).fields}

    assert field_of("tenants[0].limits.rpm_burst", ("tenant", "acme")) == {"rpm_burst": "nope"}
    assert field_of("keys[0].limits.tpm_burst", ("key", "key_1")) == {"tpm_burst": "nope"}
    assert field_of("pools[0].admission.batch.max_wait_ms", ("pool", "big")) == {
        "admission.batch.max_wait_ms": "nope"
    }
    assert field_of("pools[0].members[1].base_url", ("provider", "prov")) == {"base_url": "nope"}
    assert field_of("pools[0].retry.max_attempts", ("route", "chat")) == {
        "pool:big.retry.max_attempts": "nope"
    }
    # Paths that name no entry of the snapshot: the message only, no field.
    for path in ("auth.key_pepper", "pools[7].id", "pools.x[y]"):
        rejected = core_rejection(ConfigError("m", path, "nope"), snapshot, ("pool", "big"))
        assert rejected.fields == [] and rejected.message.endswith(": m")
    stale = core_rejection(StaleConfigError("config version 1 is older"), snapshot, None)
    assert stale.fields == [] and "older" in stale.message
