"""A TCP proxy whose behaviour a test switches at run time: pass bytes through, refuse
connections, reset them, or accept and hang. Threads, not asyncio, so it runs beside anything."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from typing import Literal

Mode = Literal["pass", "refuse", "reset", "hang"]


class FaultProxy:
    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self._mode: Mode = "pass"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._stopped = False
        self._listener = self._listen(0)
        self.port = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, daemon=True)
        self._acceptor.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _listen(self, port: int) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen(512)
        s.settimeout(0.1)
        return s

    def set_mode(self, mode: Mode) -> None:
        """Switch behaviour; `refuse` closes the listening socket, others reopen it."""
        with self._lock:
            previous, self._mode = self._mode, mode
            if mode == "refuse" and previous != "refuse":
                self._listener.close()
            elif previous == "refuse" and mode != "refuse":
                self._listener = self._listen(self.port)
            if mode != "pass":
                # shutdown() first: close() alone does not end a recv() blocked in another thread.
                for conn in self._open:
                    with contextlib.suppress(OSError):
                        conn.shutdown(socket.SHUT_RDWR)
                    with contextlib.suppress(OSError):
                        conn.close()
                self._open.clear()

    def _accept_loop(self) -> None:
        while not self._stopped:
            with self._lock:
                listener, mode = self._listener, self._mode
            if mode == "refuse":
                threading.Event().wait(0.05)
                continue
            try:
                client, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(client, mode), daemon=True).start()

    def _serve(self, client: socket.socket, mode: Mode) -> None:
        if mode == "reset":
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            client.close()
            return
        with self._lock:
            self._open.append(client)
        if mode == "hang":
            return  # keep it open and silent until the mode changes or the test ends
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        with self._lock:
            self._open.append(upstream)
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                if self._mode != "pass":
                    break  # a connection opened before the switch must not outlive it
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._stopped = True
        self.set_mode("refuse")
        self._acceptor.join(2)
