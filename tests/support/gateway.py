"""An in-process data plane (`sluicegate._core.Core`) with a config built in the test."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from sluicegate import _core

PEPPER = "test-pepper-0123456789abcdef"


@dataclass
class Key:
    id: str
    secret: str
    tenant_id: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.secret}"}


@dataclass
class ConfigBuilder:
    tenants: list[dict[str, Any]] = field(default_factory=list)
    keys: list[dict[str, Any]] = field(default_factory=list)
    pools: list[dict[str, Any]] = field(default_factory=list)
    routes: list[dict[str, Any]] = field(default_factory=list)
    prices: list[dict[str, Any]] = field(default_factory=list)

    def tenant(self, tenant_id: str, **extra: Any) -> ConfigBuilder:
        self.tenants.append({"id": tenant_id, **extra})
        return self

    def key(self, key_id: str, tenant_id: str, **extra: Any) -> Key:
        secret = _core.generate_api_key()
        self.keys.append(
            {
                "id": key_id,
                "tenant_id": tenant_id,
                "hash": _core.hash_api_key(PEPPER, secret),
                "prefix": _core.api_key_prefix(secret),
                **extra,
            }
        )
        return Key(key_id, secret, tenant_id)

    def pool(self, pool_id: str, members: list[dict[str, Any]], **extra: Any) -> ConfigBuilder:
        self.pools.append({"id": pool_id, "members": members, **extra})
        return self

    def route(self, alias: str, *chain: tuple[str, str], **extra: Any) -> ConfigBuilder:
        targets = [{"pool": pool, "model": model} for pool, model in chain]
        self.routes.append({"alias": alias, "chain": targets, **extra})
        return self

    def payload(self) -> str:
        return json.dumps(
            {
                "auth": {"key_pepper": PEPPER},
                "tenants": self.tenants,
                "keys": self.keys,
                "pools": self.pools,
                "routes": self.routes,
                "prices": self.prices,
            }
        )


# The simulator's per-request controls: client headers the gateway passes only to members
# whose provider names them (its allow-list keeps every other client header back).
SIM_HEADERS = [
    "x-sim-fault",
    "x-sim-output-tokens",
    "x-sim-ttft-ms",
    "x-sim-itl-ms",
    "x-sim-echo",
    "x-sim-usage",
]


def member(member_id: str, address: str, kind: str = "openai", **extra: Any) -> dict[str, Any]:
    base = f"http://{address}/v1"
    return {
        "id": member_id,
        "kind": kind,
        "base_url": base,
        "forward_headers": SIM_HEADERS,
        **extra,
    }


class Gateway:
    """A started core; `drain()` collects usage events as they arrive."""

    def __init__(self, config: ConfigBuilder, **core_options: Any) -> None:
        # Tests read which member served from `x-sluicegate-upstream`.
        self.core = _core.Core(**{"workers": 2, "expose_upstream": True, **core_options})
        self.version = 1
        self.core.apply_config(self.version, config.payload())
        self.address = self.core.start("127.0.0.1:0")
        self.events: list[dict[str, Any]] = []

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def apply(self, config: ConfigBuilder) -> int:
        self.version += 1
        return self.core.apply_config(self.version, config.payload())

    def drain(self, expect: int = 0, timeout: float = 5.0) -> list[dict[str, Any]]:
        """Collect usage events until at least `expect` have arrived in total (or timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            batch = json.loads(self.core.drain_usage(1000, 50))
            self.events.extend(batch)
            if len(self.events) >= expect or time.monotonic() > deadline:
                return self.events

    def metrics(self) -> dict[str, Any]:
        return {f["name"]: f for f in json.loads(self.core.metrics_snapshot())["families"]}

    def stop(self) -> None:
        self.core.stop(1.0)
