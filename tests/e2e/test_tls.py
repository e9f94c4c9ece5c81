"""HTTPS on `sluicegate serve`, with a CA and certificates made at test time: the openai SDK
streams over h2 and HTTP/1.1 with the CA trusted; a certificate replaced on disk reaches new
connections within seconds while a stream opened before the swap completes; a broken
replacement keeps the old certificate and raises the failure metric; the admin port's mTLS
refuses a client without a certificate; the expiry gauges match the certificates; SIGHUP under
load reloads the certificate and reopens both logs, and the access log loses no line its own
counters say was written."""

from __future__ import annotations

import json
import os
import re
import signal
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest

from tests.e2e.helpers import start_serve
from tests.support.certs import Ca, Issued, install, replace, served_certificate
from tests.support.procs import Proc

MODEL = "chat"
SIM_HEADERS = ["x-sim-ttft-ms", "x-sim-itl-ms", "x-sim-output-tokens"]


def bootstrap(sim: Proc) -> str:
    """A tenant, the simulator as the one member of a pool, and a route: `[[bootstrap.*]]`."""
    headers = ", ".join(f'"{h}"' for h in SIM_HEADERS)
    return f"""
[[bootstrap.tenants]]
id = "acme"
name = "Acme"
[[bootstrap.providers]]
id = "sim"
kind = "openai"
base_url = "http://{sim.address}/v1"
forward_headers = [{headers}]
[[bootstrap.pools]]
id = "sims"
members = [{{ provider_id = "sim" }}]
[[bootstrap.routes]]
alias = "{MODEL}"
chain = [{{ pool = "sims", model = "sim-model" }}]
"""


class Served:
    def __init__(self, proc: Proc, admin: str, token: str, admin_client: httpx.Client) -> None:
        self.proc, self.admin, self.token, self.http = proc, admin, token, admin_client

    def create_key(self) -> str:
        r = self.http.post(
            f"{self.admin_url}/v1/admin/keys",
            json={"tenant_id": "acme", "name": "tls"},
            headers={"Authorization": f"Bearer {self.token}"},
        )
        r.raise_for_status()
        return str(r.json()["key"])

    @property
    def admin_url(self) -> str:
        scheme = "https" if "(admin https://" in self.proc.log.read_text() else "http"
        return f"{scheme}://{self.admin}"

    def metrics(self) -> dict[str, float]:
        text = self.http.get(f"{self.admin_url}/metrics").text
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values


@pytest.fixture
def pki(tmp_path: Path) -> tuple[Ca, Path, Path]:
    ca = Ca()
    cert, key = tmp_path / "fullchain.pem", tmp_path / "privkey.pem"
    install(ca.issue(), cert, key)
    return ca, cert, key


@pytest.fixture
def serve_tls(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    procs: list[Proc] = []
    clients: list[httpx.Client] = []

    def start(extra: str, admin_verify: ssl.SSLContext | bool = True, server: str = "") -> Served:
        proc, admin, token = start_serve(tmp_path, extra, server)
        procs.append(proc)
        client = httpx.Client(verify=admin_verify, timeout=10)
        clients.append(client)
        return Served(proc, admin, token, client)

    yield start
    for client in clients:
        client.close()
    for proc in procs:
        proc.kill()


def sdk(served: Served, key: str, ca: Ca, http2: bool, versions: list[str]) -> openai.OpenAI:
    """The official SDK over HTTPS with the test CA trusted; records each response's version."""
    # openai's own HTTP client library (httpx2), as the SDK would build it, with the CA trusted.
    http = httpx2.Client(
        verify=ca.client_context(),
        http2=http2,
        timeout=30,
        event_hooks={"response": [lambda r: versions.append(r.http_version)]},
    )
    return openai.OpenAI(
        base_url=f"https://{served.proc.address}/v1", api_key=key, http_client=http, max_retries=0
    )


def stream_text(client: openai.OpenAI, tokens: int, itl_ms: int = 1) -> list[str]:
    headers = {"x-sim-output-tokens": str(tokens), "x-sim-itl-ms": str(itl_ms)}
    chunks = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=tokens,
        stream=True,
        extra_headers=headers,
    )
    return [c.choices[0].delta.content or "" for c in chunks if c.choices]


def tls_config(cert: Path, key: Path, watch_ms: int, more: str = "") -> str:
    return f'[tls]\ncert_file = "{cert}"\nkey_file = "{key}"\nwatch_ms = {watch_ms}\n{more}'


