"""Price requests and responses: integer micro-units of the currency per million tokens."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from control.api.schemas import ModelName, Strict, Timestamp

Micros = Annotated[
    int, Field(ge=0, le=1_000_000_000_000_000, description="Micro-units per million tokens")
]
Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]


class PriceCreate(Strict):
    model: ModelName = Field(description="The model alias clients use")
    input_micros_per_mtok: Micros
    output_micros_per_mtok: Micros
    cached_input_micros_per_mtok: Micros | None = Field(
        default=None,
        description="Prompt tokens read from the provider's cache (OpenAI cached_tokens, "
        "Anthropic cache_read_input_tokens); absent: the input rate",
    )
    cache_write_micros_per_mtok: Micros | None = Field(
        default=None,
        description="Prompt tokens written to the provider's cache (Anthropic "
        "cache_creation_input_tokens); absent: the input rate",
    )
    reasoning_micros_per_mtok: Micros | None = Field(
        default=None,
        description="Completion tokens spent on reasoning (reasoning_tokens); absent: the output "
        "rate",
    )
    currency: Currency = Field(default="USD", description="ISO 4217; one currency per model")
    effective_from: Timestamp | None = Field(
        default=None, description="When the price takes effect (now if absent; never in the past)"
    )


class PriceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: int
    model: str
    currency: str
    input_micros_per_mtok: int
    output_micros_per_mtok: int
    cached_input_micros_per_mtok: int | None
    cache_write_micros_per_mtok: int | None
    reasoning_micros_per_mtok: int | None
    effective_from: datetime
    created_at: datetime
    created_by: str
