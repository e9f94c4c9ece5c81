"""A route: the model alias clients ask for, served by an ordered chain of pools."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from control.db import Base


class Route(Base):
    __tablename__ = "routes"

    alias: Mapped[str] = mapped_column(String(200), primary_key=True)
    max_output_tokens: Mapped[int | None] = mapped_column(BigInteger)
    # The route's latency objective (P95 of time to first token), read by the doctor; not sent
    # to the core.
    slo_ttft_p95_ms: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    chain: Mapped[list[RouteTarget]] = relationship(
        order_by="RouteTarget.position", cascade="all, delete-orphan", lazy="selectin"
    )


class RouteTarget(Base):
    __tablename__ = "route_targets"

    route_alias: Mapped[str] = mapped_column(
        String(200), ForeignKey("routes.alias", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    pool_id: Mapped[str] = mapped_column(String(64), ForeignKey("pools.id"), index=True)
    # The model name sent upstream in place of the alias.
    model: Mapped[str] = mapped_column(String(200))
