"""The hot route's side of toolgate's HTTP protocol (app/edge/connection.py): how the
protocol finds the route on the app it serves, and the `HotRequest` through which the route
(app/authorize/hotpath.py `FastAuthorize.inline`) answers a request without an ASGI task.
The edge imports no feature: the route is the app's `fast_path`, anything with `path`
(bytes), `limit`, `pipeline` (None until served) and `inline(request, headers, body)`."""

from __future__ import annotations

from typing import Any

from app.edge.cycle import STATUS_LINE
from app.edge.limits import EdgeLimits


def served(app: Any) -> tuple[Any, Any]:
    """The hot route and the edge limits of the ToolgateApp that `app` is or wraps (uvicorn
    may wrap the loaded app in its own middleware); (None, defaults) for any other app."""
    for _ in range(8):
        edge = getattr(app, "edge", None)
        if edge is not None and hasattr(edge, "max_connections"):
            fast = getattr(app, "fast_path", None)
            return (fast if hasattr(fast, "inline") else None), edge
        app = getattr(app, "app", None)
        if app is None:
            break
    return None, EdgeLimits()


class HotRequest:
    """A POST /v1/authorize-tool the hot route answers itself: what the connection needs
    to know of it (no scope, no event, no task), and the calls the route answers with."""

    __slots__ = ("conn", "body", "more_body", "keep_alive", "disconnected",
                 "response_started", "response_complete", "version")

    def __init__(self, conn: Any, keep_alive: bool, version: str) -> None:
        self.conn = conn
        self.body = bytearray()
        self.more_body = True
        self.keep_alive = keep_alive
        self.disconnected = self.response_started = self.response_complete = False
        self.version = version

    @property
    def gone(self) -> bool:
        return self.disconnected or self.conn.transport.is_closing()

    @property
    def transport(self) -> Any:
        return self.conn.transport

    @property
    def client(self) -> str | None:
        peer = self.conn.client
        return f"{peer[0]}:{peer[1]}" if peer else None

    def compose(self, status: int, lines: bytes, body: bytes) -> bytes:
        """The whole answer: status line, the server's default headers, `lines` (each
        ending in CRLF), `connection: close` unless the connection stays, and `body`."""
        self.response_started = True
        return b"".join((STATUS_LINE[status], self.conn.default_lines(), lines,
                         b"" if self.keep_alive else b"connection: close\r\n", b"\r\n",
                         body))

    def write_completed(self, data: bytes) -> None:
        """Write the answer (unless the client is gone), then go on with the connection."""
        if self.gone:
            return
        self.conn.transport.write(data)
        self.completed()

    def completed(self) -> None:
        """The answer is written (by write_completed, or by the hot route's outbox)."""
        self.response_complete = True
        self.conn.response_done(self)
