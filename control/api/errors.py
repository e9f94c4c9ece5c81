"""The control plane's errors, and the one place where they become HTTP answers.

Every error body has one shape: `{"error": {"code", "message", "fields": [{"field", "message"}]}}`.
Messages never carry submitted values: a rejected credential or token is never echoed back.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("sluicegate.control")


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str


class ControlError(Exception):
    status = 500
    code = "internal_error"

    def __init__(self, message: str, fields: Sequence[FieldError] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.fields = list(fields)

    def headers(self) -> dict[str, str]:
        return {}


class NotFound(ControlError):
    status = 404
    code = "not_found"


class Conflict(ControlError):
    status = 409
    code = "conflict"


class Validation(ControlError):
    status = 422
    code = "validation_error"

    @classmethod
    def field(cls, field: str, message: str) -> Validation:
        return cls(f"{field}: {message}", [FieldError(field, message)])


class Unauthorized(ControlError):
    status = 401
    code = "unauthorized"


class Forbidden(ControlError):
    status = 403
    code = "forbidden"


class AdminLocked(Forbidden):
    """A tenant-scoped token tried to loosen what the operator set on a key."""

    code = "admin_locked"


class TenantDisabled(Forbidden):
    """A tenant-scoped token of a disabled tenant: valid, but refused until it is enabled."""

    code = "tenant_disabled"


class PayloadTooLarge(ControlError):
    status = 413
    code = "payload_too_large"


class RateLimited(ControlError):
    status = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        # Whole seconds, rounded up: a client that waits that long finds a token.
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class CoreRejected(ControlError):
    """The data plane refused the snapshot; the transaction was rolled back."""

    status = 422
    code = "core_rejected"


class Unavailable(ControlError):
    status = 503
    code = "unavailable"


class StartupError(Exception):
    """The process cannot start as configured; the message says what to change."""


# --- the wire format ---------------------------------------------------------------------------


class FieldErrorBody(BaseModel):
    field: str
    message: str


class ErrorDetail(BaseModel):
    code: str
    message: str
    fields: list[FieldErrorBody] = []


class ErrorBody(BaseModel):
    error: ErrorDetail


ERROR_RESPONSES: dict[int | str, dict[str, object]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in [
        (400, "The request body cannot be read (not UTF-8 JSON)"),
        (401, "Missing or unknown admin token"),
        (403, "The token's role does not allow this"),
        (404, "No such object (or one the caller may not see)"),
        (409, "Conflicts with the current state"),
        (413, "The request body is larger than admin.max_body_bytes"),
        (422, "Invalid input, or refused by the data plane"),
        (429, "The token's call rate is spent; retry after `retry-after` seconds"),
    ]
}


def error_json(code: str, message: str, fields: Sequence[FieldError] = ()) -> bytes:
    """The error body's bytes, for an answer written below the app (`admin_protocol.py`)."""
    return _detail(code, message, fields).model_dump_json().encode()


def _detail(code: str, message: str, fields: Sequence[FieldError]) -> ErrorBody:
    detail = ErrorDetail(
        code=code,
        message=message,
        fields=[FieldErrorBody(field=f.field, message=f.message) for f in fields],
    )
    return ErrorBody(error=detail)


def _body(
    status: int,
    code: str,
    message: str,
    fields: Sequence[FieldError] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    headers = dict(headers or {})
    if status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    body = _detail(code, message, fields).model_dump()
    return JSONResponse(body, status_code=status, headers=headers)


def error_response(exc: ControlError) -> JSONResponse:
    """The answer to a control error, also for code in front of the routes (`admin_gate.py`)."""
    return _body(exc.status, exc.code, exc.message, exc.fields, exc.headers())


_LOCATIONS = {"body", "query", "path", "header", "cookie"}


def _field_name(loc: Sequence[int | str]) -> str:
    parts = list(loc)
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "body"


def validation_fields(errors: Sequence[object]) -> list[FieldError]:
    """Pydantic errors as field errors, without the submitted input (it may be a secret)."""
    fields = []
    for raw in errors:
        if not isinstance(raw, dict):
            continue
        loc = raw.get("loc", ())
        message = str(raw.get("msg", "invalid"))
        # Custom validators raise "Value error, <ours>"; the prefix says nothing to an operator.
        message = message.removeprefix("Value error, ")
        fields.append(FieldError(_field_name(loc), message))
    return fields


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ControlError)
    async def control_error(request: Request, exc: ControlError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def request_invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = validation_fields(exc.errors())
        summary = "; ".join(f"{f.field}: {f.message}" for f in fields[:5])
        return _body(422, "validation_error", f"invalid request: {summary}", fields)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {
            400: "bad_request",
            401: "unauthorized",
            404: "not_found",
            405: "method_not_allowed",
            413: "payload_too_large",
        }
        code = codes.get(exc.status_code, "http_error")
        return _body(exc.status_code, code, str(exc.detail))

    @app.exception_handler(IntegrityError)
    async def integrity_error(request: Request, exc: IntegrityError) -> JSONResponse:
        # Services check uniqueness first; this is the race between two writers. The database's
        # message may quote values, so it is not passed on.
        log.warning("integrity error on %s %s", request.method, request.url.path)
        return _body(409, "conflict", "the change conflicts with another object; retry")

    @app.exception_handler(DataError)
    async def data_error(request: Request, exc: DataError) -> JSONResponse:
        # The database refused a value the schemas let through (e.g. NUL in a path id).
        return _body(422, "invalid_value", "a value in the request cannot be stored or searched")

    @app.exception_handler(UnicodeEncodeError)
    async def bad_text(request: Request, exc: UnicodeEncodeError) -> JSONResponse:
        return _body(422, "invalid_value", "text must be valid Unicode (no lone surrogates)")

    @app.exception_handler(OperationalError)
    async def database_down(request: Request, exc: OperationalError) -> JSONResponse:
        log.error("database error on %s %s: %s", request.method, request.url.path, exc.orig)
        return _body(503, "database_unavailable", "the database is unavailable; retry later")

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        # Starlette re-raises the exception after this answer, and uvicorn then ends the
        # connection: said here, so that a client does not send its next request on it.
        return _body(
            500,
            "internal_error",
            "internal error; the server log has the details",
            headers={"Connection": "close"},
        )
