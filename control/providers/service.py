"""Provider operations (admin only). Credentials are encrypted before they reach the session;
the audit log and every response carry only their mask and fingerprint."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from control.api.caller import Caller
from control.api.errors import Conflict, NotFound, Validation
from control.api.pagination import decode_cursor, page
from control.api.schemas import Page
from control.context import ControlContext
from control.crypto import fingerprint, mask
from control.ids import new_id
from control.providers import repository
from control.providers.models import Provider
from control.providers.schemas import ProviderCreate, ProviderKind, ProviderOut, ProviderUpdate
from control.providers.urls import UnsafeURL, check_base_url
from control.timeutil import utcnow


def get(session: Session, caller: Caller, provider_id: str) -> Provider:
    caller.require_admin()
    provider = repository.get(session, provider_id)
    if provider is None:
        raise NotFound("provider not found")
    return provider


def list_page(
    session: Session, caller: Caller, kind: ProviderKind | None, limit: int, cursor: str | None
) -> Page[ProviderOut]:
    caller.require_admin()
    rows = repository.page(session, kind=kind, after=decode_cursor(cursor, str), limit=limit)
    items, next_cursor = page(rows, limit, lambda p: p.id)
    return Page(items=[ProviderOut.model_validate(p) for p in items], next_cursor=next_cursor)


def _safe_url(ctx: ControlContext, url: str, internal: bool) -> str:
    try:
        return check_base_url(url, internal=internal, own=ctx.own_endpoints())
    except UnsafeURL as e:
        raise Validation.field("base_url", str(e)) from None


def _check_kind_fields(kind: str, api_version: str | None, auth_header: str | None) -> None:
    """Each kind's own fields: Azure's API version (required there), openai's auth header."""
    if kind == "azure_openai" and api_version is None:
        raise Validation.field("api_version", "is required for azure_openai providers")
    if kind != "azure_openai" and api_version is not None:
        raise Validation.field("api_version", "is for azure_openai providers")
    if kind != "openai" and auth_header is not None:
        raise Validation.field("auth_header", "is for openai providers (the others' is fixed)")


def _set_credential(ctx: ControlContext, provider: Provider, credential: str | None) -> None:
    if credential is None:
        provider.credential_ciphertext = None
        provider.credential_mask = None
        provider.credential_fingerprint = None
    else:
        provider.credential_ciphertext = ctx.cipher.encrypt(credential)
        provider.credential_mask = mask(credential)
        provider.credential_fingerprint = fingerprint(credential)


def _credential_summary(provider: Provider) -> dict[str, Any]:
    return {
        "credential_mask": provider.credential_mask,
        "credential_fingerprint": provider.credential_fingerprint,
    }


def create(ctx: ControlContext, caller: Caller, data: ProviderCreate) -> Provider:
    caller.require_admin()
    provider_id = data.id or new_id("prv")
    _check_kind_fields(data.kind, data.api_version, data.auth_header)
    base_url = _safe_url(ctx, data.base_url, data.internal)
    with ctx.mutator.mutate(caller, subject=("provider", provider_id)) as m:
        if repository.get(m.session, provider_id) is not None:
            raise Conflict(f"provider {provider_id!r} already exists")
        now = utcnow()
        provider = Provider(
            id=provider_id,
            name=data.name or provider_id,
            kind=data.kind,
            base_url=base_url,
            internal=data.internal,
            headers=data.headers,
            forward_headers=data.forward_headers,
            api_version=data.api_version,
            auth_header=data.auth_header.lower() if data.auth_header else None,
            created_at=now,
            updated_at=now,
        )
        _set_credential(ctx, provider, data.credential)
        m.session.add(provider)
        summary = data.model_dump(exclude={"credential"}, exclude_none=True)
        summary |= {"id": provider_id, "base_url": base_url} | _credential_summary(provider)
        m.record("provider.create", "provider", provider_id, summary)
    return provider


def update(ctx: ControlContext, caller: Caller, provider_id: str, data: ProviderUpdate) -> Provider:
    caller.require_admin()
    sent = data.model_fields_set
    with ctx.mutator.mutate(caller, subject=("provider", provider_id)) as m:
        provider = repository.get(m.session, provider_id)
        if provider is None:
            raise NotFound("provider not found")
        summary: dict[str, Any] = {}
        if data.name is not None and data.name != provider.name:
            provider.name = summary["name"] = data.name
        internal = provider.internal if data.internal is None else data.internal
        if "base_url" in sent or internal != provider.internal:
            base_url = _safe_url(ctx, data.base_url or provider.base_url, internal)
            if base_url != provider.base_url:
                provider.base_url = summary["base_url"] = base_url
            if internal != provider.internal:
                provider.internal = summary["internal"] = internal
        for field in ("headers", "forward_headers", "api_version"):
            value = getattr(data, field)
            if value is not None and value != getattr(provider, field):
                setattr(provider, field, value)
                summary[field] = value
        if "auth_header" in sent:
            auth_header = data.auth_header.lower() if data.auth_header else None
            if auth_header != provider.auth_header:
                provider.auth_header = summary["auth_header"] = auth_header
        _check_kind_fields(provider.kind, provider.api_version, provider.auth_header)
        if "credential" in sent:
            before = provider.credential_fingerprint
            _set_credential(ctx, provider, data.credential)
            if provider.credential_fingerprint != before:
                summary |= _credential_summary(provider)
        if summary:
            provider.updated_at = utcnow()
            m.record("provider.update", "provider", provider_id, summary)
    return provider


def delete(ctx: ControlContext, caller: Caller, provider_id: str) -> None:
    caller.require_admin()
    with ctx.mutator.mutate(caller, subject=("provider", provider_id)) as m:
        provider = repository.get(m.session, provider_id)
        if provider is None:
            raise NotFound("provider not found")
        pools = repository.pools_using(m.session, provider_id)
        if pools:
            raise Conflict(f"the provider is a member of pools {', '.join(pools)}; remove it first")
        m.session.delete(provider)
        m.record("provider.delete", "provider", provider_id, {"kind": provider.kind})
