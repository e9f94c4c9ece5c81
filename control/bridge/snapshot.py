"""The whole data-plane snapshot, built from the database: exactly the JSON that
`proxy_core/src/config/model.rs` (`ConfigPayload`) accepts, unknown fields being refused there.

The index remembers which row became which list entry, so that the core's refusal can be told
in the API's words (`refusal.py`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, or_, select, true
from sqlalchemy.orm import Session

from control.crypto import CredentialCipher
from control.keys.models import ApiKey
from control.pools.models import Pool
from control.pools.policies import Admission, Ejection, HealthCheck, Retry, read
from control.prices.models import Price
from control.providers.models import Provider
from control.quotas import ledger
from control.quotas.periods import core_period_start
from control.routes.models import Route
from control.tenants.models import Tenant
from control.timeutil import to_unix, utcnow


@dataclass
class SnapshotIndex:
    tenants: list[str] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    pools: list[str] = field(default_factory=list)
    # (pool index, member index) -> provider id
    members: dict[tuple[int, int], str] = field(default_factory=dict)
    routes: list[str] = field(default_factory=list)


@dataclass
class Snapshot:
    payload: str
    index: SnapshotIndex
    # The moment it was built: keys expired by then are not in it.
    at: datetime | None = None


def _limits(
    rpm: int | None,
    tpm: int | None,
    max_concurrency: int | None,
    rpm_burst: int | None,
    tpm_burst: int | None,
) -> dict[str, Any]:
    # An unset burst goes as null: the core makes it one minute's worth.
    return {
        "rpm": rpm,
        "tpm": tpm,
        "max_concurrency": max_concurrency,
        "rpm_burst": rpm_burst,
        "tpm_burst": tpm_burst,
    }


def _quota(
    period: str | None,
    tokens: int | None,
    cost_micros: int | None,
    anchor: int | None,
    use: tuple[int, int],
    now: int,
) -> dict[str, Any] | None:
    """A quota as the core takes it: the ledger's use of the counted period, and the moment the
    core should take that figure (see `control/quotas/models.py`)."""
    if period is None:
        return None
    return {
        "period": period,
        "tokens": tokens,
        "cost_micros": cost_micros,
        "period_start": core_period_start(period, anchor, now),
        "used_tokens": use[0],
        "used_cost_micros": use[1],
    }


_k = ApiKey.__table__.c
_t = Tenant.__table__.c
KEY_COLUMNS = (
    _k.id,
    _k.tenant_id,
    _k.hash,
    _k.prefix,
    _k.status,
    _k.expires_at,
    _k.models,
    _k.priority,
    _k.rpm,
    _k.tpm,
    _k.max_concurrency,
    _k.rpm_burst,
    _k.tpm_burst,
    _k.quota_period,
    _k.quota_tokens,
    _k.quota_cost_micros,
    _k.quota_anchor,
    _t.models,
)


def _in_core(moment: datetime) -> ColumnElement[bool]:
    """Keys the core can still use: not revoked, not expired (a rotated-out key ends with its
    overlap as its expiry). The core refuses a key past its `expires_at` by itself; leaving dead
    keys out keeps them from weighing on every push."""
    return and_(_k.status != "revoked", or_(_k.expires_at.is_(None), _k.expires_at > moment))


def allowed_models(key: list[str] | None, tenant: list[str] | None) -> list[str] | None:
    """What the core enforces: the key's list within its tenant's (null: no bound)."""
    if tenant is None:
        return key
    if key is None:
        return list(tenant)
    allowed = set(tenant)
    return [m for m in key if m in allowed]


def _key_entries(
    session: Session,
    where: ColumnElement[bool],
    moment: datetime,
    ids: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Key entries as the core takes them, revoked and expired keys left out (the core gives one
    answer for unknown and revoked keys alike). Plain rows through the connection (no ORM
    loading): this is the part that grows to 100k."""
    conn = session.connection()
    now = int(moment.timestamp())
    use = ledger.used(conn, "key", now, ids)
    stmt = (
        select(*KEY_COLUMNS)
        .join_from(ApiKey.__table__, Tenant.__table__, _t.id == _k.tenant_id)
        .where(_in_core(moment), where)
        .order_by(_k.id)
    )
    keys = []
    for row in conn.execute(stmt):
        (key_id, tenant_id, digest, prefix, status, expires_at, models, priority) = row[:8]
        limits = row[8:13]
        period, tokens, cost_micros, anchor = row[13:17]
        keys.append(
            {
                "id": key_id,
                "tenant_id": tenant_id,
                "hash": digest,
                "prefix": prefix,
                "status": status,
                "expires_at": None if expires_at is None else to_unix(expires_at),
                "models": allowed_models(models, row[17]),
                "priority": priority,
                "limits": _limits(*limits),
                "quota": _quota(period, tokens, cost_micros, anchor, use.get(key_id, (0, 0)), now),
            }
        )
    return keys


def _kind_fields(provider: Provider) -> dict[str, str]:
    """An Azure member's API version, an openai member's auth header: only where set."""
    fields = {"api_version": provider.api_version, "auth_header": provider.auth_header}
    return {name: value for name, value in fields.items() if value is not None}


