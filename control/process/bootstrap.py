"""What the process creates at start: the admin token, and the `[bootstrap]` objects of the
config file that do not exist yet (matched by id; existing objects are never changed)."""

from __future__ import annotations

import os

from sqlalchemy import select

from control.api.caller import SYSTEM
from control.api.errors import ControlError, StartupError
from control.context import ControlContext
from control.pools import service as pools
from control.pools.models import Pool
from control.prices import repository as price_repository
from control.prices import service as prices
from control.process.settings import BootstrapSettings
from control.providers import service as providers
from control.providers.models import Provider
from control.providers.schemas import ProviderCreate
from control.routes import service as routes
from control.routes.models import Route
from control.tenants import service as tenants
from control.tenants.models import Tenant
from control.timeutil import utcnow
from control.tokens import repository as token_repository
from control.tokens.hashing import HMAC_SHA256
from control.tokens.models import AdminToken
from control.tokens.service import new_token, usable

BOOTSTRAP_TOKEN = "bootstrap"


def ensure_admin_token(ctx: ControlContext) -> str | None:
    """The configured token becomes the bootstrap admin token (replacing an earlier one; a row
    of an older release, stored as SHA-256, is rewritten as HMAC). Without one, and without any
    usable admin token, a token is generated: returned to be shown once."""
    configured = ctx.settings.secrets.admin_token
    with ctx.mutator.mutate(SYSTEM, affects_core=False) as m:
        if configured is not None:
            secret = configured.get_secret_value()
            existing = token_repository.find(m.session, ctx.pepper, secret)
            if existing is not None:
                if existing.revoked_at is not None or existing.role != "admin":
                    raise StartupError(
                        "the configured admin token was revoked or is not an admin token"
                    )
                if existing.hash_scheme != HMAC_SHA256:
                    token_repository.upgrade_hash(m.session, existing.id, ctx.pepper, secret)
                    m.record("token.rehash", "token", existing.id, {"scheme": HMAC_SHA256})
                return None
            earlier = m.session.scalars(
                select(AdminToken).where(
                    AdminToken.name == BOOTSTRAP_TOKEN,
                    AdminToken.created_by.is_(None),
                    AdminToken.revoked_at.is_(None),
                )
            ).all()
            for token in earlier:
                token.revoked_at = utcnow()
                m.record("token.revoke", "token", token.id, {"reason": "replaced by config"})
            token, _ = new_token(ctx.pepper, BOOTSTRAP_TOKEN, "admin", None, None, secret=secret)
            token.prefix = "config"
            m.session.add(token)
            m.record("token.create", "token", token.id, {"source": "config", "role": "admin"})
            return None
        active = m.session.scalars(
            select(AdminToken.id).where(AdminToken.role == "admin", usable(utcnow()))
        ).first()
        if active is not None:
            return None
        token, secret = new_token(ctx.pepper, BOOTSTRAP_TOKEN, "admin", None, None)
        m.session.add(token)
        m.record("token.create", "token", token.id, {"source": "generated", "role": "admin"})
    return secret


def _missing(ctx: ControlContext, model: type, ident: str) -> bool:
    with ctx.sessions() as session:
        return session.get(model, ident) is None


def apply_bootstrap(ctx: ControlContext, spec: BootstrapSettings) -> list[str]:
    """Create what is missing, in dependency order; returns `kind:id` of what was created."""
    created: list[str] = []
    ids: dict[str, list[str | None]] = {
        "tenants": [t.id for t in spec.tenants],
        "providers": [p.id for p in spec.providers],
        "pools": [p.id for p in spec.pools],
    }
    for section, values in ids.items():
        for i, value in enumerate(values):
            if value is None:
                raise StartupError(f"bootstrap.{section}[{i}] needs an id")
    try:
        for tenant in spec.tenants:
            assert tenant.id is not None
            if _missing(ctx, Tenant, tenant.id):
                tenants.create(ctx, SYSTEM, tenant)
                created.append(f"tenant:{tenant.id}")
        for entry in spec.providers:
            assert entry.id is not None
            if _missing(ctx, Provider, entry.id):
                data = ProviderCreate(**entry.model_dump(exclude={"credential_env"}))
                if entry.credential_env is not None:
                    value = os.environ.get(entry.credential_env)
                    if not value:
                        raise StartupError(
                            f"bootstrap provider {entry.id!r}: environment variable "
                            f"{entry.credential_env} is not set"
                        )
                    data = data.model_copy(update={"credential": value})
                providers.create(ctx, SYSTEM, data)
                created.append(f"provider:{entry.id}")
        for pool in spec.pools:
            assert pool.id is not None
            if _missing(ctx, Pool, pool.id):
                pools.create(ctx, SYSTEM, pool)
                created.append(f"pool:{pool.id}")
        for route in spec.routes:
            if _missing(ctx, Route, route.alias):
                routes.create(ctx, SYSTEM, route)
                created.append(f"route:{route.alias}")
        for price in spec.prices:
            with ctx.sessions() as session:
                priced = price_repository.currency_of(session, price.model) is not None
            if not priced:
                prices.create(ctx, SYSTEM, price)
                created.append(f"price:{price.model}")
    except ControlError as e:
        raise StartupError(f"bootstrap: {e.message}") from None
    return created
