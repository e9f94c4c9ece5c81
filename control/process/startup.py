"""Everything before the first request: database and migrations, secrets, admin token,
bootstrap objects, the first snapshot applied to the core, and the drills still running (the
core keeps them in memory only)."""

from __future__ import annotations

import logging
import threading

from sqlalchemy.exc import OperationalError

from control import migrations
from control.api.access.ratelimit import AdminRateLimits
from control.api.errors import CoreRejected, StartupError
from control.bridge.core_bridge import CoreBridge
from control.bridge.mutation import Mutator
from control.bridge.snapshot import build_snapshot
from control.context import ControlContext
from control.db import create_db_engine, is_sqlite, session_factory
from control.drills.service import reapply as reapply_drills
from control.fleet.channel import channel_name, is_postgresql, namespace
from control.process.bootstrap import apply_bootstrap, ensure_admin_token
from control.process.secrets_setup import resolve_cipher, resolve_pepper
from control.process.settings import Settings
from control.process.startup_turn import startup_turn
from control.usage.drainer import usage_drainer

log = logging.getLogger("sluicegate.control")


def prepare(
    settings: Settings, bridge: CoreBridge, stop: threading.Event | None = None
) -> tuple[ControlContext, str | None]:
    """The ready context, and the admin token if one was generated (to be shown once).

    The usage journal is replayed (its events written to SQL and acknowledged) before the first
    snapshot: quotas then start from a ledger that holds everything the core ever reported.
    `stop` (a shutdown signal) ends a replay that waits for the database."""
    try:
        engine = create_db_engine(settings.database.url)
    except Exception as e:
        raise StartupError(f"database.url is not usable: {e}") from None
    try:
        migrations.upgrade(engine)
    except OperationalError as e:
        engine.dispose()
        raise StartupError(f"cannot reach or migrate the database: {e.orig}") from None
    try:
        sessions = session_factory(engine)
        with startup_turn(engine, stop):
            pepper = resolve_pepper(settings, sessions, embedded=is_sqlite(settings.database.url))
            cipher = resolve_cipher(settings, sessions)
        drainer = usage_drainer(bridge, sessions, settings.usage)
        if not drainer.drain(stop=stop):
            raise StartupError("stopped before the usage journal was replayed")
        if drainer.written or drainer.rejected:
            log.info("usage journal replayed: %d events stored", drainer.written)
        schema = namespace(engine) if is_postgresql(engine) else None
        mutator = Mutator(
            sessions,
            bridge,
            lambda s: build_snapshot(s, pepper=pepper, cipher=cipher),
            channel=None if schema is None else channel_name(schema),
        )
        ctx = ControlContext(
            settings=settings,
            engine=engine,
            sessions=sessions,
            bridge=bridge,
            pepper=pepper,
            cipher=cipher,
            mutator=mutator,
            admin_limits=AdminRateLimits(settings.admin),
            fleet_schema=schema,
        )
        with startup_turn(engine, stop):
            token = ensure_admin_token(ctx)
            created = apply_bootstrap(ctx, settings.bootstrap)
        if created:
            log.info("bootstrap created %s", ", ".join(created))
        try:
            version = mutator.apply_current()
        except CoreRejected as e:
            raise StartupError(f"the stored configuration is refused: {e.message}") from None
        log.info("config version %d applied to the data plane", version)
        held = reapply_drills(ctx)
        if held:
            log.info("drills still running, held again: %s", ", ".join(held))
    except BaseException:
        engine.dispose()
        raise
    return ctx, token
