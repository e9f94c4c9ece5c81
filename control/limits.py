"""Rate and concurrency limits shared by tenants and keys, and the rules between them.

A burst is the size of a per-minute limit's token bucket. Left unset (stored null, sent null) the
core makes it one minute's worth, the per-minute limit itself; reads show the value in force.
A burst without its per-minute limit would mean nothing to the core and is refused. A key's
limits, in force, never exceed its tenant's: bursts included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from control.api.errors import FieldError

LIMITS = ("rpm", "tpm", "max_concurrency", "rpm_burst", "tpm_burst")
# burst -> the per-minute limit it belongs to
BURSTS = {"rpm_burst": "rpm", "tpm_burst": "tpm"}

Limits = Mapping[str, int | None]


def in_force(values: Limits) -> dict[str, int | None]:
    """The limits the core enforces: an unset burst is its per-minute limit."""
    out = {name: values.get(name) for name in LIMITS}
    for burst, rate in BURSTS.items():
        if out[burst] is None:
            out[burst] = out[rate]
    return out


# The rules import `FieldError` when they run: the CLI reads `LIMITS` and should not load the
# admin app's HTTP error handling (FastAPI, SQLAlchemy) for that.


def orphan_bursts(values: Limits) -> list[FieldError]:
    from control.api.errors import FieldError

    return [
        FieldError(burst, f"needs {rate}: a burst is the bucket size of the per-minute limit")
        for burst, rate in BURSTS.items()
        if values.get(burst) is not None and values.get(rate) is None
    ]


def above_tenant(key: Limits, tenant: Limits) -> list[FieldError]:
    """The key's limits (in force) that exceed its tenant's (in force)."""
    from control.api.errors import FieldError

    mine, theirs = in_force(key), in_force(tenant)
    errors: list[FieldError] = []
    for name in LIMITS:
        value, cap = mine[name], theirs[name]
        if value is None or cap is None or value <= cap:
            continue
        rate = BURSTS.get(name)
        if rate is not None and key.get(name) is None:
            if any(e.field == rate for e in errors):
                continue  # the burst is the rate itself: one error says it
            message = (
                f"unset, so the key's {rate} ({value}), exceeds the tenant's {name} ({cap}): "
                f"set a {name} of at most {cap}"
            )
        else:
            message = f"exceeds the tenant's {name} ({cap})"
        errors.append(FieldError(name, message))
    return errors
