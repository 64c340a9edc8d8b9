"""`domains` conditions (SPEC §18 "Domains"): the hosts of URL arguments and shell words.

Hosts and patterns are IDNA-normalised (UTS 46, the `idna` package), lower-case, without a
trailing dot. `*` matches every host, `*.example.com` its subdomains but not the apex,
anything else itself; `!x` excludes (the last matching pattern decides), so hosts outside
an allow-list are `["*", "!github.com", "!*.github.com"]`. A host that cannot be read (a
variable in it, an invalid name) matches every deny or ask pattern list.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import idna

UNREADABLE = "\x01"
_NUMERIC = re.compile(r"[0-9][0-9a-fA-FxX.]*")


@lru_cache(maxsize=4096)
def normal_host(host: str) -> str:
    """ValueError when `host` is not a host name or an IP literal."""
    host = host.strip().rstrip(".")
    if not host or UNREADABLE in host:
        raise ValueError("no host")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # `[::1]`, as a URL writes it: the address `::1`
    if ":" in host:  # an IPv6 address; anything else with a colon (a port) is no host
        try:
            return ipaddress.IPv6Address(host).compressed
        except ValueError:
            raise ValueError("not a host name or an IP address (a port?)") from None
    if _NUMERIC.fullmatch(host):
        try:  # 2130706433, 0x7f.1 and 127.1 are 127.0.0.1 to curl, as to inet_aton
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            if host.replace(".", "").isdigit():
                return host
    if host.isascii():
        lowered = host.lower()
        if all(c.isalnum() or c in "-_." for c in lowered):
            return lowered  # already ASCII (punycode labels stay as they are)
    try:
        return idna.encode(host, uts46=True).decode("ascii").lower()
    except idna.IDNAError as e:
        raise ValueError(str(e)) from None


def url_host(url: str) -> str:
    """The normal host of an http(s) URL; UNREADABLE when it cannot be told."""
    if UNREADABLE in url.split("//", 1)[-1].split("/", 1)[0]:
        return UNREADABLE
    try:
        host = urlsplit(url.strip()).hostname
        return normal_host(host) if host else UNREADABLE
    except ValueError:
        return UNREADABLE


@dataclass(frozen=True, slots=True)
class DomainPattern:
    text: str
    include: bool
    host: str         # "*" for every host
    subdomains: bool  # `*.host`

    def hit(self, host: str) -> bool:
        if self.host == "*":
            return True
        if self.subdomains:
            return host.endswith("." + self.host)
        return host == self.host


def domain_pattern(text: str) -> DomainPattern:
    include = not text.startswith("!")
    body = text if include else text[1:]
    if body == "*":
        return DomainPattern(text, include, "*", False)
    subdomains = body.startswith("*.")
    host = body[2:] if subdomains else body
    if "*" in host or "/" in host:
        raise ValueError("a domain pattern is `*`, `*.host` or a host")
    return DomainPattern(text, include, normal_host(host), subdomains)


def matches_host(patterns: tuple[DomainPattern, ...], host: str, *, lenient: bool) -> bool:
    if host == UNREADABLE:
        return lenient
    decided = False
    for pattern in patterns:
        if pattern.hit(host):
            decided = pattern.include
    return decided
