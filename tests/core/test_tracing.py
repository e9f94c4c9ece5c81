"""Request traces as a collector receives them: the data plane exports OTLP/HTTP protobuf to an
in-process receiver (decoded with the official `opentelemetry-proto` classes), and each test
checks the spans' attributes, events and parent/child links for a streamed request, a retried
request and a request shed by admission, plus the `traceparent` the upstream got."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from opentelemetry.proto.trace.v1 import trace_pb2

from tests.support.gateway import ConfigBuilder, Gateway, Key, member
from tests.support.otlp import Received, attributes, otlp_receiver
from tests.support.procs import Proc
from tests.support.sse import events

CHAT = "/v1/chat/completions"
SERVER = trace_pb2.Span.SPAN_KIND_SERVER
CLIENT = trace_pb2.Span.SPAN_KIND_CLIENT
INTERNAL = trace_pb2.Span.SPAN_KIND_INTERNAL
ERROR = trace_pb2.Status.STATUS_CODE_ERROR
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
UPSTREAM_SECRET = "upstream-secret-for-traces"


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    with otlp_receiver() as r:
        yield r


def tracing(url: str, ratio: float = 1.0) -> dict[str, Any]:
    return {"trace_endpoint": url, "trace_sample_ratio": ratio, "trace_batch_delay_ms": 20}


def body(**extra: Any) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "x" * 40}],
        **extra,
    }


def no_secret_in(spans: list[trace_pb2.Span], *secrets: str) -> None:
    for span in spans:
        for value in attributes(span.attributes).values():
            assert not any(s in str(value) for s in secrets), (span.name, value)


def children(spans: list[trace_pb2.Span], parent: trace_pb2.Span) -> list[trace_pb2.Span]:
    return [s for s in spans if s.parent_span_id == parent.span_id]


def one(spans: list[trace_pb2.Span], kind: int) -> trace_pb2.Span:
    found = [s for s in spans if s.kind == kind]
    assert len(found) == 1, [(s.name, s.kind) for s in spans]
    return found[0]


def test_a_streamed_request_continues_the_clients_trace(
    sim_factory: Callable[..., Proc],
    gateway_factory: Callable[..., Gateway],
    receiver: tuple[str, Received],
) -> None:
    url, received = receiver
    sim = sim_factory("--ttft-ms", "20", "--itl-ms", "2", "--api-key", UPSTREAM_SECRET)
    cfg = ConfigBuilder().tenant("t1")
    key = cfg.key("k1", "t1")
    cfg.pool("p1", [member("m1", sim.address, credential=UPSTREAM_SECRET)])
    cfg.route("m", ("p1", "sim-llama"))
    gw = gateway_factory(cfg, **tracing(url))
    headers = {
        **key.headers,
        "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01",
        "tracestate": "vendor=opaque-1",
    }
    with httpx.stream(
        "POST", gw.url + CHAT, json=body(stream=True), headers=headers, timeout=10
    ) as r:
        assert r.status_code == 200
        frames = events(r.read().decode().splitlines())
    assert frames[-1]["data"] == "[DONE]"

    spans = received.wait_for(bytes.fromhex(TRACE_ID), 3)
    server = one(spans, SERVER)
    assert server.parent_span_id == bytes.fromhex(PARENT_ID)
    assert server.name == "chat m"
    assert server.trace_state == "vendor=opaque-1"
    a = attributes(server.attributes)
    assert a["gen_ai.operation.name"] == "chat"
    assert a["gen_ai.request.model"] == "m"
    assert a["gen_ai.response.model"] == "sim-llama"
    assert a["gen_ai.provider.name"] == a["gen_ai.system"] == "openai"
    assert a["gen_ai.usage.output_tokens"] == 5 and a["gen_ai.usage.input_tokens"] >= 10
    assert a["gen_ai.request.max_tokens"] == 5
    host, port = sim.address.rsplit(":", 1)
    assert (a["server.address"], a["server.port"]) == (host, int(port))
    assert a["sluicegate.tenant.id"] == "t1" and a["sluicegate.key.id"] == "k1"
    assert a["http.response.status_code"] == 200 and a["sluicegate.outcome"] == "complete"
    assert a["sluicegate.stream"] is True and a["sluicegate.attempts"] == 1
    assert "error.type" not in a and server.status.code != ERROR
    assert r.headers["x-request-id"] == a["sluicegate.request_id"]
    # The first token, as an event inside the span, and its TTFT (the simulator's 20 ms).
    (first,) = [e for e in server.events if e.name == "gen_ai.first_token"]
    assert server.start_time_unix_nano < first.time_unix_nano < server.end_time_unix_nano
    assert 0.015 < attributes(first.attributes)["gen_ai.server.time_to_first_token"] < 5

    attempt = one(spans, CLIENT)
    assert attempt.parent_span_id == server.span_id
    assert attempt.name == "chat sim-llama"
    b = attributes(attempt.attributes)
    assert b["sluicegate.pool"] == "p1" and b["sluicegate.upstream"] == "m1"
    assert b["http.response.status_code"] == 200 and b["sluicegate.attempt"] == 1
    assert server.start_time_unix_nano <= attempt.start_time_unix_nano
    assert attempt.end_time_unix_nano <= server.end_time_unix_nano
    # A fresh connection to the simulator: its connect span sits inside the attempt.
    connect = one(spans, INTERNAL)
    assert connect.name == "connect" and connect.parent_span_id == attempt.span_id
    assert attempt.start_time_unix_nano <= connect.start_time_unix_nano < connect.end_time_unix_nano
    no_secret_in(spans, key.secret, UPSTREAM_SECRET)
    assert received.content_types[0] == "application/x-protobuf"
    assert received.resources[0]["service.name"] == "sluicegate"

    # The upstream gets the gateway's traceparent, naming the attempt's span, and the
    # client's tracestate; a whole answer echoes what the simulator received.
    echoed = httpx.post(
        gw.url + CHAT, json=body(), headers={**headers, "x-sim-echo": "1"}, timeout=10
    ).json()["sim_request_headers"]
    version, trace_id, span_id, flags = echoed["traceparent"].split("-")
    assert (version, trace_id, flags) == ("00", TRACE_ID, "01")
    assert echoed["tracestate"] == "vendor=opaque-1"
    later = received.wait_for(bytes.fromhex(TRACE_ID), 5)
    attempts = [s for s in later if s.kind == CLIENT]
    assert bytes.fromhex(span_id) in {s.span_id for s in attempts}
    assert bytes.fromhex(span_id) != bytes.fromhex(PARENT_ID)


def test_a_hostile_traceparent_is_ignored_and_a_trace_started(
    sim_factory: Callable[..., Proc],
    gateway_factory: Callable[..., Gateway],
    receiver: tuple[str, Received],
) -> None:
    url, received = receiver
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    cfg = ConfigBuilder().tenant("t1")
    key = cfg.key("k1", "t1")
    cfg.pool("p1", [member("m1", sim.address)])
    cfg.route("m", ("p1", "sim-llama"))
    gw = gateway_factory(cfg, **tracing(url))
    for bad in [
        f"00-{TRACE_ID.upper()}-{PARENT_ID}-01",
        f"00-{'0' * 32}-{PARENT_ID}-01",
        f"ff-{TRACE_ID}-{PARENT_ID}-01",
        "00-" + "a" * 2000,
    ]:
        r = httpx.post(
            gw.url + CHAT,
            json=body(),
            headers={**key.headers, "traceparent": bad, "tracestate": "a=b", "x-sim-echo": "1"},
            timeout=10,
        )
        assert r.status_code == 200, r.text
        sent = r.json()["sim_request_headers"]
        assert sent["traceparent"] != bad and TRACE_ID not in sent["traceparent"].lower()
        assert "tracestate" not in sent
    deadline = time.monotonic() + 10
    while len(received.server_spans()) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    servers = received.server_spans()
    assert len(servers) == 4
    assert all(s.parent_span_id == b"" and s.trace_id != bytes.fromhex(TRACE_ID) for s in servers)
    assert len({s.trace_id for s in servers}) == 4


def test_a_retried_request_has_one_span_per_attempt(
    sim_factory: Callable[..., Proc],
    gateway_factory: Callable[..., Gateway],
    receiver: tuple[str, Received],
) -> None:
    url, received = receiver
    bad = sim_factory("--ttft-ms", "1", "--fault", "status,code=503", name="bad")
    good = sim_factory("--ttft-ms", "1", "--itl-ms", "1", name="good")
    cfg = ConfigBuilder().tenant("t1")
    key = cfg.key("k1", "t1")
    # The failing member is picked first almost always; the retry goes to the other one.
    members = [member("m-bad", bad.address, weight=1000), member("m-good", good.address, weight=1)]
    retry = {"backoff_base_ms": 1, "backoff_cap_ms": 2}
    cfg.pool("p1", members, retry=retry)
    cfg.route("m", ("p1", "sim-llama"))
    gw = gateway_factory(cfg, **tracing(url))
    retried: list[trace_pb2.Span] = []
    echoed: dict[str, str] = {}
    for _ in range(10):
        r = httpx.post(
            gw.url + CHAT, json=body(), headers={**key.headers, "x-sim-echo": "1"}, timeout=10
        )
        assert r.status_code == 200, r.text
        trace_id = r.json()["sim_request_headers"]["traceparent"].split("-")[1]
        spans = received.wait_for(bytes.fromhex(trace_id), 3)
        server = one(spans, SERVER)
        if attributes(server.attributes)["sluicegate.attempts"] == 2:
            retried, echoed = spans, r.json()["sim_request_headers"]
            break
    assert retried, "no request was retried in ten"
    server = one(retried, SERVER)
    assert server.parent_span_id == b""  # no client context: the gateway's span is the root
    a = attributes(server.attributes)
    assert a["http.response.status_code"] == 200 and a["sluicegate.upstream"] == "m-good"
    assert "error.type" not in a
    attempts = sorted(
        (s for s in retried if s.kind == CLIENT), key=lambda s: s.start_time_unix_nano
    )
    assert [attributes(s.attributes)["sluicegate.attempt"] for s in attempts] == [1, 2]
    assert all(s.parent_span_id == server.span_id for s in attempts)
    first, second = (attributes(s.attributes) for s in attempts)
    assert (first["sluicegate.upstream"], first["http.response.status_code"]) == ("m-bad", 503)
    assert first["error.type"] == "http_5xx" and attempts[0].status.code == ERROR
    assert (second["sluicegate.upstream"], second["http.response.status_code"]) == ("m-good", 200)
    assert attempts[0].end_time_unix_nano <= attempts[1].start_time_unix_nano
    # Each attempt told its upstream its own span: the member that answered saw the second.
    assert echoed["traceparent"].split("-")[2] == attempts[1].span_id.hex()
    for connect in (s for s in retried if s.kind == INTERNAL and s.name == "connect"):
        assert connect.parent_span_id in {s.span_id for s in attempts}


def test_a_shed_request_is_traced_even_when_sampling_keeps_none(
    sim_factory: Callable[..., Proc],
    gateway_factory: Callable[..., Gateway],
    receiver: tuple[str, Received],
) -> None:
    url, received = receiver
    sim = sim_factory("--ttft-ms", "400", "--itl-ms", "1")
    cfg = ConfigBuilder().tenant("t1")
    key: Key = cfg.key("k1", "t1")
    admission = {
        "max_inflight": 1,
        "interactive": {"max_depth": 1, "max_wait_ms": 5000, "weight": 8},
    }
    cfg.pool("p1", [member("m1", sim.address)], admission=admission)
    cfg.route("m", ("p1", "sim-llama"))
    gw = gateway_factory(cfg, **tracing(url, ratio=0.0))
    statuses: list[int] = []

    def slow() -> None:
        statuses.append(
            httpx.post(gw.url + CHAT, json=body(), headers=key.headers, timeout=10).status_code
        )

    holders = [threading.Thread(target=slow) for _ in range(2)]
    for t in holders:
        t.start()
        time.sleep(0.1)
    shed = httpx.post(
        gw.url + CHAT,
        json=body(),
        headers={**key.headers, "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-00"},
        timeout=10,
    )
    for t in holders:
        t.join()
    assert shed.status_code == 503 and statuses == [200, 200]

    spans = received.wait_for(bytes.fromhex(TRACE_ID), 1)
    (server,) = spans
    assert server.kind == SERVER and server.parent_span_id == bytes.fromhex(PARENT_ID)
    a = attributes(server.attributes)
    assert a["http.response.status_code"] == 503 and a["sluicegate.outcome"] == "refused"
    assert a["error.type"] == shed.json()["error"]["code"] == "overloaded"
    assert a["gen_ai.request.model"] == "m" and a["sluicegate.tenant.id"] == "t1"
    assert server.status.code == ERROR
    # The two requests that went well were not sampled (ratio 0, not slow): only the refusal.
    time.sleep(0.3)
    assert len(received.server_spans()) == 1
    metrics = gw.metrics()
    assert metrics["sluicegate_trace_spans_exported_total"]["samples"][0]["value"] == 1
    assert metrics["sluicegate_trace_spans_dropped_total"]["samples"][0]["value"] == 0


def _counter(gw: Gateway, name: str) -> float:
    return float(gw.metrics()[f"sluicegate_trace_spans_{name}_total"]["samples"][0]["value"])


def test_a_collector_that_is_down_gets_traces_again_once_it_is_back(
    sim_factory: Callable[..., Proc], gateway_factory: Callable[..., Gateway]
) -> None:
    """While exports fail the exporter backs off and the request path counts its traces as lost
    instead of queueing them; once the backoff has passed, traces are queued again, so a
    collector that comes back receives the next ones."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sim = sim_factory("--ttft-ms", "1", "--itl-ms", "1")
    cfg = ConfigBuilder().tenant("t1")
    key = cfg.key("k1", "t1")
    cfg.pool("p1", [member("m1", sim.address)])
    cfg.route("m", ("p1", "sim-llama"))
    gw = gateway_factory(cfg, **tracing(f"http://127.0.0.1:{port}/v1/traces"))

    def call() -> str:
        r = httpx.post(
            gw.url + CHAT, json=body(), headers={**key.headers, "x-sim-echo": "1"}, timeout=10
        )
        assert r.status_code == 200, r.text
        return str(r.json()["sim_request_headers"]["traceparent"].split("-")[1])

    for _ in range(30):
        call()
    deadline = time.monotonic() + 5
    while _counter(gw, "export_failed") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _counter(gw, "export_failed") > 0
    assert _counter(gw, "exported") == 0 and _counter(gw, "dropped") == 0

    with otlp_receiver(port) as (_, received):
        deadline = time.monotonic() + 20
        arrived: list[trace_pb2.Span] = []
        while not arrived and time.monotonic() < deadline:
            arrived = received.wait_for(bytes.fromhex(call()), 1, timeout=0.3)
        assert arrived, "no trace reached the collector after it came back"
        assert _counter(gw, "exported") > 0
