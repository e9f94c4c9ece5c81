"""Types shared by every resource's schemas: names, ids, limits and pages."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Generic, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from control.ids import SLUG_PATTERN
from control.timeutil import as_utc

# Printable text: no control characters (PostgreSQL refuses NUL; logs should not carry newlines).
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"

Name = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=PRINTABLE)]
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
# Model aliases as clients write them: `gpt-4o`, `meta-llama/Llama-3-8B`, `claude@2024`.
MODEL_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$"
ModelName = Annotated[str, StringConstraints(pattern=MODEL_PATTERN)]
# A model allowlist (of a tenant or a key); null means every route.
Models = list[ModelName]


def distinct_models(models: list[str] | None) -> list[str] | None:
    if models is not None and len(set(models)) != len(models):
        raise ValueError("lists a model more than once")
    return models


Rpm = Annotated[int, Field(ge=1, le=1_000_000_000, description="Requests per minute")]
Tpm = Annotated[int, Field(ge=1, le=1_000_000_000_000, description="Tokens per minute")]
Concurrency = Annotated[int, Field(ge=1, le=1_000_000, description="Requests in flight at once")]
RpmBurst = Annotated[
    int,
    Field(
        ge=1,
        le=1_000_000_000,
        description="Requests that may arrive at once (bucket size); unset: the rpm",
    ),
]
TpmBurst = Annotated[
    int,
    Field(
        ge=1,
        le=1_000_000_000_000,
        description="Tokens that may be taken at once (bucket size); unset: the tpm",
    ),
]

_LATEST = datetime(2999, 12, 31).replace(tzinfo=None)


def _bounded_time(value: datetime) -> datetime:
    try:
        value = as_utc(value)
    except ValueError:  # an offset that moves it past year 1 or 9999
        raise ValueError("must be between 1971 and 2999") from None
    if value.year < 1971 or value.replace(tzinfo=None) > _LATEST:
        raise ValueError("must be between 1971 and 2999")
    return value


# Timestamps in the API: ISO 8601; without an offset they are read as UTC.
Timestamp = Annotated[datetime, AfterValidator(_bounded_time)]

MAX_PAGE = 500
PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE, description="Page size (at most 500)")]

T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    """One page of a list; pass `next_cursor` back as `cursor` for the next (null at the end)."""

    items: list[T]
    next_cursor: str | None


class Strict(BaseModel):
    """Request bodies: unknown fields are refused, as the core refuses them in snapshots."""

    model_config = ConfigDict(extra="forbid")
