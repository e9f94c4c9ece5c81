"""Pools and routes: members, timeouts, chains, referential checks."""

from __future__ import annotations

from tests.control.helpers import Api, error_fields


def _providers(admin: Api) -> None:
    admin.create_provider(id="a", base_url="http://127.0.0.1:9001/v1", credential="sk-aaaaaaaaaa")
    admin.create_provider(id="b", base_url="http://127.0.0.1:9002/v1")
    admin.create_provider(id="claude", kind="anthropic", base_url="http://127.0.0.1:9003/v1")


def test_create_pool_with_members_and_timeouts(admin: Api) -> None:
    _providers(admin)
    pool = admin.create_pool(
        id="main",
        members=[
            {"provider_id": "a", "weight": 3, "max_concurrency": 16},
            {"id": "b-h2", "provider_id": "b", "http2": True},
        ],
        timeouts={"connect_ms": 1000, "total_ms": 30000},
    )
    assert [(m["id"], m["weight"], m["http2"], m["kind"]) for m in pool["members"]] == [
        ("a", 3, False, "openai"),
        ("b-h2", 1, True, "openai"),
    ]
    assert pool["timeouts"] == {
        "connect_ms": 1000,
        "first_byte_ms": 120000,
        "idle_ms": 60000,
        "total_ms": 30000,
    }
    assert admin.get("/v1/admin/pools/main").json() == pool
    assert [p["id"] for p in admin.all_pages("/v1/admin/pools")] == ["main"]


def test_member_errors_name_the_member(admin: Api) -> None:
    _providers(admin)
    response = admin.post(
        "/v1/admin/pools",
        {
            "members": [
                {"provider_id": "a", "weight": 0},
                {"provider_id": "a", "weight": 0},
                {"provider_id": "claude", "weight": 0},
                {"provider_id": "ghost", "weight": 0},
            ]
        },
    )
    assert response.status_code == 422
    fields = error_fields(response)
    assert set(fields) == {
        "members[1].id",
        "members[2].provider_id",
        "members[3].provider_id",
        "members",
    }
    assert "anthropic" in fields["members[2].provider_id"]
    empty = admin.post("/v1/admin/pools", {"members": []})
    assert empty.status_code == 422 and "members" in error_fields(empty)


def test_update_pool_members_and_timeouts(admin: Api) -> None:
    _providers(admin)
    admin.create_pool(id="main", members=[{"provider_id": "a"}])
    updated = admin.patch(
        "/v1/admin/pools/main",
        {
            "members": [{"provider_id": "b"}, {"provider_id": "a", "weight": 2}],
            "timeouts": {"idle_ms": 5},
        },
    )
    assert updated.status_code == 200, updated.text
    body = updated.json()
    assert [(m["id"], m["weight"]) for m in body["members"]] == [("b", 1), ("a", 2)]
    assert body["timeouts"]["idle_ms"] == 5 and body["timeouts"]["connect_ms"] == 5000
    null = admin.patch("/v1/admin/pools/main", {"timeouts": {"idle_ms": None}})
    assert null.status_code == 422 and "timeouts.idle_ms" in error_fields(null)


def test_routes_chain_and_fallbacks(admin: Api) -> None:
    _providers(admin)
    admin.create_pool(id="primary", members=[{"provider_id": "a"}])
    admin.create_pool(id="backup", members=[{"provider_id": "b"}])
    route = admin.create_route(
        alias="meta-llama/Llama-3-8B",
        chain=[{"pool": "primary", "model": "llama3"}, {"pool": "backup", "model": "llama3-q4"}],
        max_output_tokens=4096,
    )
    assert route["chain"][1] == {"pool": "backup", "model": "llama3-q4"}
    assert admin.get("/v1/admin/routes/meta-llama/Llama-3-8B").json() == route
    assert [r["alias"] for r in admin.all_pages("/v1/admin/routes", pool="backup")] == [
        "meta-llama/Llama-3-8B"
    ]
    assert admin.all_pages("/v1/admin/routes", pool="nothing") == []

    changed = admin.patch(
        "/v1/admin/routes/meta-llama/Llama-3-8B",
        {"chain": [{"pool": "backup", "model": "x"}], "max_output_tokens": None},
    ).json()
    assert changed["chain"] == [{"pool": "backup", "model": "x"}]
    assert changed["max_output_tokens"] is None


def test_route_errors(admin: Api) -> None:
    _providers(admin)
    admin.create_pool(id="primary", members=[{"provider_id": "a"}])
    response = admin.post(
        "/v1/admin/routes",
        {
            "alias": "chat",
            "chain": [
                {"pool": "primary", "model": "m"},
                {"pool": "primary", "model": "m2"},
                {"pool": "ghost", "model": "m"},
            ],
        },
    )
    assert response.status_code == 422
    assert set(error_fields(response)) == {"chain[1].pool", "chain[2].pool"}
    admin.create_route(alias="chat", chain=[{"pool": "primary", "model": "m"}])
    assert (
        admin.post(
            "/v1/admin/routes", {"alias": "chat", "chain": [{"pool": "primary", "model": "m"}]}
        ).status_code
        == 409
    )
    bad = admin.post("/v1/admin/routes", {"alias": " spaces ", "chain": []})
    assert bad.status_code == 422 and set(error_fields(bad)) == {"alias", "chain"}


def test_pool_used_by_a_route_cannot_be_deleted(admin: Api) -> None:
    _providers(admin)
    admin.create_pool(id="primary", members=[{"provider_id": "a"}])
    admin.create_route(alias="chat", chain=[{"pool": "primary", "model": "m"}])
    response = admin.delete("/v1/admin/pools/primary")
    assert response.status_code == 409 and "chat" in response.json()["error"]["message"]
    assert admin.delete("/v1/admin/routes/chat").status_code == 204
    assert admin.delete("/v1/admin/pools/primary").status_code == 204
    assert admin.get("/v1/admin/routes/chat").status_code == 404
