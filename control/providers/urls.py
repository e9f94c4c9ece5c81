"""Upstream base URLs: what the gateway may be pointed at (server-side request forgery guard).

- only `http` and `https`, with a host, without userinfo, query or fragment;
- never a cloud metadata endpoint (169.254.169.254, fd00:ec2::254, metadata.google.internal, ...);
- not link-local (169.254.0.0/16, fe80::/10), and not the gateway's own data or admin port on a
  loopback, unspecified or listening address, unless the provider is marked `internal`;
- numeric hosts are read the way the resolver would (`2852039166`, `0xa9.254.169.254`), so an
  address cannot hide behind another spelling. Loopback in general is allowed (local model
  servers and the simulators run there). The core never follows redirects.

Host names are not resolved here: what a name resolves to can change after the check, so the
guard against names pointing at internal addresses belongs where the connection is made (the core).
"""

from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

from control.listen import HostPort

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

METADATA_HOSTS = frozenset(
    {
        "metadata.google.internal",
        "metadata.goog",
        "metadata",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.internal",
    }
)
METADATA_IPS = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "fd00:ec2::254", "100.100.100.200")
)
_NUMERIC_HOST = re.compile(r"^[0-9a-fx.]+$", re.IGNORECASE)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class UnsafeURL(ValueError):
    """The message names the rule, never repeats the URL."""


def parse_ip(host: str) -> IPAddress | None:
    """The address a numeric host stands for, in any spelling the C resolver accepts."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if not _NUMERIC_HOST.match(host) or not any(c.isdigit() for c in host):
            return None
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _is_local(host: str, address: IPAddress | None) -> bool:
    if address is not None:
        return address.is_loopback or address.is_unspecified
    return host == "localhost" or host.endswith(".localhost")


def check_base_url(url: str, *, internal: bool, own: set[HostPort]) -> str:
    """The URL without trailing slashes, or `UnsafeURL` saying which rule it breaks."""
    if any(c.isspace() or ord(c) < 0x20 for c in url):
        raise UnsafeURL("must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UnsafeURL("is not a valid URL") from None
    if parts.scheme not in _DEFAULT_PORTS:
        raise UnsafeURL("must start with http:// or https://")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise UnsafeURL("must not carry user or password (use the credential field)")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise UnsafeURL("must not carry a query or a fragment")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise UnsafeURL("needs a host")
    address = parse_ip(host)
    if host in METADATA_HOSTS or (address is not None and address in METADATA_IPS):
        raise UnsafeURL("points at a cloud metadata endpoint")
    if address is not None and address.is_multicast:
        raise UnsafeURL("points at a multicast address")
    if not internal:
        if address is not None and address.is_link_local:
            raise UnsafeURL("points at a link-local address (allowed only for internal providers)")
        effective_port = port if port is not None else _DEFAULT_PORTS[parts.scheme]
        for endpoint in own:
            same_host = _is_local(host, address) or host == endpoint.host
            if same_host and effective_port == endpoint.port:
                raise UnsafeURL(
                    "points at the gateway's own listener (allowed only for internal providers)"
                )
    return url.rstrip("/")
