"""Who presents a token: found under its hash scheme, unexpired and unrevoked, its tenant
enabled (a tenant-scoped token of a disabled tenant is refused with 403 `tenant_disabled`), and
within its call rate (429 `rate_limited`). Runs once per admin request, in front of the app
(`gate.py`), before the body is read.

Two writes may follow, each in a short transaction of its own and never failing the call: the
row of an older release rewritten as HMAC, and `last_used_at`, at most once a minute per token.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError

from control.api.errors import RateLimited, TenantDisabled, Unauthorized
from control.context import ControlContext
from control.tenants.models import Tenant
from control.timeutil import utcnow
from control.tokens import repository
from control.tokens.hashing import HMAC_SHA256
from control.tokens.models import AdminToken

log = logging.getLogger("sluicegate.control")

LAST_USE_EVERY = timedelta(minutes=1)


@dataclass(frozen=True)
class Identity:
    token_id: str
    name: str
    role: str
    tenant_id: str | None


def bearer_token(authorization: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (the scheme in any case), else None."""
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def identify(ctx: ControlContext, secret: str | None) -> Identity:
    if not secret:
        raise Unauthorized("missing `Authorization: Bearer <admin token>`")
    now = utcnow()
    with ctx.sessions() as session:
        token = repository.find(session, ctx.pepper, secret)
        if token is None or token.revoked_at is not None:
            raise Unauthorized("unknown or revoked admin token")
        if token.expires_at is not None and token.expires_at <= now:
            raise Unauthorized("expired admin token")
        if token.tenant_id is not None:
            tenant = session.get(Tenant, token.tenant_id)
            if tenant is None or tenant.status != "active":
                raise TenantDisabled("the token's tenant is disabled")
    identity = Identity(token.id, token.name, token.role, token.tenant_id)
    wait = ctx.admin_limits.take(token.role, token.id)
    if wait > 0:
        raise RateLimited("this token's admin API call rate is spent; retry later", wait)
    upgrade = token.hash_scheme != HMAC_SHA256
    stale = token.last_used_at is None or now - token.last_used_at >= LAST_USE_EVERY
    if upgrade or stale:
        _record_use(ctx, token.id, secret if upgrade else None, now if stale else None)
    return identity


def _record_use(
    ctx: ControlContext, token_id: str, secret: str | None, used_at: datetime | None
) -> None:
    try:
        with ctx.sessions() as session, session.begin():
            if secret is not None:
                repository.upgrade_hash(session, token_id, ctx.pepper, secret)
            if used_at is not None:
                session.execute(
                    update(AdminToken).where(AdminToken.id == token_id).values(last_used_at=used_at)
                )
    except SQLAlchemyError:
        # Bookkeeping only: the next call (or the next minute) tries again.
        log.warning("could not record the use of admin token %s", token_id, exc_info=True)
