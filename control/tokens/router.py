"""`/v1/admin/tokens` and `/v1/admin/tenants/{id}/tokens` (admin tokens only)."""

from __future__ import annotations

from fastapi import APIRouter

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.api.schemas import Page, PageLimit
from control.tokens import service
from control.tokens.models import AdminToken
from control.tokens.schemas import TokenCreate, TokenCreated, TokenOut, TokenRole, WhoAmI

router = APIRouter(prefix="/v1/admin", tags=["tokens"], responses=ERROR_RESPONSES)


def _created(pair: tuple[object, str]) -> TokenCreated:
    token, secret = pair
    return TokenCreated(**TokenOut.model_validate(token).model_dump(), token=secret)


@router.post(
    "/tenants/{tenant_id}/tokens",
    status_code=201,
    summary="Create a tenant-scoped admin token (manages that tenant's keys, reads its usage)",
)
def create_tenant_token(
    tenant_id: str, body: TokenCreate, caller: CallerDep, ctx: ContextDep
) -> TokenCreated:
    return _created(service.create(ctx, caller, body.name, tenant_id, body.expires_at))


@router.post("/tokens", status_code=201, summary="Create an admin token")
def create_admin_token(body: TokenCreate, caller: CallerDep, ctx: ContextDep) -> TokenCreated:
    return _created(service.create(ctx, caller, body.name, None, body.expires_at))


@router.get("/tokens", summary="List admin and tenant tokens (never the tokens themselves)")
def list_tokens(
    caller: CallerDep,
    session: SessionDep,
    tenant_id: str | None = None,
    role: TokenRole | None = None,
    limit: PageLimit = 50,
    cursor: str | None = None,
) -> Page[TokenOut]:
    return service.list_page(
        session, caller, tenant_id=tenant_id, role=role, limit=limit, cursor=cursor
    )


@router.delete("/tokens/{token_id}", summary="Revoke a token")
def revoke_token(token_id: str, caller: CallerDep, ctx: ContextDep) -> TokenOut:
    return TokenOut.model_validate(service.revoke(ctx, caller, token_id))


@router.get("/whoami", summary="The calling token: its id, name, role, tenant and expiry")
def whoami(caller: CallerDep, session: SessionDep) -> WhoAmI:
    token = session.get(AdminToken, caller.token_id)
    return WhoAmI(
        token_id=caller.token_id,
        name=caller.name,
        role="admin" if caller.is_admin else "tenant",
        tenant_id=caller.tenant_id,
        expires_at=None if token is None else token.expires_at,
    )
