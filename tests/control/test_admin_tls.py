"""The admin port's TLS context: a replaced pair reaches new handshakes, a broken one is refused
and counted while the pair in force keeps serving, and the file watch waits for both files to
stand still. Handshakes run in memory (`ssl.MemoryBIO`) against the live context."""

from __future__ import annotations

import contextlib
import ssl
from pathlib import Path

import pytest

from control.api.errors import StartupError
from control.process.admin_tls import AdminTls
from control.process.file_watch import FileWatch
from tests.support.certs import Ca, install, replace


def served(context: ssl.SSLContext, ca: Ca) -> bytes:
    """The leaf a new handshake with `context` presents, checked against `ca`."""
    client_ctx = ca.client_context()
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = context.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    for _ in range(10):
        for side in (client, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                side.do_handshake()
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    der = client.getpeercert(binary_form=True)
    assert der is not None
    return der


def test_reload_swaps_a_good_pair_and_refuses_a_broken_one(tmp_path: Path) -> None:
    ca = Ca()
    cert, key = tmp_path / "admin.pem", tmp_path / "admin-key.pem"
    first = ca.issue()
    install(first, cert, key)
    tls = AdminTls(cert, key, None)
    assert served(tls.context, ca) == first.der
    assert tls.reload() is False and tls.reloads == 0  # the same files: nothing to do

    second = ca.issue(days=40)
    install(second, cert, key)
    assert tls.reload() is True
    assert served(tls.context, ca) == second.der
    assert abs(tls.not_after - second.cert.not_valid_after_utc.timestamp()) < 1

    replace(key, ca.issue().key_pem)  # a key that is not the certificate's
    assert tls.reload() is False
    assert tls.reload_failures == 1
    assert served(tls.context, ca) == second.der, "the pair in force kept serving"
    replace(cert, b"not a certificate")
    assert tls.reload() is False and tls.reload_failures == 2
    assert served(tls.context, ca) == second.der


def test_a_bad_pair_at_start_is_a_startup_error(tmp_path: Path) -> None:
    ca = Ca()
    cert, key = tmp_path / "admin.pem", tmp_path / "admin-key.pem"
    install(ca.issue(days=-1), cert, key)
    with pytest.raises(StartupError, match="expired"):
        AdminTls(cert, key, None)
    with pytest.raises(StartupError, match="cannot read"):
        AdminTls(tmp_path / "absent.pem", key, None)


def test_the_watch_reports_a_change_once_both_files_stood_still(tmp_path: Path) -> None:
    a, b = tmp_path / "a.pem", tmp_path / "b.pem"
    a.write_text("1")
    b.write_text("1")
    watch = FileWatch([a, b])
    assert not watch.changed()
    replace(a, b"22")
    assert not watch.changed()  # moving
    replace(b, b"22")
    assert not watch.changed()  # still moving
    assert watch.changed()  # stood still for one check
    assert not watch.changed()


def test_the_key_copy_openssl_reads_never_lands_on_disk(tmp_path: Path) -> None:
    from control.process import admin_tls

    ca = Ca()
    cert, key = tmp_path / "admin.pem", tmp_path / "admin-key.pem"
    install(ca.issue(), cert, key)
    pair = admin_tls._check(cert, key)
    with admin_tls._private_copy(pair) as (_cert_copy, key_copy):
        assert key_copy.startswith("/proc/self/fd/")
        assert Path(key_copy).read_bytes() == key.read_bytes()
    assert not Path(key_copy).exists() or Path(key_copy).read_bytes() != key.read_bytes()


def test_the_data_port_metrics_relay_and_admin_tls_are_refused_together(tmp_path: Path) -> None:
    from pydantic import ValidationError

    from control.process.settings import Settings

    metrics = {"data_port": True, "data_port_token": "t" * 20}
    tls = {"admin_cert_file": tmp_path / "c.pem", "admin_key_file": tmp_path / "k.pem"}
    with pytest.raises(ValidationError, match="cannot be combined with admin TLS"):
        Settings.model_validate({"metrics": metrics, "tls": tls})
    assert Settings.model_validate({"metrics": metrics}).metrics.data_port
