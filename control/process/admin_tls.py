"""TLS on the admin port: one `ssl.SSLContext` handed to uvicorn, its certificate reloaded in
place (new handshakes get it, open connections keep theirs) on SIGHUP or when the files change.

A new pair is checked first in a context of its own, from a private copy of the files' bytes,
and only then loaded into the live context from the same copy: a broken or half-written pair
never reaches the live context (OpenSSL would drop the key in force when a certificate that does
not match it is loaded), and the live context reads exactly the bytes that were checked. A
refusal is logged and counted (`sluicegate_admin_tls_certificate_reload_failures_total`); the
pair in force stays.
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509

from control.api.errors import StartupError
from control.process.file_watch import FileWatch

log = logging.getLogger("sluicegate.tls")


class CertificateRefused(Exception):
    """A pair that cannot be served; the message names the file, never key material."""


@dataclass(frozen=True)
class Pair:
    cert: bytes
    key: bytes
    not_after: float


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise CertificateRefused(f"cannot read {path}: {e.strerror}") from None


def _check(cert_file: Path, key_file: Path) -> Pair:
    """The pair read once and checked: parsable, key matching the leaf, valid now."""
    cert, key = _read(cert_file), _read(key_file)
    try:
        chain = x509.load_pem_x509_certificates(cert)
    except ValueError:
        raise CertificateRefused(f"{cert_file} holds no valid PEM certificate") from None
    leaf = chain[0]
    now = time.time()
    not_after = leaf.not_valid_after_utc.timestamp()
    if now >= not_after:
        raise CertificateRefused(
            f"the certificate in {cert_file} expired at {leaf.not_valid_after_utc}"
        )
    if now < leaf.not_valid_before_utc.timestamp():
        raise CertificateRefused(f"the certificate in {cert_file} is not valid yet")
    pair = Pair(cert, key, not_after)
    with _private_copy(pair) as (cert_copy, key_copy):
        try:
            _context().load_cert_chain(cert_copy, key_copy)
        except ssl.SSLError as e:
            raise CertificateRefused(
                f"{cert_file} and {key_file} are not a usable pair ({e.reason or 'refused'})"
            ) from None
    return pair


@contextmanager
def _private_copy(pair: Pair) -> Iterator[tuple[str, str]]:
    """Both files' bytes where OpenSSL can read them by path and nobody else can: anonymous
    memory files (`memfd_create`, named `/proc/self/fd/N`) that never touch a disk and vanish
    with the descriptor, so a crash cannot leave the private key behind in a temporary
    directory. Where memfd is missing, a private temporary directory (0700, files 0600)."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fds = [os.memfd_create(name, os.MFD_CLOEXEC) for name in ("cert.pem", "key.pem")]
        try:
            for fd, data in zip(fds, (pair.cert, pair.key), strict=True):
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            yield f"/proc/self/fd/{fds[0]}", f"/proc/self/fd/{fds[1]}"
        finally:
            for fd in fds:
                os.close(fd)
        return
    with tempfile.TemporaryDirectory(prefix="sluicegate-tls-") as tmp:
        paths = []
        for name, data in (("cert.pem", pair.cert), ("key.pem", pair.key)):
            path = os.path.join(tmp, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            paths.append(path)
        yield paths[0], paths[1]


def _context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    # uvicorn's HTTP is HTTP/1.1 only.
    context.set_alpn_protocols(["http/1.1"])
    return context


class AdminTls:
    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None) -> None:
        self.cert_file, self.key_file, self.client_ca_file = cert_file, key_file, client_ca_file
        try:
            pair = _check(cert_file, key_file)
        except CertificateRefused as e:
            raise StartupError(f"admin TLS: {e}") from None
        self.context = _context()
        if client_ca_file is not None:
            try:
                self.context.load_verify_locations(cafile=str(client_ca_file))
            except (OSError, ssl.SSLError) as e:
                raise StartupError(f"admin TLS: cannot load {client_ca_file}: {e}") from None
            self.context.verify_mode = ssl.CERT_REQUIRED
        self._install(pair)
        self.reloads = 0
        self.reload_failures = 0
        self._lock = threading.Lock()
        self.watch = FileWatch([cert_file, key_file])

    def _install(self, pair: Pair) -> None:
        with _private_copy(pair) as (cert_copy, key_copy):
            self.context.load_cert_chain(cert_copy, key_copy)
        self._pair = pair

    @property
    def not_after(self) -> float:
        return self._pair.not_after

    def reload(self) -> bool:
        """Read the files again: True if a new pair now serves new handshakes, False if they hold
        the pair in force or the new one was refused (logged and counted)."""
        with self._lock:
            try:
                pair = _check(self.cert_file, self.key_file)
                if (pair.cert, pair.key) == (self._pair.cert, self._pair.key):
                    return False
                self._install(pair)
            except (CertificateRefused, ssl.SSLError) as e:
                self.reload_failures += 1
                log.error(
                    "admin TLS certificate reload refused; the certificate in force stays: %s", e
                )
                return False
            self.reloads += 1
            log.info(
                "admin TLS certificate reloaded from %s: new connections get it", self.cert_file
            )
            return True

    def check_files(self) -> None:
        """One check of the file watch (called every `tls.watch_ms`)."""
        if self.watch.changed():
            self.reload()
