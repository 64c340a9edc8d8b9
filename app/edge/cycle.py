"""One request's ASGI http cycle on toolgate's HTTP protocol (app/edge/connection.py):
`receive` and `send` as the ASGI spec has them, for every request the protocol does not
answer itself.

What it does is what uvicorn's httptools cycle does, written here against public APIs
only: the response head with the server's default headers (date, server), the header
names and values checked (an app's bad header is a RuntimeError, never bytes on the
wire), Content-Length or chunked bodies (chunked when the app declares neither), HEAD
without a body, `connection: close` when the request or the app asked for it, 100 Continue
sent when the app first reads the body of a request that expects it, a body larger than
the flow-control mark pausing the socket until the app reads it, writes waiting while the
transport's buffer is full, `http.disconnect` once the client is gone or the answer is
out, and a 500 for an app that fails before it answers. One difference: the head is
written together with the body's first part (one write, one segment, for the common
answer of one body message) or on the next loop turn, whichever comes first, so a
streamed answer's head is not held back behind a slow first chunk.
"""

from __future__ import annotations

import asyncio
import http
import logging
import re
from typing import Any

log = logging.getLogger("uvicorn.error")
access_log = logging.getLogger("uvicorn.access")

# As uvicorn and h11 refuse them: a name that is not a token, a value with control bytes.
HEADER_RE = re.compile(b'[\x00-\x1f\x7f()<>@,;:\\[\\]={} \t\\\\"]')
HEADER_VALUE_RE = re.compile(b"[\x00-\x08\x0a-\x1f\x7f]")
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


def _status_line(status: int) -> bytes:
    try:
        phrase = http.HTTPStatus(status).phrase.encode()
    except ValueError:
        phrase = b""
    return b"HTTP/1.1 %d %s\r\n" % (status, phrase)


STATUS_LINE = {status: _status_line(status) for status in range(100, 600)}


