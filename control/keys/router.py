"""`/v1/admin/keys`: a tenant token sees and manages only its own tenant's keys."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import PRINTABLE, Page, PageLimit, Timestamp
from control.keys import service
from control.keys.repository import KeyFilters
from control.keys.schemas import (
    KeyCreate,
    KeyCreated,
    KeyOut,
    KeyRotate,
    KeyRotated,
    KeyState,
    KeyUpdate,
)

router = APIRouter(prefix="/v1/admin/keys", tags=["keys"], responses=ERROR_RESPONSES)


@router.post(
    "", status_code=201, summary="Create a key (the response is the only time it is shown)"
)
def create_key(body: KeyCreate, caller: CallerDep, ctx: ContextDep) -> KeyCreated:
    out, secret = service.create(ctx, caller, body)
    return KeyCreated(**out.model_dump(), key=secret)


@router.get("", summary="List and search keys")
def list_keys(
    caller: CallerDep,
    session: SessionDep,
    tenant_id: str | None = None,
    prefix: Annotated[
        str | None,
        Query(max_length=12, pattern=PRINTABLE, description="Start of the public prefix"),
    ] = None,
    status: KeyState | None = None,
    expires_before: Timestamp | None = None,
    expires_after: Timestamp | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[KeyOut]:
    filters = KeyFilters(tenant_id, prefix, status, expires_before, expires_after)
    return service.list_page(session, caller, filters, limit, cursor)


@router.get("/{key_id}", summary="Get a key")
def get_key(key_id: str, caller: CallerDep, session: SessionDep) -> KeyOut:
    return service.get(session, caller, key_id)


@router.patch("/{key_id}", summary="Change a key's name, status, models, limits, priority, expiry")
def update_key(key_id: str, body: KeyUpdate, caller: CallerDep, ctx: ContextDep) -> KeyOut:
    return service.update(ctx, caller, key_id, body)


@router.post("/{key_id}/rotate", summary="Issue a new secret; the old one may overlap for a while")
def rotate_key(key_id: str, body: KeyRotate, caller: CallerDep, ctx: ContextDep) -> KeyRotated:
    new, secret, previous = service.rotate(ctx, caller, key_id, body)
    return KeyRotated(key=KeyCreated(**new.model_dump(), key=secret), previous=previous)


@router.post("/{key_id}/revoke", summary="Revoke a key: refused by the gateway from now on")
def revoke_key(key_id: str, caller: CallerDep, ctx: ContextDep) -> KeyOut:
    return service.revoke(ctx, caller, key_id)
