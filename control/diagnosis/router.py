"""`GET /v1/admin/diagnosis` (admin tokens only, like the status it reads)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from control.api.deps import CallerDep, ContextDep, SessionDep
from control.api.errors import ERROR_RESPONSES
from control.diagnosis import service
from control.diagnosis.schemas import DiagnosisOut

router = APIRouter(prefix="/v1/admin/diagnosis", tags=["status"], responses=ERROR_RESPONSES)

RecentSeconds = Annotated[
    int | None,
    Query(
        ge=10,
        le=600,
        multiple_of=10,
        description="The recent window, ending now (default: [doctor] recent_seconds)",
    ),
]
BaselineSeconds = Annotated[
    int | None,
    Query(
        ge=10,
        le=3590,
        multiple_of=10,
        description="The window just before it (default: [doctor] baseline_seconds)",
    ),
]


@router.get(
    "",
    summary="Per pool, what limits it: queueing, upstream compute, a bottleneck outside compute, "
    "a backlog building, or healthy, with the numbers and the rules' checks",
)
def get_diagnosis(
    caller: CallerDep,
    ctx: ContextDep,
    session: SessionDep,
    recent_seconds: RecentSeconds = None,
    baseline_seconds: BaselineSeconds = None,
) -> DiagnosisOut:
    return service.diagnosis(
        ctx, session, caller, ctx.settings.doctor, recent_seconds, baseline_seconds
    )
