"""The edge's connection limits around uvicorn's own httptools protocol, by composition.

`TOOLGATE_HTTP_PROTOCOL=uvicorn` (kept for compatibility) serves on uvicorn's stock
protocol, which by itself holds a request head open as long as a client likes to send it
(one byte a second kept a connection 12 s past a 3 s deadline).
`Guarded` is a plain asyncio.Protocol that owns the connection and hands every byte on to
an instance of the stock protocol, unchanged; it subclasses nothing of uvicorn's. Beside
it, httptools' public parser follows the requests (callbacks only, nothing copied) so the
guard knows what the connection is doing, and one timer per connection enforces
app/edge/limits.py's limits:

- a new connection that sends nothing within the keep-alive wait is closed;
- a request's head not complete within header_timeout of its first byte, or past
  max_header_bytes while it still arrives: 408 / 431 in the one envelope, and closed;
- a body not complete within body_timeout of its head (while reading is not paused,
  i.e. the client, not the server, is slow): 408 and closed;
- past max_connections a new connection gets 503 at once and is closed.
The keep-alive wait after an answer and the concurrency cap are uvicorn's own
(timeout_keep_alive, limit_concurrency: app/cli/main.py). An answer already on its way is
never cut short by our 408: the guard sees the stock protocol's writes and only closes.
toolgate's own protocol (app/edge/connection.py, the default) enforces the same limits itself.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools

IDLE, HEAD, BODY, WAIT = range(4)
_open = [0]  # guarded connections of this process


class _Defaults:
    """EdgeLimits' defaults, for an app that brings none."""

    max_header_bytes = 16 * 1024
    header_timeout = 10.0
    body_timeout = 30.0
    keep_alive = 5.0
    max_connections = 2048


def _limits(app: Any) -> Any:
    for _ in range(8):  # uvicorn may wrap the loaded app in its own middleware
        edge = getattr(app, "edge", None)
        if edge is not None and hasattr(edge, "header_timeout"):
            return edge
        app = getattr(app, "app", None)
        if app is None:
            break
    return _Defaults


class _Seen:
    """The transport as the stock protocol sees it: every call is the transport's own; a
    write is noted, so a deadline never writes over an answer that has begun, and once the
    guard has closed the connection nothing more is written (the stock protocol learns of
    the close a loop turn later)."""

    __slots__ = ("_transport", "wrote", "shed")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self.wrote = self.shed = False

    def write(self, data: bytes) -> None:
        if self.shed:
            return
        self.wrote = True
        self._transport.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class Guarded(asyncio.Protocol):
    """uvicorn.run(http=...)'s protocol factory: `Guarded(config=..., server_state=...,
    app_state=...)`, as uvicorn calls any protocol class."""

    def __init__(self, config: Any, server_state: Any, app_state: Any,
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        from uvicorn.config import HTTP_PROTOCOLS
        from uvicorn.importer import import_from_string

        stock = import_from_string(HTTP_PROTOCOLS["httptools"])
        self.inner = stock(config=config, server_state=server_state, app_state=app_state,
                           _loop=_loop)
        self.loop = _loop or asyncio.get_event_loop()
        self.edge = _limits(config.loaded_app)
        self.keep_alive = config.timeout_keep_alive
        self.parser = httptools.HttpRequestParser(self)
        self.phase, self.since = IDLE, 0.0
        self.head_bytes = 0
        self.transport: Any = None
        self.seen: _Seen | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.following = True  # False once the parser cannot follow (upgrade, bad request)

    # --- the connection, handed on -------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        self.transport = transport
        if _open[0] >= self.edge.max_connections:
            self._refuse(transport)
            return
        _open[0] += 1
        self.seen = _Seen(transport)
        self.inner.connection_made(self.seen)
        self.phase, self.since = IDLE, self.loop.time()
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.seen is not None:
            _open[0] -= 1
            self.seen = None
            self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.seen is None:
            return  # refused at the cap: dropped
        if self.following:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self.following, self.phase = False, WAIT  # the websocket's own from here
            except httptools.HttpParserError:
                self.following, self.phase = False, WAIT  # the stock protocol answers 400
            if self.phase == HEAD:
                self.head_bytes += len(data)
                if self.head_bytes > self.edge.max_header_bytes + len(data):
                    self._shed(431, "headers_too_large", "the request's headers are larger "
                               f"than {self.edge.max_header_bytes} bytes")
                    return
        self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received()

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()

    # --- what the parser sees ----------------------------------------------------------

    def on_message_begin(self) -> None:
        self.phase, self.since = HEAD, self.loop.time()
        self.head_bytes = 0
        if self.seen is not None:
            self.seen.wrote = False

    def on_headers_complete(self) -> None:
        self.phase, self.since = BODY, self.loop.time()

    def on_message_complete(self) -> None:
        self.phase = WAIT  # for the answer: no deadline of ours (then uvicorn's keep-alive)

    # --- the one timer -----------------------------------------------------------------

    def _arm(self) -> None:
        edge = self.edge
        tick = max(0.05, min(t for t in (self.keep_alive, edge.header_timeout,
                                         edge.body_timeout) if t > 0))
        self.timer = self.loop.call_later(tick, self._on_timer)

    def _on_timer(self) -> None:
        self.timer = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        now, edge, phase = self.loop.time(), self.edge, self.phase
        if phase == IDLE and now - self.since >= self.keep_alive:
            transport.close()  # connected, and nothing sent
            return
        if phase == HEAD and now - self.since >= edge.header_timeout:
            self._shed(408, "request_timeout", "the request's headers did not arrive "
                       f"within {edge.header_timeout:g} s")
            return
        if (phase == BODY and now - self.since >= edge.body_timeout
                and _reading(transport)):  # paused: the server, not the client, is slow
            self._shed(408, "request_timeout", "the request's body did not arrive within "
                       f"{edge.body_timeout:g} s")
            return
        self._arm()

    def _shed(self, status: int, code: str, message: str) -> None:
        """Answer `status` (unless an answer has begun) and close."""
        transport = self.transport
        if self.seen is not None:
            if not self.seen.wrote:
                transport.write(_error(status, code, message))
            self.seen.shed = True
        self.following, self.phase = False, WAIT
        transport.close()

    def _refuse(self, transport: Any) -> None:
        transport.write(_error(503, "unavailable", "the server is at its connection limit "
                               f"({self.edge.max_connections}); retry",
                               {"Retry-After": "1"}))
        transport.close()


def _reading(transport: Any) -> bool:
    try:
        return bool(transport.is_reading())
    except (AttributeError, NotImplementedError):  # a transport that cannot tell
        return True


_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large",
            503: b"Service Unavailable"}


def _error(status: int, code: str, message: str,
           headers: dict[str, str] | None = None) -> bytes:
    from app.edge.handlers import envelope
    from app.edge.logs import new_request_id

    response = envelope(status, code, message, None, headers=headers)
    lines = [b"HTTP/1.1 %d %s\r\n" % (status, _REASONS[status])]
    lines += [b"%s: %s\r\n" % pair for pair in response.raw_headers]
    lines.append(b"x-request-id: %s\r\nconnection: close\r\n\r\n"
                 % new_request_id().encode())
    return b"".join(lines) + response.body
