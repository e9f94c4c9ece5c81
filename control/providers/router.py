"""`/v1/admin/providers` (admin tokens only)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit
from control.providers import service
from control.providers.schemas import ProviderCreate, ProviderKind, ProviderOut, ProviderUpdate

router = APIRouter(prefix="/v1/admin/providers", tags=["providers"], responses=ERROR_RESPONSES)


@router.post("", status_code=201, summary="Register an upstream provider")
def create_provider(body: ProviderCreate, caller: CallerDep, ctx: ContextDep) -> ProviderOut:
    return ProviderOut.model_validate(service.create(ctx, caller, body))


@router.get("", summary="List providers")
def list_providers(
    caller: CallerDep,
    session: SessionDep,
    kind: ProviderKind | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[ProviderOut]:
    return service.list_page(session, caller, kind, limit, cursor)


@router.get("/{provider_id}", summary="Get a provider (never its credential)")
def get_provider(provider_id: str, caller: CallerDep, session: SessionDep) -> ProviderOut:
    return ProviderOut.model_validate(service.get(session, caller, provider_id))


@router.patch("/{provider_id}", summary="Change a provider's name, base URL or credential")
def update_provider(
    provider_id: str, body: ProviderUpdate, caller: CallerDep, ctx: ContextDep
) -> ProviderOut:
    return ProviderOut.model_validate(service.update(ctx, caller, provider_id, body))


@router.delete("/{provider_id}", status_code=204, summary="Delete a provider no pool uses")
def delete_provider(provider_id: str, caller: CallerDep, ctx: ContextDep) -> None:
    service.delete(ctx, caller, provider_id)
