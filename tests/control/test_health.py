"""Liveness and readiness on the admin port."""

from __future__ import annotations

from collections.abc import Callable

from tests.control.helpers import Harness


def test_ready_only_while_the_core_serves(harness_factory: Callable[..., Harness]) -> None:
    idle = harness_factory()
    assert idle.client.get("/healthz").json() == {"status": "ok"}
    not_serving = idle.client.get("/readyz")
    assert not_serving.status_code == 503
    assert not_serving.json()["core_running"] is False
    assert not_serving.json()["config_applied"] is True

    serving = harness_factory(start_core=True)
    ready = serving.client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json() == {
        "ready": True,
        "core_running": True,
        "config_applied": True,
        "database": True,
        "shutting_down": False,
    }
    serving.ctx.shutting_down.set()
    draining = serving.client.get("/readyz")
    assert draining.status_code == 503 and draining.json()["shutting_down"] is True
    assert serving.client.get("/healthz").status_code == 200
