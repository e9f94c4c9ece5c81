"""Every table, imported once so that `Base.metadata` is complete (migrations, tests)."""

from __future__ import annotations

from control.audit.models import AuditEntry
from control.bridge.state import ControlState, Setting
from control.db import Base
from control.drills.models import Drill
from control.fleet.models import Replica
from control.keys.models import ApiKey
from control.pools.models import Pool, PoolMember
from control.prices.models import Price
from control.providers.models import Provider
from control.routes.models import Route, RouteTarget
from control.tenants.models import Tenant
from control.tokens.models import AdminToken
from control.usage.models import UsageRecord, UsageReject, UsageRollup

metadata = Base.metadata

__all__ = [
    "AdminToken",
    "ApiKey",
    "AuditEntry",
    "ControlState",
    "Drill",
    "Pool",
    "PoolMember",
    "Price",
    "Provider",
    "Replica",
    "Route",
    "RouteTarget",
    "Setting",
    "Tenant",
    "UsageRecord",
    "UsageReject",
    "UsageRollup",
    "metadata",
]
