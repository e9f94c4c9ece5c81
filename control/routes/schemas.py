"""Route requests and responses: a model alias and its ordered chain of pools."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field, field_validator

from control.api.schemas import ModelName, Slug, Strict
from control.api.validation import not_null

MaxOutput = Annotated[
    int, Field(ge=1, le=100_000_000, description="Largest max_tokens the model accepts")
]

SloTtftP95 = Annotated[
    int,
    Field(
        ge=1,
        le=3_600_000,
        description="Objective for the P95 of time to first token, in ms; the doctor compares "
        "the route's P95 with it (control plane only, not sent to the data plane)",
    ),
]


class Target(Strict):
    pool: Slug
    model: ModelName = Field(description="The model name sent upstream in place of the alias")


Chain = Annotated[
    list[Target],
    Field(min_length=1, max_length=16, description="The first pool serves, the rest fall back"),
]


class RouteCreate(Strict):
    alias: ModelName = Field(description="The model name clients ask for")
    chain: Chain
    max_output_tokens: MaxOutput | None = None
    slo_ttft_p95_ms: SloTtftP95 | None = None


class RouteUpdate(Strict):
    """`chain`, when sent, replaces the whole chain; `max_output_tokens: null` and
    `slo_ttft_p95_ms: null` clear them."""

    chain: Chain | None = None
    max_output_tokens: MaxOutput | None = None
    slo_ttft_p95_ms: SloTtftP95 | None = None

    @field_validator("chain")
    @classmethod
    def _not_null(cls, value: list[Target] | None) -> list[Target]:
        return not_null(value)


class TargetOut(BaseModel):
    pool: str
    model: str


class RouteOut(BaseModel):
    alias: str
    chain: list[TargetOut]
    max_output_tokens: int | None
    slo_ttft_p95_ms: int | None
    created_at: datetime
    updated_at: datetime
