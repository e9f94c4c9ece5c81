"""Quota requests and responses: an allowance of tokens (prompt plus completion) and/or money
(integer micro-units of the prices' currency) per period, UTC."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from control.api.schemas import Strict

QuotaPeriod = Literal["none", "daily", "monthly"]
QuotaTokens = Annotated[
    int, Field(ge=1, le=10**15, description="Prompt plus completion tokens per period")
]
QuotaMicros = Annotated[
    int, Field(ge=1, le=10**18, description="Cost in micro-units of the currency per period")
]
PERIOD_DOC = (
    "`daily` resets at 00:00 UTC, `monthly` at 00:00 UTC on the first; `none` is one allowance "
    "counted from when it was set"
)


class QuotaIn(Strict):
    """A quota is sent whole and replaces the one in force; `period` is required so that an
    update naming only a new allowance never changes the period by default."""

    period: QuotaPeriod = Field(description=PERIOD_DOC)
    tokens: QuotaTokens | None = None
    cost_micros: QuotaMicros | None = None

    @model_validator(mode="after")
    def _something(self) -> QuotaIn:
        if self.tokens is None and self.cost_micros is None:
            raise ValueError("needs tokens or cost_micros (send null for no quota)")
        return self


class QuotaOut(BaseModel):
    period: QuotaPeriod
    tokens: int | None
    cost_micros: int | None
    reset_at: datetime | None = Field(description="The operator's last reset, if any")


class QuotaStatus(QuotaOut):
    """The quota and its use in the current period, from the usage ledger (SQL): requests in
    flight and events not yet written there are not in it (the gateway counts them live)."""

    period_start: datetime = Field(
        description="Start of the counted period: the period's own start, when the quota was "
        "set (`none`), or the last reset, whichever is latest"
    )
    period_end: datetime | None = Field(description="When the next period starts (null: never)")
    used_tokens: int
    used_cost_micros: int
    remaining_tokens: int | None
    remaining_cost_micros: int | None