def _prices(session: Session, now: datetime) -> list[dict[str, Any]]:
    """The version in force of each model's price (a part's rate only where the price sets it:
    the core falls back to the input or output rate)."""
    rows = session.scalars(
        select(Price)
        .where(Price.effective_from <= now)
        .order_by(Price.model, Price.effective_from.desc())
    )
    prices: dict[str, dict[str, Any]] = {}
    for price in rows:
        if price.model in prices:
            continue
        entry = {
            "model": price.model,
            "version": price.id,
            "input_per_mtok": price.input_micros_per_mtok,
            "output_per_mtok": price.output_micros_per_mtok,
        }
        parts = {
            "cached_input_per_mtok": price.cached_input_micros_per_mtok,
            "cache_write_per_mtok": price.cache_write_micros_per_mtok,
            "reasoning_per_mtok": price.reasoning_micros_per_mtok,
        }
        prices[price.model] = entry | {k: v for k, v in parts.items() if v is not None}
    return list(prices.values())


def build_snapshot(session: Session, *, pepper: str, cipher: CredentialCipher) -> Snapshot:
    index = SnapshotIndex()
    moment = utcnow()
    now = int(moment.timestamp())
    tenant_use = ledger.used(session.connection(), "tenant", now)
    tenants = []
    for t in session.scalars(select(Tenant).order_by(Tenant.id)):
        index.tenants.append(t.id)
        tenant_limits = _limits(t.rpm, t.tpm, t.max_concurrency, t.rpm_burst, t.tpm_burst)
        quota = _quota(
            t.quota_period,
            t.quota_tokens,
            t.quota_cost_micros,
            t.quota_anchor,
            tenant_use.get(t.id, (0, 0)),
            now,
        )
        tenants.append({"id": t.id, "status": t.status, "limits": tenant_limits, "quota": quota})

    keys = _key_entries(session, true(), moment)
    index.keys.extend(k["id"] for k in keys)

    providers = {p.id: p for p in session.scalars(select(Provider))}
    pools = []
    for i, pool in enumerate(session.scalars(select(Pool).order_by(Pool.id))):
        index.pools.append(pool.id)
        members = []
        for j, m in enumerate(pool.members):
            provider = providers[m.provider_id]
            index.members[(i, j)] = provider.id
            credential = (
                None
                if provider.credential_ciphertext is None
                else cipher.decrypt(provider.credential_ciphertext)
            )
            members.append(
                {
                    "id": m.id,
                    "kind": provider.kind,
                    "base_url": provider.base_url,
                    "credential": credential,
                    "weight": m.weight,
                    "max_concurrency": m.max_concurrency,
                    "http2": m.http2,
                    # The core's connect-time guard lets link-local addresses through only then.
                    "internal": provider.internal,
                    "headers": provider.headers,
                    "forward_headers": provider.forward_headers,
                    **_kind_fields(provider),
                }
            )
        timeouts = {
            "connect_ms": pool.connect_ms,
            "first_byte_ms": pool.first_byte_ms,
            "idle_ms": pool.idle_ms,
            "total_ms": pool.total_ms,
        }
        pools.append(
            {
                "id": pool.id,
                "members": members,
                "timeouts": timeouts,
                # Stored whole; `admission.max_inflight` null lets the core derive it.
                "admission": read(Admission, pool.admission).model_dump(),
                "retry": read(Retry, pool.retry).model_dump(),
                "ejection": read(Ejection, pool.ejection).model_dump(),
                "health_check": (
                    None
                    if pool.health_check is None
                    else read(HealthCheck, pool.health_check).model_dump()
                ),
            }
        )

    routes = []
    for route in session.scalars(select(Route).order_by(Route.alias)):
        index.routes.append(route.alias)
        chain = [{"pool": t.pool_id, "model": t.model} for t in route.chain]
        routes.append(
            {"alias": route.alias, "chain": chain, "max_output_tokens": route.max_output_tokens}
        )

    payload = {
        "auth": {"key_pepper": pepper},
        "tenants": tenants,
        "keys": keys,
        "pools": pools,
        "routes": routes,
        "prices": _prices(session, moment),
    }
    return Snapshot(json.dumps(payload, separators=(",", ":")), index, moment)


def with_usage_acked(payload: str, usage_acked: int) -> str:
    """`payload` (a snapshot or key changes, a JSON object) stamped with the core's usage
    acknowledgement as read before its quota figures were: the core adds to a figure it adopts
    what it charged after that (events the ledger did not have yet), so no spend is forgotten."""
    if not payload.endswith("}"):
        raise ValueError("a payload is a JSON object")
    return f'{payload[:-1]},"usage_acked":{int(usage_acked)}}}'


def build_key_changes(
    session: Session,
    upsert: Sequence[str],
    remove: Sequence[str],
    expired_since: datetime | None = None,
) -> Snapshot:
    """Key changes (`KeyDelta`) on top of the snapshot in force: the keys in `upsert` as they
    are now (a revoked or expired one is removed), the keys in `remove`, and the keys that
    expired since `expired_since` (the moment the core's keys were last brought up to date), so
    that the core's copy sheds dead keys with any change, not only with a whole snapshot."""
    moment = utcnow()
    entries = _key_entries(session, _k.id.in_(upsert), moment, upsert) if upsert else []
    kept = {k["id"] for k in entries}
    gone = {*remove, *(i for i in upsert if i not in kept)}
    if expired_since is not None:
        ended = select(_k.id).where(
            _k.status != "revoked", _k.expires_at > expired_since, _k.expires_at <= moment
        )
        gone.update(session.scalars(ended))
    index = SnapshotIndex(keys=[k["id"] for k in entries])
    payload = {"upsert": entries, "remove": sorted(gone - kept)}
    return Snapshot(json.dumps(payload, separators=(",", ":")), index, moment)