class Cycle:
    """The ASGI side of one request; the connection fills `body`, sets `more_body` and
    `disconnected`, and sets `event` when either changes."""

    __slots__ = ("conn", "scope", "transport", "body", "more_body", "keep_alive",
                 "disconnected", "response_started", "response_complete", "event",
                 "expect_100", "chunked", "expected", "head_only", "held", "pending")

    def __init__(self, conn: Any, scope: dict[str, Any], keep_alive: bool,
                 expect_100: bool) -> None:
        self.conn = conn
        self.scope = scope
        self.transport = conn.transport
        self.body = bytearray()
        self.more_body = True
        self.keep_alive = keep_alive
        self.disconnected = self.response_started = self.response_complete = False
        self.event = asyncio.Event()
        self.expect_100 = expect_100
        self.chunked: bool | None = None
        self.expected = 0  # body bytes the declared Content-Length still wants
        self.head_only = scope["method"] == "HEAD"
        self.held: bytes | None = None  # the response head, until the body's first part
        self.pending = False  # rendered (`render`), to be written by the caller

    async def run(self, app: Any) -> None:
        try:
            result = await app(self.scope, self.receive, self.send)
        except BaseException as exc:
            log.error("Exception in ASGI application\n", exc_info=exc)
            if not self.response_started:
                await self._send_500()
            else:
                self._abort()
        else:
            if result is not None:
                log.error("ASGI callable should return None, but returned '%s'.", result)
                self._abort()
            elif not self.response_started and not self.disconnected:
                log.error("ASGI callable returned without starting response.")
                await self._send_500()
            elif not self.response_complete and not self.disconnected and not self.pending:
                log.error("ASGI callable returned without completing response.")
                self._abort()

    def _abort(self) -> None:
        self._flush()
        self.transport.close()

    async def _send_500(self) -> None:
        await self.send({"type": "http.response.start", "status": 500, "headers": [
            (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"21"),
            (b"connection", b"close")]})
        await self.send({"type": "http.response.body", "body": b"Internal Server Error"})

    async def receive(self) -> dict[str, Any]:
        if self.expect_100 and not self.transport.is_closing():
            self.transport.write(CONTINUE)
            self.expect_100 = False
        if not self.disconnected and not self.response_complete:
            self.conn.resume_reading()
            await self.event.wait()
            self.event.clear()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        message = {"type": "http.request", "body": bytes(self.body),
                   "more_body": self.more_body}
        self.body = bytearray()
        return message

    async def send(self, message: dict[str, Any]) -> None:
        conn = self.conn
        if conn.write_paused and not self.disconnected:
            await conn.drain()
        if self.disconnected:
            return
        kind = message["type"]
        if not self.response_started:
            if kind != "http.response.start":
                raise RuntimeError(f"Expected ASGI message 'http.response.start', but got "
                                   f"'{kind}'.")
            self._start(message)
        elif not self.response_complete:
            if kind != "http.response.body":
                raise RuntimeError(f"Expected ASGI message 'http.response.body', but got "
                                   f"'{kind}'.")
            self._body(message.get("body", b""), message.get("more_body", False))
        else:
            raise RuntimeError(f"Unexpected ASGI message '{kind}' sent, after response "
                               "already completed.")

    def _start(self, message: dict[str, Any]) -> None:
        self.response_started = True
        self.expect_100 = False
        status = message["status"]
        if access_log.hasHandlers() and self.conn.access_log:
            scope = self.scope
            client = scope.get("client")
            query = scope.get("query_string")
            path = scope["root_path"] + scope["path"] + (
                "?" + query.decode("ascii") if query else "")
            access_log.info('%s - "%s %s HTTP/%s" %d',
                            f"{client[0]}:{client[1]}" if client else "", scope["method"], path,
                            scope["http_version"], status)
        content = [STATUS_LINE[status], self.conn.default_lines()]
        has_close = False
        for name, value in message.get("headers", ()):
            if HEADER_RE.search(name):
                raise RuntimeError("Invalid HTTP header name.")
            if HEADER_VALUE_RE.search(value):
                raise RuntimeError("Invalid HTTP header value.")
            name = name.lower()
            if name == b"content-length" and self.chunked is None:
                self.expected = int(value.decode())
                self.chunked = False
            elif name == b"transfer-encoding" and value.lower() == b"chunked":
                self.expected = 0
                self.chunked = True
            elif name == b"connection":
                if b"close" in [token.lower().strip() for token in value.split(b",")]:
                    self.keep_alive = False
                    has_close = True
            content.extend((name, b": ", value, b"\r\n"))
        if not self.keep_alive and not has_close:
            content.append(b"connection: close\r\n")
        if self.chunked is None and not self.head_only and status not in (204, 304):
            self.chunked = True  # neither Content-Length nor Transfer-Encoding given
            content.append(b"transfer-encoding: chunked\r\n")
        content.append(b"\r\n")
        self.held = b"".join(content)
        self.conn.loop.call_soon(self._flush)  # unless the body's first part takes it

    def _flush(self) -> None:
        held = self.held
        if held is not None:
            self.held = None
            if not self.disconnected and not self.transport.is_closing():
                self.transport.write(held)

    def _body(self, body: bytes, more_body: bool) -> None:
        if self.head_only:
            self.expected = 0
            data = b""
        elif self.chunked:
            data = b"%x\r\n%s\r\n" % (len(body), body) if body else b""
            if not more_body:
                data += b"0\r\n\r\n"
        else:
            if len(body) > self.expected:
                raise RuntimeError("Response content longer than Content-Length")
            self.expected -= len(body)
            data = body
        held = self.held
        if held is not None:
            self.held = None
            data = held + data
        if data:
            self.transport.write(data)
        if not more_body:
            if self.expected != 0:
                raise RuntimeError("Response content shorter than Content-Length")
            if not self.pending:
                self.done()

    def render(self, start: dict[str, Any], body: bytes) -> bytes:
        """A whole answer (its start message and one body) as bytes, not written: the
        caller writes them, then calls `done` (the hot route holds its answers until the
        commit that released them is acknowledged, to write them together). Until then
        the response is not complete: a pipelined request waits behind it."""
        real, parts = self.transport, _Parts(self.transport)
        self.transport, self.pending = parts, True
        try:
            self._start(start)
            self._body(body, False)
        finally:
            self.transport = real
        return b"".join(parts.parts)

    def done(self) -> None:
        """The answer is written: go on with the connection."""
        self.pending = False
        self.response_complete = True
        self.event.set()
        self.conn.response_done(self)


class _Parts:
    """A transport that keeps what is written (Cycle.render)."""

    __slots__ = ("parts", "is_closing")

    def __init__(self, transport: Any) -> None:
        self.parts: list[bytes] = []
        self.is_closing = transport.is_closing

    def write(self, data: bytes) -> None:
        self.parts.append(data)


async def service_unavailable(scope: dict, receive: Any, send: Any) -> None:
    """uvicorn's answer past its `limit_concurrency` (not set by `toolgate serve`, whose
    cap is the edge's TOOLGATE_MAX_CONNECTIONS)."""
    await send({"type": "http.response.start", "status": 503, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"19"),
        (b"connection", b"close")]})
    await send({"type": "http.response.body", "body": b"Service Unavailable"})
