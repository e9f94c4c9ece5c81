"""The Core object: start, stop, restart, config ACK/NACK, typed errors, no leaked threads."""

from __future__ import annotations

import json
import os
import time

import httpx
import pytest
from sluicegate import _core

from tests.support.gateway import ConfigBuilder, member


def threads() -> set[str]:
    """Ids of this process's threads. Other tests' threads may end meanwhile, so a leak is a
    thread that was not there before, not a higher count."""
    return set(os.listdir("/proc/self/task"))


def minimal_config(address: str = "127.0.0.1:9") -> ConfigBuilder:
    cfg = ConfigBuilder().tenant("t")
    cfg.pool("p", [member("m", address)]).route("alias", ("p", "up"))
    return cfg


def test_start_stop_restart_leaks_no_threads() -> None:
    core = _core.Core(workers=2)
    core.apply_config(1, minimal_config().payload())
    baseline = threads()
    for _ in range(3):
        address = core.start("127.0.0.1:0")
        assert core.running and core.address == address
        assert httpx.get(f"http://{address}/v1/models").status_code == 401
        assert threads() - baseline, "the running core has threads of its own"
        core.stop(0.5)
        assert not core.running and core.address is None
    deadline = time.monotonic() + 5
    while threads() - baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not threads() - baseline
    core.stop(0.1)  # stopping a stopped core is a no-op


def test_an_idle_keep_alive_connection_does_not_hold_the_stop() -> None:
    """A pooled client's idle connection is closed at once by the stop (a clean close it can
    see), not lingered on: the stop returns long before its grace."""
    core = _core.Core(workers=1)
    core.apply_config(1, minimal_config().payload())
    address = core.start("127.0.0.1:0")
    with httpx.Client(base_url=f"http://{address}") as client:
        assert client.get("/v1/models").status_code == 401  # the connection now idles
        started = time.monotonic()
        core.stop(20.0)
        assert time.monotonic() - started < 5
        assert not core.running


def test_an_idle_http2_connection_its_client_does_not_read_does_not_hold_the_stop() -> None:
    """hyper closes a stopping HTTP/2 connection once its client acknowledges a PING; a
    synchronous client does not read its pooled connection between calls, so it never does. The
    stop gives such a connection a second, then closes it, instead of waiting out the grace. (A
    request in flight is waited for: `proxy_core/src/server/mod.rs`'s tests, with hyper's client,
    whose HTTP/2 takes the graceful GOAWAY and PING that httpx's fails its open streams on.)"""
    core = _core.Core(workers=1)
    core.apply_config(1, minimal_config().payload())
    address = core.start("127.0.0.1:0")
    with httpx.Client(base_url=f"http://{address}", http1=False, http2=True) as client:
        answer = client.get("/v1/models")
        assert (answer.status_code, answer.http_version) == (401, "HTTP/2")
        started = time.monotonic()
        core.stop(20.0)
        assert time.monotonic() - started < 5
        assert not core.running


def test_double_start_and_bad_addresses_raise_typed_errors() -> None:
    core = _core.Core(workers=1)
    address = core.start("127.0.0.1:0")
    try:
        with pytest.raises(_core.StateError):
            core.start("127.0.0.1:0")
        other = _core.Core(workers=1)
        with pytest.raises(_core.StartError, match="could not listen"):
            other.start(address)
        with pytest.raises(_core.StartError, match="invalid listen address"):
            other.start("not an address")
    finally:
        core.stop(0.1)
    assert issubclass(_core.ConfigError, _core.SluicegateError)


def test_config_ack_nack_names_the_field_and_keeps_the_old_snapshot() -> None:
    core = _core.Core(workers=1)
    assert core.config_version is None
    assert core.apply_config(3, minimal_config().payload()) == 3
    bad = json.loads(minimal_config().payload())
    bad["pools"][0]["members"][0]["base_url"] = "ftp://nowhere"
    with pytest.raises(_core.ConfigError, match=r"pools\[0\]\.members\[0\]\.base_url"):
        core.apply_config(4, json.dumps(bad))
    typo = json.loads(minimal_config().payload())
    typo["routes"][0]["chian"] = []
    with pytest.raises(_core.ConfigError, match="chian"):
        core.apply_config(4, json.dumps(typo))
    unknown_pool = json.loads(minimal_config().payload())
    unknown_pool["routes"][0]["chain"][0]["pool"] = "nope"
    with pytest.raises(_core.ConfigError, match=r"routes\[0\]\.chain\[0\]\.pool"):
        core.apply_config(4, json.dumps(unknown_pool))
    with pytest.raises(_core.ConfigError, match="older"):
        core.apply_config(2, minimal_config().payload())
    with pytest.raises(_core.ConfigError):
        core.apply_config(4, "{not json")
    assert core.config_version == 3
    metrics = {f["name"]: f for f in json.loads(core.metrics_snapshot())["families"]}
    assert metrics["sluicegate_config_rejected_total"]["samples"][0]["value"] == 5
    assert metrics["sluicegate_config_version"]["samples"][0]["value"] == 3


