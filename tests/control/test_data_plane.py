"""Through the real data plane: changes made in the admin API take effect on the next request.
Two simulators behind one pool, the `openai` SDK as the client."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest
import sqlalchemy as sa

from control.usage.models import UsageRecord
from tests.control.helpers import Api, Harness
from tests.support.procs import Proc, start_sim

UPSTREAM_SECRET = "sk-upstream-for-the-simulators"


@pytest.fixture(scope="module")
def sims(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Proc]]:
    """Two simulators shared by the module's tests (they keep no state between requests)."""
    tmp = tmp_path_factory.mktemp("sims")
    args = ("--api-key", UPSTREAM_SECRET, "--ttft-ms", "5", "--itl-ms", "1")
    started = {name: start_sim(tmp, *args, name=name) for name in ("a", "b")}
    yield started
    for proc in started.values():
        proc.stop()


@pytest.fixture
def gateway(harness_factory: Callable[..., Harness], sims: dict[str, Proc]) -> tuple[Harness, Api]:
    harness = harness_factory(start_core=True)
    admin = harness.admin
    for name, sim in sims.items():
        admin.create_provider(
            id=f"sim-{name}", base_url=f"http://{sim.address}/v1", credential=UPSTREAM_SECRET
        )
    admin.create_pool(id="sims", members=[{"provider_id": "sim-a"}, {"provider_id": "sim-b"}])
    admin.create_route(alias="chat", chain=[{"pool": "sims", "model": "sim-llama"}])
    admin.create_tenant(id="acme", name="Acme")
    return harness, admin


def client(harness: Harness, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=harness.data_url + "/v1", api_key=key, max_retries=0)


def ask(harness: Harness, key: str, stream: bool = False) -> str:
    c = client(harness, key)
    messages: Any = [{"role": "user", "content": "hello"}]
    if stream:
        chunks = c.chat.completions.create(
            model="chat", messages=messages, max_tokens=5, stream=True
        )
        return "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    answer = c.chat.completions.create(model="chat", messages=messages, max_tokens=5)
    return answer.choices[0].message.content or ""


def refused(harness: Harness, key: str) -> bool:
    try:
        ask(harness, key)
    except openai.AuthenticationError:
        return True
    return False


def test_key_lifecycle_through_the_gateway(gateway: tuple[Harness, Api]) -> None:
    harness, admin = gateway
    key = admin.create_key(tenant_id="acme")
    assert ask(harness, key["key"]) and ask(harness, key["key"], stream=True)

    # Rotation with overlap: both secrets work until the overlap ends.
    rotated = admin.post(f"/v1/admin/keys/{key['id']}/rotate", {"overlap_seconds": 300}).json()
    new = rotated["key"]
    assert ask(harness, new["key"]) and ask(harness, key["key"])
    # Ending the overlap early (revoking the old key) is in force for the very next request.
    admin.post(f"/v1/admin/keys/{key['id']}/revoke")
    assert refused(harness, key["key"])
    assert ask(harness, new["key"])

    # Revocation is in force when the call returns: the very next request is refused (which
    # bounds "refused within 1 s" without measuring time).
    assert admin.post(f"/v1/admin/keys/{new['id']}/revoke").status_code == 200
    assert refused(harness, new["key"])


def test_disable_and_models_and_expiry(gateway: tuple[Harness, Api]) -> None:
    harness, admin = gateway
    key = admin.create_key(tenant_id="acme")
    admin.patch("/v1/admin/tenants/acme", {"status": "disabled"})
    assert refused(harness, key["key"])
    admin.patch("/v1/admin/tenants/acme", {"status": "active"})
    assert ask(harness, key["key"])

    admin.patch(f"/v1/admin/keys/{key['id']}", {"models": ["other"]})
    with pytest.raises(openai.APIStatusError) as not_allowed:
        ask(harness, key["key"])
    assert not_allowed.value.status_code in (403, 404)
    admin.patch(f"/v1/admin/keys/{key['id']}", {"models": None, "status": "disabled"})
    assert refused(harness, key["key"])


def test_rotation_overlap_ends_on_time(gateway: tuple[Harness, Api]) -> None:
    harness, admin = gateway
    key = admin.create_key(tenant_id="acme")
    admin.post(f"/v1/admin/keys/{key['id']}/rotate", {"overlap_seconds": 1})
    assert ask(harness, key["key"])
    deadline = time.monotonic() + 5
    while not refused(harness, key["key"]):
        assert time.monotonic() < deadline, "the old key outlived its overlap"
        time.sleep(0.2)
    assert admin.get(f"/v1/admin/keys/{key['id']}").json()["status"] == "revoked"


def test_usage_rows_reach_sql(gateway: tuple[Harness, Api]) -> None:
    harness, admin = gateway
    key = admin.create_key(tenant_id="acme")
    for stream in (False, True, False):
        ask(harness, key["key"], stream=stream)
    deadline = time.monotonic() + 5
    while len(rows := admin.all_pages("/v1/admin/usage", key_id=key["id"])) < 3:
        assert time.monotonic() < deadline, rows
        time.sleep(0.05)
    assert {r["upstream"] for r in rows} <= {"sim-a", "sim-b"}
    assert all(r["tenant_id"] == "acme" and r["model"] == "chat" for r in rows)
    assert sorted(r["stream"] for r in rows) == [False, False, True]
    assert all(r["completion_tokens"] == 5 for r in rows)
    with harness.ctx.sessions() as session:
        count = session.scalar(sa.select(sa.func.count()).select_from(UsageRecord))
    assert count == 3
