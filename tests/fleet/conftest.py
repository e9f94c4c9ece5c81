"""Fleet tests: real PostgreSQL (a schema of their own) and a private Redis; skipped with a reason
where the services are missing, failed under CI=true."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.harness import Fleet, ensure_services, fleet
from tests.support.procs import Proc, start_sim


@pytest.fixture
def services() -> None:
    problem = ensure_services()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(problem)
        pytest.skip(problem)


@pytest.fixture
def new_fleet(services: None, tmp_path: Path) -> Iterator[Fleet]:
    with fleet(tmp_path) as f:
        yield f


@pytest.fixture
def sims(tmp_path: Path) -> Iterator[Callable[..., Proc]]:
    started: list[Proc] = []

    def start(*args: str) -> Proc:
        proc = start_sim(
            tmp_path,
            "--record",
            str(tmp_path / f"sim{len(started)}.jsonl"),
            *args,
            name=f"sim{len(started)}",
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stop()


def configure(f: Fleet, sim: Proc, tenant: str = "acme", **key: Any) -> dict[str, Any]:
    """A provider and pool of `sim`, route `chat`, a tenant and a key (through replica 0)."""
    with f.admin() as api:
        for path, body in [
            (
                "/v1/admin/providers",
                {
                    "id": "sim",
                    "kind": "openai",
                    "base_url": f"{sim.url}/v1",
                    "forward_headers": [
                        "x-sim-fault",
                        "x-sim-ttft-ms",
                        "x-sim-itl-ms",
                        "x-sim-output-tokens",
                    ],
                },
            ),
            ("/v1/admin/pools", {"id": "sims", "members": [{"provider_id": "sim"}]}),
            ("/v1/admin/routes", {"alias": "chat", "chain": [{"pool": "sims", "model": "m"}]}),
        ]:
            r = api.post(path, json=body)
            assert r.status_code in (200, 201, 409), r.text
        r = api.post("/v1/admin/tenants", json={"id": tenant, "name": tenant})
        assert r.status_code in (200, 201, 409), r.text
        created = api.post("/v1/admin/keys", json={"tenant_id": tenant, **key})
        assert created.status_code in (200, 201), created.text
        return dict(created.json())
