"""The image's HEALTHCHECK module against a stand-in data port: healthy only on a 200 from
`/readyz`, the reason otherwise; a wildcard listen address is probed on the loopback.
(tests/deploy/test_probes_live.py asks a real `serve` the same.)"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sluicegate.healthcheck import main, probe

from tests.support.certs import Ca, install


class Answer(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/readyz" else 404
        body = b'{"ready": false, "reason": "draining"}' if code != 200 else b'{"ready": true}'
        self.send_response(code)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    Answer.status = 200


def test_ready_unready_and_unreachable(
    server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = server.server_address[1]
    assert probe(f"127.0.0.1:{port}") is None
    assert probe(f"0.0.0.0:{port}") is None
    monkeypatch.setenv("SLUICEGATE_DATA_LISTEN", f"0.0.0.0:{port}")
    assert main() == 0
    Answer.status = 503
    problem = probe(f"127.0.0.1:{port}")
    assert problem is not None and "503" in problem and "draining" in problem
    assert main() == 1
    server.shutdown()
    server.server_close()
    assert "127.0.0.1" in (probe(f"127.0.0.1:{port}", timeout=1) or "")
    assert "HOST:PORT" in (probe("8080") or "")


def test_a_tls_data_port_is_probed_over_tls(
    server: ThreadingHTTPServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ca = Ca()
    cert, key = tmp_path / "data.pem", tmp_path / "data-key.pem"
    install(ca.issue(), cert, key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    monkeypatch.setenv("SLUICEGATE_DATA_LISTEN", f"127.0.0.1:{port}")
    assert probe(f"127.0.0.1:{port}", tls=True) is None
    # Plain HTTP against a TLS port is a clear failure, not a traceback.
    assert probe(f"127.0.0.1:{port}", timeout=1) is not None
    monkeypatch.setenv("SLUICEGATE_TLS_CERT_FILE", str(cert))
    assert main() == 0
