"""Provider kinds beyond OpenAI's and Anthropic's own: Azure OpenAI (the deployment in the path,
`api-version` in the query, the credential in `api-key`) and an OpenAI-compatible server that
takes its credential in a header of its own, through the real data plane against the
simulator (which answers Azure's paths and checks the version and the credential)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import httpx

from tests.control.helpers import UPSTREAM_CREDENTIAL, Harness, error_fields
from tests.support.jsonl import whole_lines
from tests.support.procs import Proc

HELLO = [{"role": "user", "content": "hi"}]


def _key(harness: Harness) -> dict[str, str]:
    harness.admin.create_tenant(id="acme", name="Acme")
    key = harness.admin.create_key(tenant_id="acme", name="k")
    return {"Authorization": f"Bearer {key['key']}"}


def _record(path: Path, expect: int) -> list[dict[str, object]]:
    deadline = time.monotonic() + 10
    while True:
        rows = whole_lines(path)
        if len(rows) >= expect or time.monotonic() > deadline:
            return rows
        time.sleep(0.05)


def test_an_azure_pool_is_reached_at_its_deployments(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc], tmp_path: Path
) -> None:
    record = tmp_path / "record.jsonl"
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--record", str(record), "--ttft-ms", "1")
    harness = harness_factory(start_core=True)
    admin = harness.admin
    provider = admin.create_provider(
        id="azure",
        kind="azure_openai",
        base_url=f"http://{sim.address}/openai",
        credential=UPSTREAM_CREDENTIAL,
        api_version="2024-10-21",
    )
    assert (provider["kind"], provider["api_version"]) == ("azure_openai", "2024-10-21")
    admin.create_pool(id="az", members=[{"provider_id": "azure"}])
    admin.create_route(alias="gpt", chain=[{"pool": "az", "model": "gpt-4o-deploy"}])
    headers = _key(harness)
    chat = {"model": "gpt", "max_tokens": 3, "messages": HELLO}
    with httpx.Client(base_url=harness.data_url, headers=headers, timeout=30) as client:
        whole = client.post("/v1/chat/completions", json=chat)
        assert whole.status_code == 200, whole.text
        assert whole.json()["model"] == "gpt-4o-deploy"
        with client.stream("POST", "/v1/chat/completions", json=chat | {"stream": True}) as s:
            assert s.status_code == 200
            assert "[DONE]" in s.read().decode()
        embedded = client.post("/v1/embeddings", json={"model": "gpt", "input": "hello"})
        assert embedded.status_code == 200, embedded.text
        # Anthropic's API reaches the deployment translated into chat completions.
        translated = client.post("/v1/messages", json=chat)
        assert translated.status_code == 200, translated.text
        assert translated.json()["type"] == "message"
        # Azure serves the Responses API outside the deployment's path: not through this pool.
        refused = client.post("/v1/responses", json={"model": "gpt", "input": "hello"})
        assert refused.status_code == 400
    seen = _record(record, 4)
    assert [(r["endpoint"], r["model"], r["status"]) for r in seen] == [
        ("chat_completions", "gpt-4o-deploy", 200),
        ("chat_completions", "gpt-4o-deploy", 200),
        ("embeddings", "gpt-4o-deploy", 200),
        ("chat_completions", "gpt-4o-deploy", 200),
    ]


def test_an_openai_compatible_server_gets_the_credential_in_its_own_header(
    harness_factory: Callable[..., Harness], sim_factory: Callable[..., Proc]
) -> None:
    sim = sim_factory("--api-key", UPSTREAM_CREDENTIAL, "--ttft-ms", "1")
    harness = harness_factory(start_core=True)
    admin = harness.admin
    admin.create_provider(
        id="own",
        base_url=f"http://{sim.address}/v1",
        credential=UPSTREAM_CREDENTIAL,
        auth_header="Api-Key",
        forward_headers=["x-sim-echo"],
    )
    admin.create_pool(id="p", members=[{"provider_id": "own"}])
    admin.create_route(alias="m", chain=[{"pool": "p", "model": "sim-llama"}])
    headers = _key(harness) | {"x-sim-echo": "1"}
    body = {"model": "m", "max_tokens": 2, "messages": HELLO}
    answer = httpx.post(f"{harness.data_url}/v1/chat/completions", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    received = answer.json()["sim_request_headers"]
    assert received["api-key"] == UPSTREAM_CREDENTIAL and "authorization" not in received
    # Back to Authorization: Bearer.
    assert admin.patch("/v1/admin/providers/own", {"auth_header": None}).status_code == 200
    answer = httpx.post(f"{harness.data_url}/v1/chat/completions", json=body, headers=headers)
    assert answer.json()["sim_request_headers"]["authorization"] == f"Bearer {UPSTREAM_CREDENTIAL}"


def test_each_kind_takes_its_own_fields(harness: Harness) -> None:
    admin = harness.admin
    base = {"base_url": "http://127.0.0.1:9/openai"}
    cases = [
        ({"kind": "azure_openai"}, "api_version"),
        ({"kind": "openai", "api_version": "2024-10-21"}, "api_version"),
        ({"kind": "anthropic", "auth_header": "api-key"}, "auth_header"),
        ({"kind": "azure_openai", "api_version": "2024&x=1"}, "api_version"),
        ({"kind": "openai", "auth_header": "bad header"}, "auth_header"),
    ]
    for extra, field in cases:
        refused = admin.post("/v1/admin/providers", base | extra)
        assert refused.status_code == 422, extra
        assert set(error_fields(refused)) == {field}, extra
    # Mixed in one pool: Azure and OpenAI speak one API, Anthropic another.
    admin.create_provider(id="az", kind="azure_openai", api_version="2024-10-21", **base)
    admin.create_provider(id="oa", kind="openai", base_url="http://127.0.0.1:9/v1")
    admin.create_provider(id="an", kind="anthropic", base_url="http://127.0.0.1:9/v1")
    mixed = [{"provider_id": "az"}, {"provider_id": "oa"}]
    assert admin.post("/v1/admin/pools", {"id": "mixed", "members": mixed}).status_code == 201
    apart = [{"provider_id": "az"}, {"provider_id": "an"}]
    refused = admin.post("/v1/admin/pools", {"id": "apart", "members": apart})
    assert refused.status_code == 422 and "members[1].provider_id" in error_fields(refused)
    # A deployment name that would change Azure's path is refused by the core, naming it.
    admin.create_pool(id="azp", members=[{"provider_id": "az"}])
    bad = admin.post("/v1/admin/routes", {"alias": "x", "chain": [{"pool": "azp", "model": "a/b"}]})
    assert bad.status_code == 422, bad.text
