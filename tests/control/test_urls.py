"""The base URL guard on its own (no database): every refusal names its rule."""

from __future__ import annotations

import pytest

from control.process.listen import HostPort
from control.providers.urls import UnsafeURL, check_base_url, parse_ip

OWN = {HostPort("127.0.0.1", 18081), HostPort("0.0.0.0", 8080)}


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("ftp://example.com/v1", "http"),
        ("file:///etc/passwd", "http"),
        ("http://169.254.169.254/latest", "metadata"),
        ("http://metadata.google.internal/v1", "metadata"),
        ("http://[fd00:ec2::254]/v1", "metadata"),
        ("http://2852039166/v1", "metadata"),  # 169.254.169.254 spelled as one number
        ("http://0xa9.0xfe.0xa9.0xfe/v1", "metadata"),
        ("http://[::ffff:169.254.169.254]/v1", "metadata"),
        ("http://169.254.10.20:8000/v1", "link-local"),
        ("http://[fe80::1]:8000/v1", "link-local"),
        ("http://127.0.0.1:18081/v1", "own listener"),
        ("http://127.0.0.1:8080/v1", "own listener"),  # the data port, bound on 0.0.0.0
        ("http://[::1]:8080/v1", "own listener"),
        ("http://localhost:18081/v1", "own listener"),
        ("http://0.0.0.0:18081/v1", "own listener"),
        ("http://user:pw@example.com/v1", "user"),
        ("http://example.com/v1?x=1", "query"),
        ("http:///v1", "host"),
        ("http://example.com:99999/v1", "valid URL"),
        ("http://[224.0.0.1]/v1", "valid URL"),
        ("http://224.0.0.1/v1", "multicast"),
    ],
)
def test_unsafe_base_urls_are_refused(url: str, reason: str) -> None:
    with pytest.raises(UnsafeURL) as refused:
        check_base_url(url, internal=False, own=OWN)
    assert reason in str(refused.value)
    assert url not in str(refused.value)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9000/v1",
        "http://localhost:9001/v1",
        "https://api.openai.com/v1",
        "http://10.0.0.5:8000/v1",
        "http://[::1]:9000/v1",
        "http://127.0.0.1/v1",  # port 80 is not one of ours
    ],
)
def test_ordinary_upstreams_pass(url: str) -> None:
    assert check_base_url(url, internal=False, own=OWN) == url


def test_internal_allows_link_local_but_never_metadata_or_own_ports() -> None:
    assert check_base_url("http://169.254.1.1:80/v1", internal=True, own=OWN)
    with pytest.raises(UnsafeURL, match="own listener"):
        check_base_url("http://127.0.0.1:18081/v1", internal=True, own=OWN)
    for metadata in [
        "169.254.169.254",
        "[64:ff9b::a9fe:a9fe]",
        "[2002:a9fe:a9fe::]",
        "[::a9fe:a9fe]",
    ]:
        with pytest.raises(UnsafeURL, match="metadata"):
            check_base_url(f"http://{metadata}/", internal=True, own=OWN)


def test_trailing_slashes_are_dropped() -> None:
    assert check_base_url("http://127.0.0.1:9000/v1//", internal=False, own=OWN).endswith("/v1")


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("2852039166", "169.254.169.254"),
        ("0xa9fea9fe", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("127.1", "127.0.0.1"),
        ("::ffff:127.0.0.1", "127.0.0.1"),
        ("example.com", None),
        ("cafe", None),
    ],
)
def test_numeric_hosts_are_read_like_the_resolver(host: str, address: str | None) -> None:
    parsed = parse_ip(host)
    assert (str(parsed) if parsed else None) == address
