"""An OTLP/HTTP trace receiver in the test process: decodes what the gateway exports with the
official generated classes (`opentelemetry-proto`) and keeps every span, by trace."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2


def attributes(kvs: Any) -> dict[str, Any]:
    """An OTLP attribute list as a dict of plain Python values."""
    out: dict[str, Any] = {}
    for kv in kvs:
        which = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, which) if which else None
    return out


@dataclass
class Received:
    spans: list[trace_pb2.Span] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    content_types: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def trace(self, trace_id: bytes) -> list[trace_pb2.Span]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]

    def wait_for(self, trace_id: bytes, count: int, timeout: float = 10.0) -> list[trace_pb2.Span]:
        """The trace's spans once at least `count` arrived."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.trace(trace_id)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.05)

    def server_spans(self) -> list[trace_pb2.Span]:
        with self.lock:
            return [s for s in self.spans if s.kind == trace_pb2.Span.SPAN_KIND_SERVER]


@contextmanager
def otlp_receiver(port: int = 0) -> Iterator[tuple[str, Received]]:
    """A receiver on 127.0.0.1 (on `port`, or any); yields its traces URL and what it received."""
    received = Received()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            with received.lock:
                received.requests += 1
                received.content_types.append(self.headers.get("content-type", ""))
                for resource_spans in request.resource_spans:
                    received.resources.append(attributes(resource_spans.resource.attributes))
                    for scope_spans in resource_spans.scope_spans:
                        received.spans.extend(scope_spans.spans)
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces", received
    finally:
        server.shutdown()
        server.server_close()