def test_requests_before_any_config_get_503() -> None:
    core = _core.Core(workers=1)
    address = core.start("127.0.0.1:0")
    try:
        r = httpx.post(f"http://{address}/v1/chat/completions", json={"model": "m"})
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "not_configured"
    finally:
        core.stop(0.1)


def test_api_key_helpers_agree_with_the_core() -> None:
    key = _core.generate_api_key()
    assert _core.is_well_formed_api_key(key)
    assert not _core.is_well_formed_api_key(key[:-1] + ("A" if key[-1] != "A" else "B"))
    assert _core.api_key_prefix(key) == key[:12]
    import hashlib
    import hmac

    assert (
        _core.hash_api_key("pepper", key)
        == hmac.new(b"pepper", key.encode(), hashlib.sha256).hexdigest()
    )


def test_link_local_upstreams_need_the_internal_flag_and_metadata_is_never_allowed() -> None:
    core = _core.Core(workers=1)
    version = 0
    for address, internal_ok in [
        ("169.254.1.1:80", True),
        ("[fe80::1]:80", True),
        ("169.254.169.254", False),
        ("[fd00:ec2::254]:80", False),
        ("[64:ff9b::a9fe:a9fe]:80", False),
        ("100.100.100.200:80", False),
    ]:
        cfg = ConfigBuilder().tenant("t")
        cfg.pool("p", [member("m", address)]).route("alias", ("p", "up"))
        with pytest.raises(_core.ConfigError) as refused:
            core.apply_config(version + 1, cfg.payload())
        assert refused.value.args[1] == "pools[0].members[0].base_url"
        internal = ConfigBuilder().tenant("t")
        internal.pool("p", [member("m", address, internal=True)]).route("alias", ("p", "up"))
        if internal_ok:
            version += 1
            assert core.apply_config(version, internal.payload()) == version
        else:
            with pytest.raises(_core.ConfigError, match="metadata"):
                core.apply_config(version + 1, internal.payload())


def test_config_defaults_are_what_an_empty_pool_policy_means() -> None:
    defaults = json.loads(_core.config_defaults())
    assert set(defaults) == {"timeouts", "admission", "retry", "ejection", "health_check"}
    # Sending the defaults explicitly is the same as leaving them out: the core accepts both.
    cfg = minimal_config()
    cfg.pools[0].update({k: v for k, v in defaults.items()})
    assert _core.Core().apply_config(1, cfg.payload()) == 1


def _slices(name: str) -> dict[str, int]:
    """The scheduler slice (ns) of each thread of this process named `name`, from /proc."""
    found: dict[str, int] = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as comm:
                if not comm.read().strip().startswith(name):
                    continue
            with open(f"/proc/self/task/{tid}/sched") as sched:
                for line in sched:
                    if line.startswith("se.slice"):
                        found[tid] = int(line.split(":")[1])
        except FileNotFoundError:
            continue
    return found


def test_the_core_workers_run_with_the_scheduler_slice_they_ask_for() -> None:
    release = tuple(int(part) for part in os.uname().release.split("-")[0].split(".")[:2])
    if not _slices("") or release < (6, 12):
        pytest.skip("this kernel does not report a custom scheduler slice (Linux 6.12+)")
    for asked, expect in ((250, 250_000), (0, None)):
        core = _core.Core(workers=2, worker_slice_us=asked)
        core.start("127.0.0.1:0")
        try:
            # The workers start (and ask for their slice) a moment after `start` returns.
            deadline = time.monotonic() + 5
            slices = _slices("sluicegate-core")
            while time.monotonic() < deadline and (
                len(slices) < 2 or (expect is not None and set(slices.values()) != {expect})
            ):
                time.sleep(0.02)
                slices = _slices("sluicegate-core")
            assert len(slices) >= 2, "both workers are running"
            if expect is None:
                # 0 keeps the kernel's own slice, whatever this kernel's default is.
                assert 250_000 not in slices.values()
            else:
                assert set(slices.values()) == {expect}
        finally:
            core.stop(0.1)
