"""A request's partial policy merged onto the stored one (onto the core's defaults at creation),
checked whole; a refusal names the request field (`retry.max_attempts`)."""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from control.api.errors import FieldError, Validation, validation_fields

M = TypeVar("M", bound=BaseModel)


def _merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for name, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = _merge(out[name], value)
        else:
            out[name] = value
    return out


def merged(
    model: type[M], stored: dict[str, Any] | None, patch: BaseModel | None, field: str
) -> dict[str, Any]:
    """`patch` (the fields sent) over `stored` (or the defaults): the whole policy to store."""
    base = model().model_dump() if stored is None else stored
    sent = {} if patch is None else patch.model_dump(exclude_unset=True)
    try:
        return model.model_validate(_merge(base, sent)).model_dump(mode="json")
    except ValidationError as e:
        fields = validation_fields(e.errors())
        errors = [FieldError(f"{field}.{f.field}", f.message) for f in fields]
        raise Validation(f"invalid {field}", errors) from None
