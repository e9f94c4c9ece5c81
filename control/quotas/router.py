"""Quota use and resets: `/v1/admin/keys/{key_id}/quota` and `/v1/admin/tenants/{tenant_id}/quota`.
Quotas themselves are set with the key or tenant (`quota` in POST and PATCH)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.quotas import service
from control.quotas.schemas import QuotaStatus

router = APIRouter(tags=["quotas"], responses=ERROR_RESPONSES)


@router.get("/v1/admin/keys/{key_id}/quota", summary="A key's quota and its use this period")
def key_quota(key_id: str, caller: CallerDep, session: SessionDep) -> QuotaStatus:
    return service.key_status(session, caller, key_id)


@router.post(
    "/v1/admin/keys/{key_id}/quota/reset",
    summary="Start a key's quota count again from now (audited)",
)
def reset_key_quota(key_id: str, caller: CallerDep, ctx: ContextDep) -> QuotaStatus:
    return service.reset_key(ctx, caller, key_id)


@router.get(
    "/v1/admin/tenants/{tenant_id}/quota", summary="A tenant's quota and its use this period"
)
def tenant_quota(tenant_id: str, caller: CallerDep, session: SessionDep) -> QuotaStatus:
    return service.tenant_status(session, caller, tenant_id)


@router.post(
    "/v1/admin/tenants/{tenant_id}/quota/reset",
    summary="Start a tenant's quota count again from now (admin tokens; audited)",
)
def reset_tenant_quota(tenant_id: str, caller: CallerDep, ctx: ContextDep) -> QuotaStatus:
    return service.reset_tenant(ctx, caller, tenant_id)
