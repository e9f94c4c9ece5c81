"""The identity behind a request or a change: a token's id, name and role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from control.api.errors import Forbidden, NotFound

Role = Literal["admin", "tenant", "system"]


@dataclass(frozen=True)
class Caller:
    token_id: str
    name: str
    role: Role
    tenant_id: str | None = None

    @property
    def is_admin(self) -> bool:
        return self.role in ("admin", "system")

    def require_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("this operation needs an admin token")

    def check_tenant(self, tenant_id: str, what: str = "tenant") -> None:
        """404 for another tenant's objects: their existence is not the caller's business."""
        if not self.is_admin and tenant_id != self.tenant_id:
            raise NotFound(f"{what} not found")

    def scope(self, requested: str | None) -> str | None:
        """The tenant a list is limited to: the caller's own for tenant tokens."""
        if self.is_admin:
            return requested
        if requested is not None and requested != self.tenant_id:
            raise NotFound("tenant not found")
        return self.tenant_id


# Changes made by the process itself (bootstrap from the config file).
SYSTEM = Caller(token_id="system", name="bootstrap", role="system")
