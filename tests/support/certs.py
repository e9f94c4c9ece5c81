"""A certificate authority and certificates made at test time (`cryptography`), written as PEM
files the way an ACME client writes them (each file renamed into place whole)."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

Key = ec.EllipticCurvePrivateKey


def _key() -> Key:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: Key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass
class Issued:
    cert: x509.Certificate
    key: Key

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    @property
    def key_pem(self) -> bytes:
        return _pem_key(self.key)

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)


class Ca:
    def __init__(self, name: str = "sluicegate test CA") -> None:
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def write(self, path: Path) -> Path:
        path.write_bytes(self.pem)
        return path

    def issue(self, *, days: float = 90, client: bool = False, name: str = "localhost") -> Issued:
        """A leaf for `name` and 127.0.0.1 (a server's) or a client certificate, valid `days`."""
        key = _key()
        now = dt.datetime.now(dt.UTC)
        end = now + dt.timedelta(days=days)
        start = min(now - dt.timedelta(hours=1), end - dt.timedelta(days=1))
        usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if not client:
            names = [x509.DNSName(name), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        return Issued(builder.sign(self.key, hashes.SHA256()), key)

    def client_context(
        self, client: Issued | None = None, tmp: Path | None = None
    ) -> ssl.SSLContext:
        """A client context trusting this CA, presenting `client` (written under `tmp`)."""
        context = ssl.create_default_context(cadata=self.pem.decode())
        if client is not None:
            assert tmp is not None
            cert, key = tmp / "client.pem", tmp / "client-key.pem"
            cert.write_bytes(client.cert_pem)
            key.write_bytes(client.key_pem)
            context.load_cert_chain(cert, key)
        return context


def replace(path: Path, data: bytes) -> None:
    """Write `data` to a new file and rename it over `path`, as ACME clients do."""
    fresh = path.with_name(path.name + ".new")
    fresh.write_bytes(data)
    os.replace(fresh, path)


def install(issued: Issued, cert: Path, key: Path) -> None:
    replace(cert, issued.cert_pem)
    replace(key, issued.key_pem)


def served_certificate(address: str) -> bytes:
    """The DER leaf a new TLS connection to `address` is served (not verified)."""
    host, port = address.rsplit(":", 1)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with (
        socket.create_connection((host, int(port)), timeout=5) as sock,
        context.wrap_socket(sock, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der
