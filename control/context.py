"""What every request handler and service needs: settings, database, core bridge, secrets and
the mutator. Built once at start (`control.process.startup.prepare`), kept on `app.state.ctx`."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from fastapi import Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from control.api.access.ratelimit import AdminRateLimits
from control.bridge.core_bridge import CoreBridge
from control.bridge.mutation import Mutator
from control.crypto import CredentialCipher
from control.fleet.identity import Replica
from control.process.admin_tls import AdminTls
from control.process.listen import HostPort
from control.process.settings import Settings


@dataclass
class ControlContext:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    bridge: CoreBridge
    pepper: str
    cipher: CredentialCipher
    mutator: Mutator
    # Each admin token's call rate (`admin.*_token_rpm`), in memory.
    admin_limits: AdminRateLimits
    # Set from the first shutdown signal on: readiness answers 503.
    shutting_down: threading.Event = field(default_factory=threading.Event)
    # The admin listener's bound port once known (the configured one may be 0).
    admin_port: int | None = None
    # Set when a drill starts: the drill closer recomputes when it next has an end to record.
    drills_changed: threading.Event = field(default_factory=threading.Event)
    # Set when a price version is added: the price activator recomputes its next wake-up.
    prices_changed: threading.Event = field(default_factory=threading.Event)
    # This process as a replica of the fleet.
    replica: Replica = field(default_factory=Replica)
    # The PostgreSQL schema the fleet shares (its notifications and leader lock are named after
    # it); None with SQLite, where this process is the whole fleet.
    fleet_schema: str | None = None
    # TLS on the admin port (its certificate's expiry and reloads are in /metrics).
    admin_tls: AdminTls | None = None

    def own_endpoints(self) -> set[HostPort]:
        """The gateway's own listeners: upstreams may not point back at them."""
        own = {
            HostPort.parse(self.settings.server.data_listen),
            HostPort.parse(self.settings.server.admin_listen),
        }
        if self.bridge.address is not None:
            own.add(HostPort.parse(self.bridge.address))
        if self.admin_port is not None:
            admin = HostPort.parse(self.settings.server.admin_listen)
            own.add(HostPort(admin.host, self.admin_port))
        return {hp for hp in own if hp.port != 0}


def context_of(request: Request) -> ControlContext:
    ctx: ControlContext = request.app.state.ctx
    return ctx
