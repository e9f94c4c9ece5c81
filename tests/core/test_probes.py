"""The load balancer's contract on the data port, without a key: `/healthz` while the process
serves, `/readyz` while it should get new traffic."""

from __future__ import annotations

import httpx
from sluicegate import _core

from tests.support.gateway import ConfigBuilder, member

CHAT = "/v1/chat/completions"


def test_readiness_follows_the_snapshot_and_the_stop(sim_factory) -> None:
    sim = sim_factory("--ttft-ms", "1")
    core = _core.Core(workers=1)
    url = "http://" + core.start("127.0.0.1:0")
    try:
        assert httpx.get(url + "/healthz").status_code == 200
        unready = httpx.get(url + "/readyz")
        assert unready.status_code == 503 and unready.json()["reason"] == "no configuration yet"
        cfg = ConfigBuilder().tenant("t")
        key = cfg.key("k", "t")
        cfg.pool("p", [member("m", sim.address)]).route("m", ("p", "sim"))
        core.apply_config(1, cfg.payload())
        assert httpx.get(url + "/readyz").json() == {"status": "ready"}
        # Stopping: new traffic should go elsewhere, but what still arrives is served.
        core.set_ready(False)
        stopping = httpx.get(url + "/readyz")
        assert stopping.status_code == 503 and stopping.json()["reason"] == "stopping"
        body = {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(url + CHAT, json=body, headers=key.headers).status_code == 200
        assert httpx.get(url + "/healthz").status_code == 200
        core.set_ready(True)
        assert httpx.get(url + "/readyz").status_code == 200
    finally:
        core.stop(0)
