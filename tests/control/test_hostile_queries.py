"""Values a caller controls that Python's own types cannot hold (a time an offset moves past year
9999, an integer beyond 64 bits, JSON nested past the decoder's depth) are field errors in the
API's format, not 500s."""

from __future__ import annotations

import base64
import json

from tests.control.helpers import Api, error_fields

# Inside `datetime`'s range as written, outside it once moved to UTC.
PAST_THE_END = "9999-12-31T23:30:00-01:00"
BEFORE_THE_START = "0001-01-01T00:30:00+01:00"


def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _refused(response_of: Api, path: str, field: str, **params: str) -> None:
    response = response_of.get(path, **params)
    assert response.status_code == 422, (path, params, response.text)
    assert field in error_fields(response), response.text


def test_a_time_an_offset_moves_out_of_range_is_a_field_error(admin: Api) -> None:
    admin.create_tenant(id="acme", name="Acme")
    key = admin.create_key(tenant_id="acme", name="k")
    for moment in (PAST_THE_END, BEFORE_THE_START):
        _refused(admin, "/v1/admin/usage", "since", since=moment)
        _refused(admin, "/v1/admin/keys", "expires_before", expires_before=moment)
        _refused(admin, f"/v1/admin/keys/{key['id']}/usage/series", "from", **{"from": moment})
        _refused(admin, "/v1/admin/prices/in-force", "at", at=moment)
        created = admin.post(
            "/v1/admin/keys", {"tenant_id": "acme", "name": "n", "expires_at": moment}
        )
        assert created.status_code == 422, created.text
        assert "expires_at" in error_fields(created)
        changed = admin.patch(f"/v1/admin/keys/{key['id']}", {"expires_at": moment})
        assert changed.status_code == 422 and "expires_at" in error_fields(changed)


def test_an_integer_cursor_beyond_64_bits_is_a_field_error(admin: Api) -> None:
    for value in (2**63, -(2**64)):
        cursor = _cursor(json.dumps({"after": value}).encode())
        for path in ("/v1/admin/prices", "/v1/admin/audit"):
            _refused(admin, path, "cursor", cursor=cursor)
    # A cursor past every row is still a cursor: an empty page.
    last = admin.get("/v1/admin/prices", cursor=_cursor(json.dumps({"after": 2**31 - 1}).encode()))
    assert last.status_code == 200 and last.json()["items"] == [], last.text


def test_a_cursor_nested_past_the_decoders_depth_or_too_long_is_a_field_error(admin: Api) -> None:
    nested = b'{"after":' + b"[" * 1500 + b"]" * 1500 + b"}"
    _refused(admin, "/v1/admin/tenants", "cursor", cursor=_cursor(nested))
    _refused(
        admin, "/v1/admin/tenants", "cursor", cursor=_cursor(b'{"after":"' + b"a" * 5000 + b'"}')
    )


def test_a_usage_cursor_past_the_ranges_is_a_field_error(admin: Api) -> None:
    for text in (f"{PAST_THE_END}|1", f"2026-01-01T00:00:00+00:00|{2**63}"):
        cursor = _cursor(json.dumps({"after": text}).encode())
        _refused(admin, "/v1/admin/usage", "cursor", cursor=cursor)
