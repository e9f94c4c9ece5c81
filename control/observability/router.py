"""`GET /metrics` on the admin port, in the Prometheus text format. Like `/healthz` it needs no
token: the admin port stays on loopback or a private network, and no label carries a key or a
secret (tenant ids label only the bounded `sluicegate_tenant_*` families). The data port serves
the same exposition behind a token of its own (`[metrics] data_port`)."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.process_collector import ProcessCollector
from starlette.concurrency import run_in_threadpool

from control.api.deps import ContextDep
from control.context import ControlContext
from control.diagnosis.service import diagnose, fleet_peers
from control.observability.collector import SluicegateCollector

router = APIRouter(tags=["health"])

# The classic text format (0.0.4), which every Prometheus version reads; our names need none of
# the escaping of the newer one.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _advice(ctx: ControlContext) -> dict[str, int]:
    with ctx.sessions() as session:
        diagnosis = diagnose(
            ctx.bridge, session, ctx.settings.doctor, fleet_peers(ctx, ctx.settings.doctor)
        )
    return {pool.pool: pool.scale_advice for pool in diagnosis.pools}


def scrape(ctx: ControlContext) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SluicegateCollector(ctx.bridge, lambda: _advice(ctx), ctx.admin_tls))
    ProcessCollector(registry=registry)
    return generate_latest(registry)


@router.get(
    "/metrics",
    summary="Prometheus metrics: the data plane's, the control plane's, the doctor's advice",
    response_class=Response,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics(ctx: ContextDep) -> Response:
    body = await run_in_threadpool(scrape, ctx)
    return Response(body, media_type=CONTENT_TYPE)
