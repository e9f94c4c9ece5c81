"""`sluicegate serve`: the data plane and the admin API in one process; Python owns the signals.

Start: umask 0o077, settings, files an older release left readable restricted (`file_modes.py`),
the core (its usage journal opened and replayed into memory), database and migrations, secrets,
the journal's events written to SQL and acknowledged, first snapshot applied, data listener,
admin listener, then one line on stdout:
`sluicegate serve listening on http://DATA (admin http://ADMIN)`. No request is served before the
journal has been replayed.
SIGTERM or SIGINT: readiness off, the core stops accepting and lets in-flight requests finish
within `server.shutdown_grace_seconds`, the usage drainer writes and acknowledges what is left
until the journal is empty (for as long again at most; what remains stays journaled for the next
start), exit 0.
"""

from __future__ import annotations

import logging
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import uvicorn
from sluicegate._core import Core, JournalError, StartError, StateError

from control.api.app import announce_admin_token, create_app
from control.api.errors import StartupError
from control.bridge.core_bridge import CoreBridge
from control.process.file_modes import restrict_umask, tighten_existing
from control.process.listen import HostPort
from control.process.logs import configure_logging
from control.process.settings import Settings, journal_dir, load_settings
from control.process.startup import prepare

log = logging.getLogger("sluicegate.serve")


def _core(settings: Settings) -> Core:
    """The core, its usage journal replayed into memory (not yet into SQL: see `prepare`)."""
    journal = journal_dir(settings)
    try:
        return Core(
            **settings.core.model_dump(),
            journal_dir=journal,
            journal_sync_ms=settings.usage.journal_sync_ms,
            access_log=settings.server.access_log or None,
        )
    except JournalError as e:
        raise StartupError(
            f"cannot open the usage journal ({journal}) or access log: {e}"
        ) from None


def _bind(address: str) -> socket.socket:
    where = HostPort.parse(address)
    family = socket.AF_INET6 if ":" in where.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((where.host, where.port))
    except OSError as e:
        sock.close()
        raise StartupError(f"cannot listen on {address} (admin): {e.strerror}") from None
    return sock


def _address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return str(HostPort(host, port))


class Stop:
    """Set by SIGTERM/SIGINT; later signals change nothing (the shutdown is under way)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.event.set()


def run(config: Path | None) -> int:
    # Before anything is created: the database, its WAL, the journal and logs are 0600.
    restrict_umask()
    stop = Stop()
    try:
        settings = load_settings(config)
    except StartupError as e:
        print(f"sluicegate serve: {e}", file=sys.stderr)
        return 2
    configure_logging(settings.server.log_level, settings.server.log_json)
    try:
        tighten_existing(settings)
        return _serve(settings, stop)
    except StartupError as e:
        log.error("%s", e)
        print(f"sluicegate serve: {e}", file=sys.stderr)
        return 1


def _serve(settings: Settings, stop: Stop) -> int:
    bridge = CoreBridge(_core(settings))
    ctx, token = prepare(settings, bridge, stop.event)
    redis = settings.redis
    if redis.url is not None:
        try:
            bridge.join_fleet(
                redis.url.get_secret_value(),
                prefix=redis.key_prefix,
                replica=ctx.replica.id,
                fail_closed=list(redis.fail_closed),
                timeout_ms=redis.timeout_ms,
            )
        except (StateError, ValueError) as e:
            raise StartupError(f"cannot join the fleet: {e}") from None
    try:
        admin_sock = _bind(settings.server.admin_listen)
        ctx.admin_port = admin_sock.getsockname()[1]
        # No upstream may point back at the admin API (the core adds its own data port).
        bridge.guard_listeners([_address(admin_sock)])
        try:
            data_address = bridge.start(settings.server.data_listen)
        except StartError as e:
            admin_sock.close()
            raise StartupError(
                f"cannot listen on {settings.server.data_listen} (data): {e}"
            ) from None
        ctx.replica.data_address = data_address
        ctx.replica.admin_address = _address(admin_sock)
        ctx.replica.name = (
            settings.fleet.name or f"{socket.gethostname()}:{data_address.rsplit(':', 1)[-1]}"
        )
        if token is not None:
            announce_admin_token(token)
        app = create_app(settings, bridge, context=ctx)
        server = uvicorn.Server(
            uvicorn.Config(app, log_config=None, lifespan="on", workers=1, access_log=True)
        )
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [admin_sock]}, name="sluicegate-admin"
        )
        thread.start()
        while not server.started:
            if not thread.is_alive():
                bridge.stop(0)
                raise StartupError("the admin API did not start (see the log above)")
            time.sleep(0.02)
        print(
            f"sluicegate serve listening on http://{data_address} "
            f"(admin http://{_address(admin_sock)})",
            flush=True,
        )
        while not stop.event.wait(0.5):
            if not thread.is_alive():
                log.error("the admin API stopped unexpectedly; shutting down")
                break
        grace = settings.server.shutdown_grace_seconds
        ctx.shutting_down.set()
        bridge.set_ready(False)
        unready = settings.server.unready_seconds
        if unready > 0:
            log.info("shutting down: unready, still serving for %.1fs", unready)
            time.sleep(unready)
        log.info("shutting down: draining in-flight requests (grace %.0fs)", grace)
        bridge.stop(grace)
        # The admin app's lifespan stops the usage drainer and flushes what is left.
        server.should_exit = True
        thread.join()
        log.info("stopped")
        return 0
    finally:
        ctx.engine.dispose()
