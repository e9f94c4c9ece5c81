"""Who this replica is: an id unique to this process start (a restarted replica is a new one, so
it never inherits what its previous life held in Redis) and a name for people."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field


def _new_id() -> str:
    host = socket.gethostname().split(".")[0][:40] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


@dataclass
class Replica:
    id: str = field(default_factory=_new_id)
    name: str = ""
    data_address: str = ""
    admin_address: str = ""

    def label(self) -> str:
        return self.name or self.id
