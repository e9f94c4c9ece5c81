"""Contracts written once and read elsewhere, each guarded here by a test that fails when a copy
drifts from its source:
- a pool's timeouts and policies: their defaults are the core's (`_core.config_defaults()`, from
  `model.rs`), the API's partial and whole models have the same fields, the CLI has an option
  for each;
- limit names: `control.limits.LIMITS` is the list; the core's `Limits`, the snapshot, the
  schemas and the tables have exactly those;
- the usage event: its fields are what the core emits (a real event, drained from a real core);
  the stored columns, the PostgreSQL record type, the API's rows and the tests' fixture agree."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import httpx
import pytest
from pydantic import BaseModel
from sluicegate import _core
from sluicegate.cli.pool_options import OPTIONS
from sqlalchemy import String

from control.keys.models import ApiKey
from control.keys.schemas import KeyCreate, KeyOut, KeyUpdate
from control.limits import LIMITS
from control.pools import policies
from control.pools.defaults import CORE_DEFAULTS
from control.pools.schemas import Timeouts, TimeoutsOut, TimeoutsUpdate
from control.tenants.models import Tenant
from control.tenants.schemas import TenantCreate, TenantOut, TenantUpdate
from control.usage import writer
from control.usage.events import BETWEEN_EVENTS, FIELDS
from control.usage.models import UsageRecord
from control.usage.schemas import UsageOut
from tests.control.helpers import Api, Harness
from tests.control.usage_events import event
from tests.support.gateway import ConfigBuilder, member

# Section of a pool -> (the whole model: stored and read back, the partial one: sent).
POOL_MODELS: dict[str, tuple[type[BaseModel], type[BaseModel]]] = {
    "timeouts": (Timeouts, TimeoutsUpdate),
    "admission": (policies.Admission, policies.AdmissionPatch),
    "retry": (policies.Retry, policies.RetryPatch),
    "ejection": (policies.Ejection, policies.EjectionPatch),
    "health_check": (policies.HealthCheck, policies.HealthCheckPatch),
}


def _leaves(value: dict[str, Any], path: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for name, item in value.items():
        out |= _leaves(item, (*path, name)) if isinstance(item, dict) else {(*path, name)}
    return out


def test_the_pool_models_default_to_the_cores_defaults() -> None:
    assert set(POOL_MODELS) == set(CORE_DEFAULTS)
    for section, (whole, _) in POOL_MODELS.items():
        assert whole().model_dump(mode="json") == CORE_DEFAULTS[section], section


def test_partial_and_read_models_have_the_fields_of_the_whole() -> None:
    for section, (whole, partial) in POOL_MODELS.items():
        assert set(partial.model_fields) == set(whole.model_fields), section
    assert set(policies.LanePatch.model_fields) == set(policies.Lane.model_fields)
    assert set(TimeoutsOut.model_fields) == set(Timeouts.model_fields)


def test_the_cli_has_an_option_for_every_pool_setting_of_the_core() -> None:
    settings = {(s, *path) for s, defaults in CORE_DEFAULTS.items() for path in _leaves(defaults)}
    assert {option.path for option in OPTIONS} == settings
    assert len({option.name for option in OPTIONS}) == len(OPTIONS)


def _fields_the_core_expects(payload: str) -> set[str]:
    """The fields of the struct where the core refused an unknown one (serde's message lists
    them: "unknown field `x`, expected one of `a`, `b`")."""
    with pytest.raises(_core.ConfigError) as refused:
        _core.Core().apply_config(1, payload)
    message = str(refused.value.args[2])
    assert "unknown field `not_a_limit`" in message, message
    return set(re.findall(r"`(\w+)`", message.split("expected one of", 1)[1]))


def test_the_cores_limits_are_control_limits() -> None:
    tenant = ConfigBuilder().tenant("t", limits={"not_a_limit": 1})
    assert _fields_the_core_expects(tenant.payload()) == set(LIMITS)
    key = ConfigBuilder().tenant("t")
    key.key("k", "t", limits={"not_a_limit": 1})
    assert _fields_the_core_expects(key.payload()) == set(LIMITS)


def test_schemas_tables_and_snapshot_carry_every_limit(harness: Harness, admin: Api) -> None:
    for schema in (TenantCreate, TenantUpdate, TenantOut, KeyCreate, KeyUpdate, KeyOut):
        assert set(LIMITS) <= set(schema.model_fields), schema.__name__
    for table in (Tenant.__table__, ApiKey.__table__):
        assert set(LIMITS) <= set(table.columns.keys()), table.name
    admin.create_tenant(id="acme", name="Acme", rpm=60)
    admin.create_key(tenant_id="acme", tpm=100)
    with harness.ctx.sessions() as session:
        payload = json.loads(harness.ctx.mutator.snapshot(session).payload)
    assert set(payload["tenants"][0]["limits"]) == set(LIMITS)
    assert set(payload["keys"][0]["limits"]) == set(LIMITS)


def _failed_requests(gateway_factory: Any, count: int) -> Any:
    """A gateway that served `count` requests, each one usage event: nothing listens on port 1,
    so a request reaches routing and fails there."""
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", "127.0.0.1:1")], retry={"max_attempts": 1})
    cfg.route("chat", ("p", "up"))
    gateway = gateway_factory(cfg)
    body = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
    for _ in range(count):
        answer = httpx.post(f"{gateway.url}/v1/chat/completions", json=body, headers=key.headers)
        assert answer.status_code == 502, answer.text
    return gateway


def test_the_core_emits_the_usage_fields_python_stores(gateway_factory: Any) -> None:
    events = _failed_requests(gateway_factory, 1).drain(expect=1)
    assert len(events) == 1
    assert sorted(events[0]) == sorted(FIELDS)


def test_the_core_separates_a_batchs_events_where_the_writer_cuts_it(gateway_factory: Any) -> None:
    """PostgreSQL's writer cuts a batch between events without parsing it (`writer.slices`):
    the core writes `BETWEEN_EVENTS` there."""
    gateway = _failed_requests(gateway_factory, 3)
    deadline = time.monotonic() + 5
    while gateway.core.usage_backlog < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    text = gateway.core.drain_usage(1000, 50)
    assert text.count(BETWEEN_EVENTS) == 2
    parts = writer.slices(text, 1)
    assert [json.loads(part) for part in parts] == [[e] for e in json.loads(text)]


def test_every_copy_of_the_usage_fields_agrees() -> None:
    columns = UsageRecord.__table__.columns
    assert set(FIELDS) <= set(columns.keys())
    assert set(FIELDS) - {"seq"} <= set(UsageOut.model_fields)  # seq: the journal's, not shown
    # PostgreSQL reads every field not stored as text with the type `writer` names for it.
    typed = {name for name in FIELDS if not isinstance(columns[name].type, String)}
    assert set(writer._PG_TYPES) == typed
    assert sorted(event("r")) == sorted(FIELDS)
