"""The limits of the HTTP edge: how large a request's head may be, how long its head and
body may take to arrive, how long an idle connection is kept, how many connections a
worker holds, and how much of a refused body is still read so the client gets the answer.

`EdgeLimits` is what `create_app` puts on the app (`app.edge`). toolgate's HTTP protocol
(app/edge/connection.py, app/edge/deadlines.py) enforces all of it per connection, before a
request reaches the app; the guard around uvicorn's own protocol (app/edge/guard.py) the
deadlines, the idle first wait and the cap; `check_head` enforces the head limits in the
app itself too, so they hold under any other ASGI server (docs/deployment.md says which
limit holds where). Settings: TOOLGATE_MAX_HEADER_BYTES and the others in app/config.py.
"""

from __future__ import annotations

import logging
import resource
from dataclasses import dataclass

from app.config import Settings
from app.edge.errors import HeadersTooLarge

log = logging.getLogger("toolgate")

# File descriptors a worker keeps for what is not a client connection: its database
# pool (and as many again as overflow), the decision log writer's socket, the LISTEN
# connection, the listening socket, log files, the event loop's own.
_RESERVED_FDS = 64


@dataclass(frozen=True, slots=True)
class EdgeLimits:
    max_header_bytes: int = 16 * 1024
    max_headers: int = 100
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive: float = 5.0
    max_connections: int = 2048
    drain_bytes: int = 4 * 1024 * 1024
    drain_seconds: float = 5.0

    @classmethod
    def from_settings(cls, settings: Settings) -> EdgeLimits:
        return cls(max_header_bytes=settings.max_header_bytes,
                   max_headers=settings.max_headers,
                   header_timeout=settings.header_timeout_seconds,
                   body_timeout=settings.body_timeout_seconds,
                   keep_alive=settings.keep_alive_seconds,
                   max_connections=connection_cap(settings),
                   drain_bytes=settings.drain_max_bytes,
                   drain_seconds=settings.drain_seconds)

    @property
    def lingering_refusals(self) -> int:
        """How many refused connections may wait (up to a second) for their client to
        read the 503 before they are closed; past it a refusal closes at once."""
        return max(8, self.max_connections // 16)


def connection_cap(settings: Settings, open_files: int | None = None) -> int:
    """TOOLGATE_MAX_CONNECTIONS, lowered so that the connections, the refusals waiting to
    close and what the worker needs besides fit in its open-file limit: a worker that runs
    out of descriptors cannot even accept a connection to refuse it, and every request
    fails while it is out (what issue 22 measured)."""
    if open_files is None:
        open_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    wanted = settings.max_connections
    if open_files == resource.RLIM_INFINITY:
        return wanted
    spare = open_files - _RESERVED_FDS - 2 * settings.db_pool_size
    fits = max(16, spare * 16 // 17)  # the cap plus cap/16 refusals waiting to close
    if fits < wanted:
        log.warning("TOOLGATE_MAX_CONNECTIONS=%d does not fit the open-file limit (%d): "
                    "at most %d connections per worker", wanted, open_files, fits)
    return min(wanted, fits)


def raise_open_file_limit() -> int:
    """Raise this process's soft open-file limit to its hard limit (inherited by the
    workers `toolgate serve` starts); the soft limit it ends with."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            pass
    return soft


def head_size(scope: dict) -> int:
    """A request head's size as the limit counts it: the target (path and query) plus
    every header's name and value, in bytes."""
    size = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
    for name, value in scope["headers"]:
        size += len(name) + len(value)
    return size


# Set in the ASGI scope by toolgate's HTTP protocol (app/edge/connection.py), which counts the
# head as it arrives: ToolgateApp then does not count it a second time.
HEAD_CHECKED = "toolgate.head_checked"


def check_head(scope: dict, limits: EdgeLimits) -> None:
    """HeadersTooLarge (431) for a head past TOOLGATE_MAX_HEADER_BYTES or with more than
    TOOLGATE_MAX_HEADERS headers."""
    count = len(scope["headers"])
    if count > limits.max_headers:
        raise too_many_headers(limits)
    if head_size(scope) > limits.max_header_bytes:
        raise head_too_large(limits)


def too_many_headers(limits: EdgeLimits) -> HeadersTooLarge:
    return HeadersTooLarge(f"more than {limits.max_headers} request headers",
                           limit=limits.max_headers)


def head_too_large(limits: EdgeLimits) -> HeadersTooLarge:
    return HeadersTooLarge(
        f"request target and headers exceed {limits.max_header_bytes} bytes",
        limit=limits.max_header_bytes)
