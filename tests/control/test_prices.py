"""Prices are versioned: a change adds a version, old versions never change, lookups by time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.control.helpers import Api, error_fields


def _price(admin: Api, **body: object) -> dict[str, object]:
    response = admin.post(
        "/v1/admin/prices",
        {"model": "chat", "input_micros_per_mtok": 150_000, "output_micros_per_mtok": 600_000}
        | body,
    )
    assert response.status_code == 201, response.text
    data: dict[str, object] = response.json()
    return data


def test_versions_and_the_price_in_force(admin: Api) -> None:
    now = datetime.now(UTC)
    first = _price(admin)
    later = now + timedelta(days=1)
    second = _price(admin, input_micros_per_mtok=100_000, effective_from=later.isoformat())
    assert first["currency"] == "USD" and first["created_by"]

    def in_force(at: datetime) -> object:
        return admin.get("/v1/admin/prices/in-force", model="chat", at=at.isoformat()).json()["id"]

    assert in_force(now + timedelta(hours=1)) == first["id"]
    assert in_force(later + timedelta(seconds=1)) == second["id"]
    assert admin.get("/v1/admin/prices/in-force", model="chat").json()["id"] == first["id"]
    early = admin.get(
        "/v1/admin/prices/in-force", model="chat", at=(now - timedelta(days=1)).isoformat()
    )
    assert early.status_code == 404
    assert admin.get("/v1/admin/prices/in-force", model="other").status_code == 404
    # Versions stay as written.
    assert admin.get(f"/v1/admin/prices/{first['id']}").json() == first
    listed = admin.all_pages("/v1/admin/prices", model="chat")
    assert [p["id"] for p in listed] == [first["id"], second["id"]]


def test_no_version_in_the_past_and_one_currency_per_model(admin: Api) -> None:
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    response = admin.post(
        "/v1/admin/prices",
        {
            "model": "chat",
            "input_micros_per_mtok": 1,
            "output_micros_per_mtok": 1,
            "effective_from": past,
        },
    )
    assert response.status_code == 422 and "past" in error_fields(response)["effective_from"]
    _price(admin)
    euro = admin.post(
        "/v1/admin/prices",
        {
            "model": "chat",
            "input_micros_per_mtok": 1,
            "output_micros_per_mtok": 1,
            "currency": "EUR",
        },
    )
    assert euro.status_code == 422 and "USD" in error_fields(euro)["currency"]


def test_price_validation(admin: Api) -> None:
    response = admin.post(
        "/v1/admin/prices",
        {
            "model": "",
            "input_micros_per_mtok": -1,
            "output_micros_per_mtok": 1.5,
            "currency": "usd",
        },
    )
    assert response.status_code == 422
    assert set(error_fields(response)) == {
        "model",
        "input_micros_per_mtok",
        "output_micros_per_mtok",
        "currency",
    }
    assert admin.get("/v1/admin/prices/0").status_code == 422
    assert admin.get("/v1/admin/prices/123").status_code == 404
