"""Headers cross by allow-list: a tenant cannot pick the operator's account or features upstream,
and nothing of the upstream's account, topology or credential comes back to the tenant."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.support.gateway import ConfigBuilder, member

CHAT = "/v1/chat/completions"
BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
SECRET = "sk-operator-credential-0123456789"


def test_client_headers_that_pick_accounts_or_features_never_reach_the_upstream(
    sim_factory, gateway_factory
) -> None:
    sim = sim_factory("--ttft-ms", "1")
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    # A provider the operator configured: its own organization, and anthropic-beta let through.
    operator = member(
        "m",
        sim.address,
        credential=SECRET,
        headers={"OpenAI-Organization": "org-operator"},
        forward_headers=["x-sim-echo", "anthropic-beta"],
    )
    cfg.pool("p", [operator]).route("m", ("p", "sim"))
    gw = gateway_factory(cfg, expose_upstream=False)
    hostile = {
        **key.headers,
        "x-sim-echo": "1",
        "OpenAI-Organization": "org-victim",
        "OpenAI-Project": "proj_victim",
        "OpenAI-Beta": "assistants=v2",
        "anthropic-beta": "prompt-caching-2024-07-31",
        "X-Forwarded-For": "10.0.0.1",
        "Cookie": "session=1",
    }
    r = httpx.post(gw.url + CHAT, json=BODY, headers=hostile, timeout=10)
    assert r.status_code == 200, r.text
    seen = r.json()["sim_request_headers"]
    assert seen["openai-organization"] == "org-operator"
    assert seen["anthropic-beta"] == "prompt-caching-2024-07-31"
    for gone in ["openai-project", "openai-beta", "x-forwarded-for", "cookie"]:
        assert gone not in seen, gone
    assert key.secret not in json.dumps(seen)
    # The gateway's topology is not named to tenants unless the operator asks for it.
    assert "x-sluicegate-upstream" not in r.headers


class _Upstream(http.server.BaseHTTPRequestHandler):
    """An upstream that misbehaves: leaks its account and host in headers, and quotes the
    credential it was sent in its error bodies."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", "0")))
        sent = self.headers.get("authorization", "")
        status = {"401": 401, "403": 403, "400": 400}.get(self.headers.get("x-want", ""), 200)
        if status == 200:
            body = json.dumps(
                {
                    "choices": [{"message": {"content": "ok"}}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                }
            ).encode()
        else:
            body = json.dumps({"error": {"message": f"bad request; you sent {sent}"}}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("openai-organization", "org-operator")
        self.send_header("x-ratelimit-remaining-tokens", "123")
        self.send_header("x-internal-host", "vllm-7.corp.internal")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _upstream() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_nothing_of_the_upstreams_account_or_credential_comes_back(gateway_factory) -> None:
    with _upstream() as address:
        cfg = ConfigBuilder().tenant("t")
        key = cfg.key("k", "t")
        cfg.pool("p", [member("m", address, credential=SECRET, forward_headers=["x-want"])])
        cfg.route("m", ("p", "up"))
        gw = gateway_factory(cfg, expose_upstream=False)
        ok = httpx.post(gw.url + CHAT, json=BODY, headers=key.headers, timeout=10)
        assert ok.status_code == 200
        for leaked in ["openai-organization", "x-ratelimit-remaining-tokens", "x-internal-host"]:
            assert leaked not in ok.headers, leaked
        # The upstream refusing the operator's credential is the gateway's own error.
        for code in ("401", "403"):
            refused = httpx.post(gw.url + CHAT, json=BODY, headers={**key.headers, "x-want": code})
            assert refused.status_code == 502
            assert refused.json()["error"]["code"] == "upstream_auth_failed"
            assert SECRET not in refused.text
        # Other upstream errors are relayed, with the credential scrubbed out.
        bad = httpx.post(gw.url + CHAT, json=BODY, headers={**key.headers, "x-want": "400"})
        assert bad.status_code == 400
        assert SECRET not in bad.text and "[redacted]" in bad.text
        assert "openai-organization" not in bad.headers
