"""The operator's locks on a key: what an admin token set, a tenant-scoped token may afterwards
only tighten, never loosen.

Locked when an admin token sets them (at creation or later), lifted when it sets them back to
the loosest value:
- `status` disabled (lifted by enabling): a tenant token cannot enable the key;
- `models` (lifted by null): the tenant's list must stay a subset, never null;
- `priority` batch (lifted by interactive): the tenant cannot raise it;
- each limit (lifted by null): the tenant's value in force must stay at or below the
  operator's; a per-minute limit and its burst are locked together, at their values in force;
- `quota` (lifted by null): same period, allowances at or below the operator's, no reset.

Stored as `api_keys.admin_policy` (field -> bound); rotation copies it to the new key. A refusal
is 403 `admin_locked` naming each field at fault.
"""

from __future__ import annotations

from typing import Any

from control.api.errors import AdminLocked, FieldError
from control.keys.models import ApiKey
from control.limits import BURSTS, LIMITS, in_force
from control.quotas.schemas import QuotaIn

Policy = dict[str, Any]

LOCKABLE = ("status", "models", "priority", *LIMITS, "quota")
# A per-minute limit and its burst lock together; max_concurrency alone.
_LIMIT_GROUPS = (("rpm", "rpm_burst"), ("tpm", "tpm_burst"), ("max_concurrency",))


def _limits_of(key: ApiKey) -> dict[str, int | None]:
    return in_force({name: getattr(key, name) for name in LIMITS})


def after_admin_change(policy: Policy | None, key: ApiKey, sent: set[str]) -> Policy:
    """The locks once an admin token has set the fields in `sent` (already applied to `key`)."""
    out = dict(policy or {})

    def lock(name: str, value: Any, loosest: Any = None) -> None:
        if value is None or value == loosest:
            out.pop(name, None)
        else:
            out[name] = value

    if "status" in sent:
        lock("status", key.status, "active")
    if "models" in sent:
        lock("models", None if key.models is None else list(key.models))
    if "priority" in sent:
        lock("priority", key.priority, "interactive")
    limits = _limits_of(key)
    for group in _LIMIT_GROUPS:
        if sent & set(group):
            for name in group:
                lock(name, limits[name])
    if "quota" in sent:
        quota = None
        if key.quota_period is not None:
            quota = {
                "period": key.quota_period,
                "tokens": key.quota_tokens,
                "cost_micros": key.quota_cost_micros,
            }
        lock("quota", quota)
    return out


def check_tenant_change(
    policy: Policy | None,
    key: ApiKey,
    changes: dict[str, Any],
    quota: tuple[bool, QuotaIn | None] = (False, None),
) -> None:
    """Refuse a tenant token's change that loosens a lock. `changes` are the key's fields that
    change; `quota` whether a quota was sent, and which."""
    if not policy:
        return
    errors: list[FieldError] = []
    if policy.get("status") == "disabled" and changes.get("status") == "active":
        errors.append(FieldError("status", "the operator disabled this key"))
    if "models" in changes and "models" in policy:
        allowed, wanted = policy["models"], changes["models"]
        if wanted is None or not set(wanted) <= set(allowed):
            errors.append(
                FieldError("models", f"must stay within the operator's: {', '.join(allowed)}")
            )
    if policy.get("priority") == "batch" and changes.get("priority") == "interactive":
        errors.append(FieldError("priority", "the operator set this key to batch"))
    if any(name in changes for name in LIMITS):
        after = in_force({name: changes.get(name, getattr(key, name)) for name in LIMITS})
        for name in LIMITS:
            bound = policy.get(name)
            value = after[name]
            if bound is not None and (value is None or value > bound):
                errors.append(FieldError(_sent_name(name, changes), _over(name, bound)))
    sent, wanted_quota = quota
    if sent and "quota" in policy:
        errors += _quota_errors(policy["quota"], wanted_quota)
    if errors:
        raise AdminLocked("the operator set these; a tenant token may only tighten them", errors)


def check_tenant_reset(policy: Policy | None) -> None:
    """A reset starts the count again: a loosening of the operator's quota."""
    if policy and "quota" in policy:
        raise AdminLocked(
            "the operator set this key's quota; only an admin token may reset it",
            [FieldError("quota", "set by the operator")],
        )


def _sent_name(name: str, changes: dict[str, Any]) -> str:
    """A burst that follows its rate is at fault through the rate sent."""
    rate = BURSTS.get(name)
    if name not in changes and rate is not None and rate in changes:
        return rate
    return name


def _over(name: str, bound: int) -> str:
    return f"at most {bound} in force (set by the operator); it cannot be removed"


def _quota_errors(bound: dict[str, Any], wanted: QuotaIn | None) -> list[FieldError]:
    if wanted is None:
        return [FieldError("quota", "set by the operator; it cannot be removed")]
    if wanted.period != bound["period"]:
        return [FieldError("quota.period", f"must stay {bound['period']} (set by the operator)")]
    errors = []
    for name in ("tokens", "cost_micros"):
        cap = bound.get(name)
        value = getattr(wanted, name)
        if cap is not None and (value is None or value > cap):
            errors.append(FieldError(f"quota.{name}", f"at most {cap} (set by the operator)"))
    return errors
