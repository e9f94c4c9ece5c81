"""HTTP/1.1 by hand over a socket, for what a client library hides: a body promised in the head
and sent (or not) afterwards, and whether the server answered before reading it."""

from __future__ import annotations

import json
import select
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    # Body bytes the client had written when the answer could be read.
    sent_before_answer: int
    # True when the server closed the connection after the answer.
    closed: bool

    def json(self) -> Any:
        return json.loads(self.body)


def _read_answer(sock: socket.socket, deadline: float) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a whole head: {data!r}")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return status, headers, rest[:length]


def _closed(sock: socket.socket, timeout: float) -> bool:
    """EOF or reset from the server within `timeout`."""
    sock.settimeout(timeout)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def post_promising(
    address: str, path: str, promised: int, headers: dict[str, str], timeout: float = 30.0
) -> Answer:
    """Send a head promising `promised` body bytes, then write the body for as long as no answer
    is readable (a server that reads bodies before answering gets all of it)."""
    host, port = address.rsplit(":", 1)
    head = f"POST {path} HTTP/1.1\r\nHost: {address}\r\nContent-Length: {promised}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    chunk = b"{" + b" " * (256 * 1024 - 1)
    sent = 0
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head.encode())
        sock.setblocking(False)
        while time.monotonic() < deadline:
            readable, writable, _ = select.select([sock], [sock] if sent < promised else [], [], 1)
            if readable:
                break
            if writable:
                try:
                    sent += sock.send(chunk[: promised - sent])
                except (BlockingIOError, InterruptedError):
                    continue
                except (BrokenPipeError, ConnectionResetError):
                    break
        sock.setblocking(True)
        status, answer_headers, body = _read_answer(sock, deadline)
        return Answer(status, answer_headers, body, sent, _closed(sock, 5.0))


def peak_rss_kib(pid: int) -> int:
    """The process's peak resident set (VmHWM): a body buffered and freed again still shows."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc")
