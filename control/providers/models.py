"""An upstream provider: where requests go, and the credential (encrypted at rest) they carry."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, Boolean, CheckConstraint, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base
from control.providers.kinds import PROVIDER_KINDS

KIND_CHECK = f"kind IN ({', '.join(repr(k) for k in PROVIDER_KINDS)})"


class Provider(Base):
    __tablename__ = "providers"
    __table_args__ = (CheckConstraint(KIND_CHECK, name="kind"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(16))
    base_url: Mapped[str] = mapped_column(String(2048))
    # Explicitly allowed to point at internal addresses (see control/providers/urls.py).
    internal: Mapped[bool] = mapped_column(Boolean)
    credential_ciphertext: Mapped[str | None] = mapped_column(Text)
    credential_mask: Mapped[str | None] = mapped_column(String(32))
    credential_fingerprint: Mapped[str | None] = mapped_column(String(12))
    # Sent to the upstream with every request (name -> value); never secrets (that is `credential`).
    headers: Mapped[dict[str, str]] = mapped_column(JSON, default=dict)
    # Client headers the upstream may receive beyond the gateway's allow-list.
    forward_headers: Mapped[list[str]] = mapped_column(JSON, default=list)
    # azure_openai: the `api-version` query of every request.
    api_version: Mapped[str | None] = mapped_column(String(32))
    # openai: the header the credential goes in instead of `Authorization: Bearer`.
    auth_header: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]
