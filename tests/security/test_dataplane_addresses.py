"""No member reaches the gateway's own listeners, whatever name it is given, and none reaches a
cloud metadata address, internal or not, in any IPv6 disguise."""

from __future__ import annotations

import socket

import httpx
import pytest
from sluicegate import _core

from tests.support.gateway import ConfigBuilder, member

CHAT = "/v1/chat/completions"
BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}


def _accepted(gw) -> float:
    return gw.metrics()["sluicegate_connections_accepted_total"]["samples"][0]["value"]


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.0.0.2", "[::ffff:127.0.0.1]"])
def test_a_route_pointed_at_the_gateway_itself_never_connects(gateway_factory, host: str) -> None:
    cfg = ConfigBuilder().tenant("t")
    key = cfg.key("k", "t")
    cfg.pool("p", [member("m", "127.0.0.1:9")]).route("m", ("p", "up"))
    gw = gateway_factory(cfg)
    port = gw.address.rsplit(":", 1)[1]
    # Even marked internal, and by a name that resolves to loopback.
    looped = ConfigBuilder(tenants=cfg.tenants, keys=cfg.keys)
    looped.pool("p", [member("m", f"{host}:{port}", internal=True, credential=key.secret)])
    looped.route("m", ("p", "up"))
    gw.apply(looped)
    before = _accepted(gw)
    r = httpx.post(gw.url + CHAT, json=BODY, headers=key.headers, timeout=10)
    assert r.status_code in (502, 503), r.text
    # Only the test's own connection was accepted: the gateway never called itself.
    assert _accepted(gw) - before == 1


def test_the_admin_listener_is_unreachable_too(gateway_factory) -> None:
    admin = socket.socket()
    admin.bind(("127.0.0.1", 0))
    admin.listen(8)
    admin.settimeout(0.5)
    port = admin.getsockname()[1]
    try:
        cfg = ConfigBuilder().tenant("t")
        key = cfg.key("k", "t")
        cfg.pool("p", [member("m", f"localhost:{port}", internal=True)]).route("m", ("p", "up"))
        gw = gateway_factory(cfg)
        gw.core.guard_listeners([f"127.0.0.1:{port}"])
        r = httpx.post(gw.url + CHAT, json=BODY, headers=key.headers, timeout=10)
        assert r.status_code in (502, 503)
        with pytest.raises(TimeoutError):
            admin.accept()
    finally:
        admin.close()


@pytest.mark.parametrize(
    "host",
    [
        "169.254.169.254",
        "[::ffff:169.254.169.254]",
        "[64:ff9b::a9fe:a9fe]",
        "[2002:a9fe:a9fe::]",
        "[::a9fe:a9fe]",
        "100.100.100.200",
        "[fd00:ec2::254]",
    ],
)
def test_metadata_addresses_are_refused_even_for_internal_members(host: str) -> None:
    core = _core.Core(workers=1)
    cfg = ConfigBuilder().tenant("t")
    cfg.pool("p", [member("m", f"{host}:80", internal=True)]).route("m", ("p", "up"))
    with pytest.raises(_core.ConfigError, match="metadata"):
        core.apply_config(1, cfg.payload())