def wait_for(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_the_openai_sdk_streams_over_https_on_h2_and_http1(
    serve_tls: Callable[..., Served],
    sim_factory: Callable[..., Proc],
    pki: tuple[Ca, Path, Path],
) -> None:
    ca, cert, key = pki
    sim = sim_factory("--ttft-ms", "5", "--itl-ms", "1")
    served = serve_tls(tls_config(cert, key, 1000) + bootstrap(sim))
    assert f"listening on https://{served.proc.address}" in served.proc.log.read_text()
    secret = served.create_key()
    for http2, version in ((True, "HTTP/2"), (False, "HTTP/1.1")):
        versions: list[str] = []
        pieces = stream_text(sdk(served, secret, ca, http2, versions), 12)
        assert len([p for p in pieces if p]) == 12
        assert versions == [version]
    # Without the CA the SDK refuses the certificate, and the gateway counts the client's alert.
    untrusting = openai.OpenAI(
        base_url=f"https://{served.proc.address}/v1", api_key=secret, max_retries=0
    )
    with pytest.raises(openai.APIConnectionError):
        stream_text(untrusting, 2)
    m = served.metrics()
    assert m['sluicegate_tls_handshakes_total{kind="full"}'] >= 2
    wait_for(
        lambda: (
            served.metrics()['sluicegate_tls_handshake_failures_total{reason="client_alert"}'] >= 1
        ),
        5,
        "the refused handshake was not counted",
    )
    assert m["sluicegate_tls_handshake_duration_seconds_count"] >= 2


def test_a_replaced_certificate_reaches_new_connections_while_an_open_stream_completes(
    serve_tls: Callable[..., Served],
    sim_factory: Callable[..., Proc],
    pki: tuple[Ca, Path, Path],
) -> None:
    ca, cert, key = pki
    first = cert.read_bytes()
    sim = sim_factory("--ttft-ms", "5")
    served = serve_tls(tls_config(cert, key, 200) + bootstrap(sim))
    address = served.proc.address
    secret = served.create_key()
    original = served_certificate(address)

    # A stream of 40 tokens 75 ms apart (3 s), opened before the swap, over h2.
    result: dict[str, Any] = {}

    def long_stream() -> None:
        try:
            result["pieces"] = stream_text(sdk(served, secret, ca, True, []), 40, itl_ms=75)
        except Exception as e:
            result["error"] = e

    streaming = threading.Thread(target=long_stream)
    streaming.start()
    time.sleep(0.5)
    renewed = ca.issue(days=60)
    install(renewed, cert, key)
    started = time.monotonic()
    wait_for(
        lambda: served_certificate(address) == renewed.der, 5, "the new certificate was not served"
    )
    swap_seconds = time.monotonic() - started
    streaming.join(30)
    assert "error" not in result, result.get("error")
    assert len([p for p in result["pieces"] if p]) == 40, (
        "the stream opened before the swap completed"
    )
    assert swap_seconds < 5 and streaming.is_alive() is False
    assert served.metrics()["sluicegate_tls_certificate_reloads_total"] == 1
    assert original != renewed.der and first != renewed.cert_pem

    # A broken replacement (the key of another certificate): refused, counted, old one stays.
    stranger = ca.issue()
    replace(key, stranger.key_pem)
    failures = 'sluicegate_tls_certificate_reload_failures_total{reason="key_mismatch"}'
    wait_for(lambda: served.metrics()[failures] == 1, 5, "the refusal was not counted")
    assert served_certificate(address) == renewed.der
    log = served.proc.log.read_text()
    assert "TLS certificate reload refused" in log and "privkey.pem" in log
    assert stranger.key_pem.decode().splitlines()[1] not in log
    # Still serving: a stream completes on a new connection.
    assert len([p for p in stream_text(sdk(served, secret, ca, False, []), 5) if p]) == 5


def test_admin_mtls_refuses_a_client_without_a_certificate_and_expiry_gauges_match(
    serve_tls: Callable[..., Served],
    pki: tuple[Ca, Path, Path],
    tmp_path: Path,
) -> None:
    ca, cert, key = pki
    data_leaf = ca.issue(days=30)
    install(data_leaf, cert, key)
    clients_ca = Ca("admin clients CA")
    admin_leaf = ca.issue(days=45)
    admin_cert, admin_key = tmp_path / "admin.pem", tmp_path / "admin-key.pem"
    install(admin_leaf, admin_cert, admin_key)
    more = (
        f'admin_cert_file = "{admin_cert}"\nadmin_key_file = "{admin_key}"\n'
        f'admin_client_ca_file = "{clients_ca.write(tmp_path / "clients-ca.pem")}"\n'
    )
    operator = clients_ca.issue(client=True, name="operator")
    served = serve_tls(
        tls_config(cert, key, 1000, more), admin_verify=ca.client_context(operator, tmp_path)
    )
    assert f"(admin https://{served.admin})" in served.proc.log.read_text()
    assert served.http.get(f"https://{served.admin}/healthz").status_code == 200

    # No client certificate: refused at the handshake, no HTTP answer. (With TLS 1.3 the client
    # learns it at its first read: the server checks the client's certificate after the client
    # considers the handshake done.)
    refused = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError)
    with pytest.raises(refused), httpx.Client(verify=ca.client_context()) as bare:
        bare.get(f"https://{served.admin}/healthz")
    # A certificate from another CA is refused too.
    outsider = Ca("outsider").issue(client=True, name="outsider")
    with (
        pytest.raises(refused),
        httpx.Client(verify=ca.client_context(outsider, tmp_path)) as wrong,
    ):
        wrong.get(f"https://{served.admin}/healthz")

    m = served.metrics()
    now = time.time()
    for name, leaf in (
        ("sluicegate_tls_certificate_expiry_seconds", data_leaf),
        ("sluicegate_admin_tls_certificate_expiry_seconds", admin_leaf),
    ):
        expected = leaf.cert.not_valid_after_utc.timestamp() - now
        assert abs(m[name] - expected) < 30, (name, m[name], expected)


