"""The admin API: `create_app(settings, core_bridge)`.

The lifespan prepares the context (database, secrets, first snapshot) unless one is handed in
(`sluicegate serve` prepares it before it starts the data listener), then runs the usage drainer
(flushed once more on the way out) and the drill closer.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from control.api.access.gate import AdminGate
from control.api.config_api import router as config_router
from control.api.errors import install_error_handlers
from control.api.health import router as health_router
from control.audit.router import router as audit_router
from control.bridge.core_bridge import CoreBridge
from control.console.mount import mount_console
from control.context import ControlContext
from control.diagnosis.router import router as diagnosis_router
from control.drills.router import router as drills_router
from control.fleet.router import router as fleet_router
from control.keys.router import router as keys_router
from control.observability.router import router as metrics_router
from control.pools.router import router as pools_router
from control.prices.router import router as prices_router
from control.process.jobs import BackgroundJobs
from control.process.settings import Settings
from control.process.startup import prepare
from control.providers.router import router as providers_router
from control.quotas.router import router as quotas_router
from control.routes.router import router as routes_router
from control.status.router import router as status_router
from control.tenants.router import router as tenants_router
from control.tokens.router import router as tokens_router
from control.usage.router import router as usage_router

ROUTERS = (
    health_router,
    metrics_router,
    tenants_router,
    tokens_router,
    keys_router,
    providers_router,
    pools_router,
    routes_router,
    prices_router,
    drills_router,
    usage_router,
    quotas_router,
    audit_router,
    config_router,
    status_router,
    diagnosis_router,
    fleet_router,
)

DESCRIPTION = """Manage sluicegate: tenants, their API keys, upstream providers, pools, routes,
prices; run failover drills; read usage and the audit log, the windowed status and the doctor's
diagnosis per pool (Prometheus metrics at `/metrics`). Every change is applied to the data
plane before the response returns. Authenticate with `Authorization: Bearer <admin token>`."""


def announce_admin_token(token: str) -> None:
    """The one time a generated admin token is shown: on stdout, never in the log."""
    print(
        "sluicegate: generated an admin token (shown once, store it now):\n"
        f"  SLUICEGATE_ADMIN_TOKEN={token}",
        flush=True,
    )


def create_app(
    settings: Settings, core_bridge: CoreBridge, *, context: ControlContext | None = None
) -> FastAPI:
    from sluicegate import __version__

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if context is None:
            ctx, token = await run_in_threadpool(prepare, settings, core_bridge)
            if token is not None:
                announce_admin_token(token)
            app.state.ctx = ctx
        else:
            ctx = context
        jobs = BackgroundJobs(ctx)
        jobs.start()
        try:
            yield
        finally:
            await run_in_threadpool(jobs.stop)
            if context is None:
                ctx.engine.dispose()

    app = FastAPI(
        title="sluicegate admin API",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    if context is not None:
        app.state.ctx = context
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    mount_console(app, settings.console)
    # Outermost of the app's own layers: identifies admin tokens and caps bodies before any
    # route reads one.
    app.add_middleware(AdminGate)
    return app
