"""Upstream base URLs: what the gateway may be pointed at (server-side request forgery guard).

- only `http` and `https`, with a host, without userinfo, query or fragment;
- never a cloud metadata endpoint (169.254.169.254, fd00:ec2::254, metadata.google.internal, ...),
  also not in an IPv6 form that carries its IPv4 address (mapped, compatible, NAT64, 6to4, Teredo);
- never the gateway's own data or admin port on a loopback, unspecified or listening address (a
  route pointed at the gateway itself calls itself in a loop);
- not link-local (169.254.0.0/16, fe80::/10) unless the provider is marked `internal`;
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

from control.process.listen import HostPort

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


_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))


def embedded_v4(address: IPAddress) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (compatible, NAT64, 6to4, Teredo), if any; the
    core's connect-time guard reads the same forms."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    value = int(address)
    low32 = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    if value >> 32 == 0 and value > 1:
        return low32
    if any(address in net for net in _NAT64):
        return low32
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


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
    embedded = None if address is None else embedded_v4(address)
    if host in METADATA_HOSTS or address in METADATA_IPS or embedded in METADATA_IPS:
        raise UnsafeURL("points at a cloud metadata endpoint")
    if address is not None and address.is_multicast:
        raise UnsafeURL("points at a multicast address")
    effective_port = port if port is not None else _DEFAULT_PORTS[parts.scheme]
    for endpoint in own:
        same_host = _is_local(host, address) or host == endpoint.host
        if same_host and effective_port == endpoint.port:
            raise UnsafeURL("points at the gateway's own listener")
    link_local = address is not None and (
        address.is_link_local or (embedded is not None and embedded.is_link_local)
    )
    if link_local and not internal:
        raise UnsafeURL("points at a link-local address (allowed only for internal providers)")
    return url.rstrip("/")
