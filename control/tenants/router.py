"""`/v1/admin/tenants`."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit
from control.context import ControlContext
from control.tenants import service
from control.tenants.schemas import TenantCreate, TenantOut, TenantStatus, TenantUpdate

router = APIRouter(prefix="/v1/admin/tenants", tags=["tenants"], responses=ERROR_RESPONSES)


def _default(ctx: ControlContext) -> int:
    return ctx.settings.admin.default_max_keys


@router.post("", status_code=201, summary="Create a tenant")
def create_tenant(body: TenantCreate, caller: CallerDep, ctx: ContextDep) -> TenantOut:
    return service.to_out(service.create(ctx, caller, body), _default(ctx))


@router.get("", summary="List tenants (a tenant token sees its own)")
def list_tenants(
    caller: CallerDep,
    session: SessionDep,
    ctx: ContextDep,
    status: TenantStatus | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[TenantOut]:
    return service.list_page(
        session, caller, status=status, limit=limit, cursor=cursor, default_max_keys=_default(ctx)
    )


@router.get("/{tenant_id}", summary="Get a tenant")
def get_tenant(
    tenant_id: str, caller: CallerDep, session: SessionDep, ctx: ContextDep
) -> TenantOut:
    return service.to_out(service.get(session, caller, tenant_id), _default(ctx))


@router.patch(
    "/{tenant_id}",
    summary="Change a tenant's name, status (disable/enable), limits, allowlist or key cap",
)
def update_tenant(
    tenant_id: str, body: TenantUpdate, caller: CallerDep, ctx: ContextDep
) -> TenantOut:
    return service.to_out(service.update(ctx, caller, tenant_id, body), _default(ctx))
