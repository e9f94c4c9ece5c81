"""`host:port` listen addresses, as the config file and the core write them."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


@dataclass(frozen=True)
class HostPort:
    host: str
    port: int

    @classmethod
    def parse(cls, value: str) -> HostPort:
        host, sep, port_text = value.rpartition(":")
        if not sep or not host or not port_text.isdigit():
            raise ValueError("must be HOST:PORT, e.g. 127.0.0.1:8081 or [::1]:8081")
        port = int(port_text)
        if port > 65535:
            raise ValueError("port must be 0-65535")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
            ipaddress.IPv6Address(host)
        return cls(host, port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"
