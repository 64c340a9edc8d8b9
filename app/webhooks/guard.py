"""Where a webhook may be sent (SPEC §17): never inside the network toolgate runs in.

A webhook URL is chosen by an admin key, and toolgate POSTs to it from inside the operator's
network: without a guard it reaches the cloud's metadata service, the database, toolgate
itself, and each attempt's outcome is a port scanner's answer. So a URL is refused when its
host is, or resolves to, an address that is not global (loopback, private, link-local,
unspecified, shared, reserved, documentation ranges), a multicast address, or a cloud
metadata name, unless the host name or a network holding the address is listed in
`TOOLGATE_WEBHOOK_ALLOW_HOSTS`. It is checked when the webhook is created and again before
each attempt, after resolution: the attempt connects to the address that was checked, so a
DNS answer that changes in between cannot move it inside.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# Names that reach a cloud provider's metadata service or the machine itself whatever DNS
# says (GCP's resolver answers metadata.google.internal with 169.254.169.254, and so on).
BLOCKED_NAMES = frozenset({
    "localhost", "localhost.localdomain", "metadata", "metadata.google.internal",
    "metadata.goog", "instance-data", "instance-data.ec2.internal",
})
BLOCKED_SUFFIXES = (".localhost", ".internal", ".local")
RESOLVE_SECONDS = 5.0


class Refused(ValueError):
    """The URL may not be used; the message says why (never what answered there)."""


@dataclass(frozen=True)
class AllowList:
    """TOOLGATE_WEBHOOK_ALLOW_HOSTS: host names (case-insensitive) and networks (CIDRs, or
    single addresses) that are allowed although they are inside."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, entries: Iterable[str]) -> AllowList:
        hosts, networks = set(), []
        for entry in entries:
            entry = entry.strip().lower().strip("[]")
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                hosts.add(entry.rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def allows_host(self, host: str) -> bool:
        return host in self.hosts

    def allows_address(self, address: IP) -> bool:
        return any(address in network for network in self.networks)


def literal_address(host: str) -> IP | None:
    """The address a host names by itself, in every form a resolver accepts: dotted,
    `[v6]`, and the legacy IPv4 forms inet_aton takes (`2130706433`, `0x7f.1`, `0177.0.0.1`),
    which getaddrinfo would otherwise turn into 127.0.0.1 behind a name check's back."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, ValueError):
        return None


def inside(address: IP) -> bool:
    """True for every address a webhook must not reach."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = address.ipv4_mapped or address.sixtofour or (
            address.teredo[1] if address.teredo else None)
        if embedded is not None:
            return inside(embedded)
        if address in _NAT64:
            return inside(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return True  # fec0::/10: deprecated (RFC 3879), yet Python counts it global
    return (not address.is_global or address.is_multicast or address.is_reserved
            or address.is_private or address.is_loopback or address.is_link_local
            or address.is_unspecified)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def host_of(url: str) -> tuple[str, int]:
    """The URL's host (lower case, no brackets, no trailing dot) and port; Refused for a
    URL with user info (it would be stored and shown) or without a host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as bad:
        raise Refused(f"not a URL toolgate can send to: {bad}") from None
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        raise Refused("a webhook URL may not hold a user name or password")
    host = _ascii_form(parts.hostname or "").rstrip(".")
    if not host:
        raise Refused("the URL has no host")
    return host, port or (443 if parts.scheme == "https" else 80)


# IDNA (RFC 3490 §3.1) reads these as label dots, and its mapping folds fullwidth digits and
# letters (NFKC): `127.0.0.1。` and `１２７.0.0.1` reach 127.0.0.1 through a resolver, so the
# guard reads the host as the resolver will.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})


def _ascii_form(host: str) -> str:
    return unicodedata.normalize("NFKC", host.translate(_DOTS)).translate(_DOTS).lower()


def check_address(address: IP, allow: AllowList) -> None:
    if inside(address) and not allow.allows_address(address):
        raise Refused(f"{address} is not a public address (loopback, private, link-local, "
                      "unspecified, multicast or reserved); allow it with "
                      "TOOLGATE_WEBHOOK_ALLOW_HOSTS")


def check_name(host: str, allow: AllowList) -> None:
    if allow.allows_host(host):
        return
    if host in BLOCKED_NAMES or host.endswith(BLOCKED_SUFFIXES):
        raise Refused(f"{host} names the machine or a cloud metadata service; allow it "
                      "with TOOLGATE_WEBHOOK_ALLOW_HOSTS")


async def resolve(host: str, port: int) -> list[IP]:
    loop = asyncio.get_running_loop()
    answers = await asyncio.wait_for(
        loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_SECONDS)
    found: list[IP] = []
    for *_, sockaddr in answers:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


async def check_url(url: str, allow: AllowList, *, must_resolve: bool) -> IP | None:
    """Refused unless `url` may be sent to; the checked address to connect to (None when the
    name does not resolve and `must_resolve` is false: at creation, a name that does not
    resolve yet is checked again at every attempt).

    A name in the allow list may resolve anywhere; otherwise every address it resolves to
    must pass (a name that answers with one public and one inside address is refused: the
    answer is the attacker's to choose)."""
    host, port = host_of(url)
    literal = literal_address(host)
    if literal is not None:
        if not allow.allows_host(host):
            check_address(literal, allow)
        return literal
    check_name(host, allow)
    try:
        addresses = await resolve(host, port)
    except (OSError, TimeoutError, UnicodeError):
        if must_resolve:
            raise Refused(f"{host} does not resolve") from None
        return None
    if not addresses:
        raise Refused(f"{host} does not resolve")
    if not allow.allows_host(host):
        for address in addresses:
            check_address(address, allow)
    return addresses[0]
