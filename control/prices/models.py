"""Prices per model alias, versioned: a change inserts a row, rows never change, so usage keeps
the price that was in force when it happened."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from control.db import Base


class Price(Base):
    __tablename__ = "prices"
    __table_args__ = (UniqueConstraint("model", "effective_from"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model: Mapped[str] = mapped_column(String(200))
    currency: Mapped[str] = mapped_column(String(3))
    # Integer micro-units of the currency per million tokens.
    input_micros_per_mtok: Mapped[int] = mapped_column(BigInteger)
    output_micros_per_mtok: Mapped[int] = mapped_column(BigInteger)
    # The parts providers invoice apart; null: the input rate (cache) or output rate (reasoning).
    cached_input_micros_per_mtok: Mapped[int | None] = mapped_column(BigInteger)
    cache_write_micros_per_mtok: Mapped[int | None] = mapped_column(BigInteger)
    reasoning_micros_per_mtok: Mapped[int | None] = mapped_column(BigInteger)
    effective_from: Mapped[datetime]
    created_at: Mapped[datetime]
    created_by: Mapped[str] = mapped_column(String(40))
