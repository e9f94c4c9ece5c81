"""schemathesis against the admin API's own OpenAPI document (in-process ASGI, admin token):
no 500s, every status, header and body as documented. Bounded: a few examples per operation and
generation mode, derandomized so that a run is reproducible."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sluicegate._core import Core
from starlette.testclient import TestClient

from control.api.app import create_app
from control.bridge.core_bridge import CoreBridge
from control.process.settings import Settings
from control.process.startup import prepare
from tests.control.conftest import make_settings
from tests.control.helpers import ADMIN_TOKEN, Api

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
EXAMPLES = {GenerationMode.POSITIVE: 10, GenerationMode.NEGATIVE: 5}


def _operations() -> list[str]:
    spec = create_app(Settings(), CoreBridge(Core(workers=1))).openapi()
    return [f"{method.upper()} {path}" for path, ops in spec["paths"].items() for method in ops]


@pytest.fixture(scope="module")
def admin_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FastAPI]:
    path: Path = tmp_path_factory.mktemp("openapi")
    settings = make_settings(f"sqlite:///{path}/fuzz.db")
    ctx, _ = prepare(settings, CoreBridge(Core(workers=1)))
    ctx.bridge.start("127.0.0.1:0")  # so that /readyz can say ready
    app = create_app(settings, ctx.bridge, context=ctx)
    admin = Api(TestClient(app), ADMIN_TOKEN)
    admin.create_tenant(id="acme", name="Acme", rpm=100)
    admin.create_provider(id="up", base_url="http://127.0.0.1:9/v1", credential="sk-fuzz-secret")
    admin.create_pool(id="main", members=[{"provider_id": "up"}])
    admin.create_route(alias="chat", chain=[{"pool": "main", "model": "m"}])
    admin.create_key(tenant_id="acme")
    yield app
    ctx.bridge.stop(1.0)
    ctx.engine.dispose()


@pytest.fixture(scope="module")
def api_schema(admin_app: FastAPI) -> Any:
    return schemathesis.openapi.from_asgi("/openapi.json", admin_app)


@pytest.mark.parametrize("operation", _operations())
def test_operation_conforms_to_the_schema(api_schema: Any, operation: str) -> None:
    method, path = operation.split(" ", 1)
    api_operation = api_schema[path][method]
    headers = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    for mode, examples in EXAMPLES.items():
        try:
            strategy = api_operation.as_strategy(generation_mode=mode)
        except Exception as e:  # an operation without inputs has no negative cases
            if mode is GenerationMode.NEGATIVE:
                continue
            raise AssertionError(f"no strategy for {operation}: {e}") from e

        @given(case=strategy)
        @settings(
            max_examples=examples,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            run()
        except Unsatisfiable:
            # No way to make an invalid request when the operation takes no input.
            if mode is not GenerationMode.NEGATIVE:
                raise


def test_every_operation_is_covered(api_schema: Any) -> None:
    listed = {f"{op.ok().method.upper()} {op.ok().path}" for op in api_schema.get_all_operations()}
    assert listed == set(_operations())
