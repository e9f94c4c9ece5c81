"""`sluicegate serve`: the data plane and the admin API in one process; Python owns the signals.

Start: umask 0o077, settings, files an older release left readable restricted (`file_modes.py`),
the core (its usage journal opened and replayed into memory), database and migrations, secrets,
the journal's events written to SQL and acknowledged, first snapshot applied, data listener,
admin listener, then one line on stdout:
`sluicegate serve listening on http://DATA (admin http://ADMIN)` (`https://` for a port with TLS).
No request is served before the journal has been replayed.
SIGHUP: the certificates of both ports are read again (a refused pair leaves the one in force),
and the access log and the process log reopen their files under their names (logrotate's
convention). The certificate files are also checked for a change every `tls.watch_ms`.
SIGTERM or SIGINT: readiness off, the core stops accepting and lets in-flight requests finish
within `server.shutdown_grace_seconds`, the usage drainer writes and acknowledges what is left
until the journal is empty (for as long again at most; what remains stays journaled for the next
start), exit 0.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import uvicorn
from sluicegate._core import Core, JournalError, LogError, StartError, StateError, TlsError

from control.api.app import announce_admin_token, create_app
from control.api.errors import StartupError
from control.bridge.core_bridge import CoreBridge
from control.process.admin_protocol import AdminProtocol
from control.process.admin_tls import AdminTls
from control.process.file_modes import restrict_umask, tighten_existing
from control.process.listen import HostPort
from control.process.logs import configure_logging, reopen_process_log
from control.process.settings import Settings, journal_dir, load_settings
from control.process.startup import prepare
from control.process.thread_names import named

log = logging.getLogger("sluicegate.serve")


def _core(settings: Settings) -> Core:
    """The core, its usage journal replayed into memory (not yet into SQL: see `prepare`)."""
    journal = journal_dir(settings)
    server, tls = settings.server, settings.tls
    try:
        return Core(
            **settings.core.model_dump(),
            journal_dir=journal,
            journal_sync_ms=settings.usage.journal_sync_ms,
            progress_every_events=settings.usage.progress_every_events,
            access_log=server.access_log or None,
            access_log_rotate_bytes=server.access_log_rotate_bytes,
            access_log_rotate_keep=server.access_log_rotate_keep,
            tls_cert_file=tls.cert_file,
            tls_key_file=tls.key_file,
            tls_watch_ms=tls.watch_ms,
            **settings.tracing.core_options(settings.fleet.name or socket.gethostname()),
            **settings.metrics.core_options(),
        )
    except JournalError as e:
        raise StartupError(f"cannot open the usage journal ({journal}): {e}") from None
    except LogError as e:
        raise StartupError(f"cannot open the access log: {e}") from None
    except TlsError as e:
        raise StartupError(f"data port TLS: {e.args[0]}") from None
    except ValueError as e:
        raise StartupError(f"invalid tracing or metrics settings: {e}") from None


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
    """Set by SIGTERM/SIGINT; later signals change nothing (the shutdown is under way). SIGHUP
    asks for certificates and log files to be read and opened again; the main loop does it (a
    signal handler only sets flags)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.wake = threading.Event()
        self.hangup = False
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        signal.signal(signal.SIGHUP, self._on_hangup)

    def _on_signal(self, signum: int, frame: object) -> None:
        self.event.set()
        self.wake.set()

    def _on_hangup(self, signum: int, frame: object) -> None:
        self.hangup = True
        self.wake.set()


def _live_context(
    context: ssl.SSLContext,
) -> Callable[[uvicorn.Config, Callable[[], ssl.SSLContext]], ssl.SSLContext]:
    """uvicorn's context factory answering the one live context (reloaded in place)."""
    return lambda _config, _default: context


def _scheme(tls: bool) -> str:
    return "https" if tls else "http"


class Reloads:
    """What SIGHUP and the file watch do, in the main thread, off every request path."""

    def __init__(self, bridge: CoreBridge, admin_tls: AdminTls | None, watch_ms: int) -> None:
        self._bridge, self._admin_tls = bridge, admin_tls
        self.interval = watch_ms / 1000 if watch_ms > 0 else None

    def hangup(self) -> None:
        log.info("SIGHUP: reloading certificates, reopening log files")
        reopen_process_log()
        try:
            self._bridge.reopen_access_log()
        except LogError as e:
            log.error("%s; the file in use stays in use", e)
        if self._bridge.tls:
            # A refusal is logged and counted by the core; the certificate in force stays.
            with contextlib.suppress(TlsError):
                self._bridge.reload_tls()
        if self._admin_tls is not None:
            self._admin_tls.reload()

    def watch(self) -> None:
        # The core watches its own files on its runtime; the admin port's are checked here.
        if self._admin_tls is not None:
            self._admin_tls.check_files()


def run(config: Path | None) -> int:
    # Before anything is created: the database, its WAL, the journal and logs are 0600.
    restrict_umask()
    stop = Stop()
    try:
        settings = load_settings(config)
    except StartupError as e:
        print(f"sluicegate serve: {e}", file=sys.stderr)
        return 2
    server = settings.server
    try:
        configure_logging(
            server.log_level,
            server.log_json,
            server.log_file,
            server.log_rotate_bytes,
            server.log_rotate_keep,
        )
        tighten_existing(settings)
        return _serve(settings, stop)
    except StartupError as e:
        log.error("%s", e)
        print(f"sluicegate serve: {e}", file=sys.stderr)
        return 1


def _serve(settings: Settings, stop: Stop) -> int:
    bridge = CoreBridge(_core(settings))
    tls = settings.tls
    admin_tls = (
        AdminTls(tls.admin_cert_file, tls.admin_key_file, tls.admin_client_ca_file)
        if tls.admin_cert_file is not None and tls.admin_key_file is not None
        else None
    )
    ctx, token = prepare(settings, bridge, stop.event)
    ctx.admin_tls = admin_tls
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
        # With [metrics] data_port, the data port relays the admin API's exposition.
        bridge.metrics_source(_address(admin_sock))
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
        # With TLS, the live context: its certificate reloads reach new handshakes.
        live = None if admin_tls is None else admin_tls.context
        config = uvicorn.Config(
            app,
            log_config=None,
            lifespan="on",
            workers=1,
            access_log=True,
            # A head it cannot parse is answered in the API's error format (`admin_protocol.py`).
            http=AdminProtocol,
            ssl_context_factory=None if live is None else _live_context(live),
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=named(server.run), kwargs={"sockets": [admin_sock]}, name="sluicegate-admin"
        )
        thread.start()
        while not server.started:
            if not thread.is_alive():
                bridge.stop(0)
                raise StartupError("the admin API did not start (see the log above)")
            time.sleep(0.02)
        print(
            f"sluicegate serve listening on {_scheme(bridge.tls)}://{data_address} "
            f"(admin {_scheme(admin_tls is not None)}://{_address(admin_sock)})",
            flush=True,
        )
        reloads = Reloads(bridge, admin_tls, tls.watch_ms)
        tick = min(0.5, reloads.interval or 0.5)
        next_watch = time.monotonic()
        while not stop.event.is_set():
            stop.wake.wait(tick)
            stop.wake.clear()
            if stop.event.is_set():
                break
            if not thread.is_alive():
                log.error("the admin API stopped unexpectedly; shutting down")
                break
            if stop.hangup:
                stop.hangup = False
                reloads.hangup()
            if reloads.interval is not None and time.monotonic() >= next_watch:
                next_watch = time.monotonic() + reloads.interval
                reloads.watch()
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
