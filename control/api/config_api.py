"""`GET /v1/admin/config/version`: the snapshot the core runs, and its last refusal."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.bridge.state import committed_version

router = APIRouter(prefix="/v1/admin/config", tags=["config"], responses=ERROR_RESPONSES)


class RejectionOut(BaseModel):
    version: int
    message: str
    at: datetime


class ConfigVersionOut(BaseModel):
    acknowledged_version: int | None
    acknowledged_at: datetime | None
    committed_version: int
    last_rejection: RejectionOut | None


@router.get("/version", summary="Version acknowledged by the data plane, and the last rejection")
def config_version(caller: CallerDep, ctx: ContextDep, session: SessionDep) -> ConfigVersionOut:
    caller.require_admin()
    acked = ctx.bridge.acknowledged
    rejection = ctx.bridge.last_rejection
    return ConfigVersionOut(
        acknowledged_version=acked.version if acked else None,
        acknowledged_at=acked.at if acked else None,
        committed_version=committed_version(session),
        last_rejection=(
            RejectionOut(version=rejection.version, message=rejection.message, at=rejection.at)
            if rejection
            else None
        ),
    )