def _lines(paths: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for p in paths if p.exists())


def test_sighup_under_load_reloads_the_certificate_and_reopens_logs_losing_no_line(
    serve_tls: Callable[..., Served],
    sim_factory: Callable[..., Proc],
    pki: tuple[Ca, Path, Path],
    tmp_path: Path,
) -> None:
    ca, cert, key = pki
    access, process = tmp_path / "access.log", tmp_path / "sluicegate.log"
    sim = sim_factory("--ttft-ms", "0", "--itl-ms", "0")
    logs = f'access_log = "{access}"\nlog_file = "{process}"\n'
    # watch_ms = 0: only SIGHUP reloads the certificate.
    served = serve_tls(tls_config(cert, key, 0) + bootstrap(sim), server=logs)
    secret = served.create_key()
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
    answered = [0] * 4
    stop = threading.Event()

    def load(slot: int) -> None:
        with httpx.Client(verify=ca.client_context(), http2=slot % 2 == 0, timeout=30) as http:
            while not stop.is_set():
                r = http.post(
                    f"https://{served.proc.address}/v1/chat/completions",
                    json=body,
                    headers={"Authorization": f"Bearer {secret}"},
                )
                assert r.status_code == 200, r.text
                answered[slot] += 1

    workers = [threading.Thread(target=load, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    rotated: list[Path] = []
    renewed: Issued | None = None
    for i in range(3):
        time.sleep(0.7)
        moved = tmp_path / f"access.log.{i + 1}"
        os.rename(access, moved)
        rotated.append(moved)
        if i == 0:
            os.rename(process, tmp_path / "sluicegate.log.1")
            renewed = ca.issue(days=10)
            install(renewed, cert, key)
        served.proc.popen.send_signal(signal.SIGHUP)
    time.sleep(0.7)
    stop.set()
    for w in workers:
        w.join(30)
    total = sum(answered)
    assert total > 50, "the load was too light to mean anything"

    def counters() -> tuple[float, float, float]:
        m = served.metrics()
        return (
            m["sluicegate_access_log_lines_total"],
            m["sluicegate_access_log_dropped_total"],
            m["sluicegate_access_log_write_failures_total"],
        )

    wait_for(lambda: sum(counters()) >= total, 10, "the access log did not account for every line")
    written, dropped, failed = counters()
    files = [access, *rotated]
    assert _lines(files) == written, "a line the access log counted as written is missing"
    assert (written, dropped, failed) == (total, 0, 0)
    # Every rotated file got lines, and the live one has those after the last SIGHUP.
    assert all(_lines([p]) > 0 for p in files)
    ids = [json.loads(line)["request_id"] for p in files for line in p.read_text().splitlines()]
    assert len(set(ids)) == len(ids) == total

    assert renewed is not None and served_certificate(served.proc.address) == renewed.der
    # The process log reopened too: the SIGHUP lines after the first rename are in the new file.
    assert "SIGHUP" in (tmp_path / "sluicegate.log.1").read_text()
    assert re.search(r"SIGHUP: reloading", process.read_text())
    assert served.proc.stop(signal.SIGTERM, timeout=30) == 0
