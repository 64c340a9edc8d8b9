"""uvicorn's httptools protocol, with the hot route answered without an ASGI task.

`toolgate serve` runs uvicorn with this protocol (`http=ToolgateHttpToolsProtocol`). For
every request but one kind it is uvicorn's own `HttpToolsProtocol`, unchanged. For
POST /v1/authorize-tool, a request whose answer memory can give (a known key, a cached
plan, a fresh registry: `FastAuthorize.ready`) is decided when its body is complete, its
record handed to the decision log with a callback, and the answer written to the
connection when the commit is acknowledged. Per request that skips the ASGI task and
its coroutine, the receive/send messages, uvicorn's per-message header checks and the
await on the commit (docs/performance.md has the figures).

Everything else stays uvicorn's: it parses every request, and whatever is not answered
here gets the scope, RequestResponseCycle and ASGI task uvicorn's own code builds. A hot
request's cycle is a `_HotCycle`, which holds the state uvicorn's keep-alive, pipelining,
shutdown and connection-lost handling read and set; its scope is never built. For
anything `ready` does not answer (an unknown key or plan, any refusal), a body past the
flow-control mark, a client that expects 100-continue, a pipelined request or a
connection whose writes are paused, the ASGI app (app/authorize/hotpath.py) runs every step,
rendering errors with the one envelope. So the answer, headers included, is the same
either way (tests/toolgate_uvicorn/test_protocol.py; the decision cases and bad inputs run through
this protocol too).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.utils import get_client_addr

if TYPE_CHECKING:
    from app.authorize.hotpath import FastAuthorize
    from app.decisions.log import RecordingFailed

log = logging.getLogger("toolgate")

# app.authorize.hotpath.PATH (tests check it). Nothing of toolgate is imported here until a
# ToolgateApp is served: any other app (the benchmark's bare one) runs on this protocol
# with uvicorn's own imports only.
PATH = "/v1/authorize-tool"
_PATH = PATH.encode()
_OK_HEADERS = b"content-type: application/json\r\ncontent-length: "
_default_lines: tuple[object, bytes] = (None, b"")  # see _defaults


def _fast_path(app: Any) -> FastAuthorize | None:
    """The FastAuthorize of the ToolgateApp that `app` is or wraps (uvicorn may wrap the
    loaded app in its own middleware), or None for any other app."""
    for _ in range(8):
        fast = getattr(app, "fast_path", None)
        if fast is not None and hasattr(fast, "ready"):
            return fast  # type: ignore[no-any-return]
        app = getattr(app, "app", None)
        if app is None:
            return None
    return None


class _NoEvent:
    """Stands in for a cycle's message_event: nothing waits on a hot cycle's."""

    __slots__ = ()

    def set(self) -> None:
        pass


class _HotCycle:
    """The request-response state uvicorn's protocol reads and sets on `self.cycle`
    (body, more_body, keep_alive, disconnected, response_complete, message_event), for a
    request answered here: no scope, no asyncio.Event, no ASGI task."""

    __slots__ = ("body", "more_body", "keep_alive", "disconnected", "response_started",
                 "response_complete", "http_version", "flags")
    message_event = _NoEvent()

    def __init__(self, keep_alive: bool, http_version: str) -> None:
        self.body = bytearray()
        self.more_body = True
        self.keep_alive = keep_alive
        self.disconnected = self.response_started = self.response_complete = False
        self.http_version = http_version
        self.flags: dict[str, Any] = {}  # what FastAuthorize.ready marks for the ASGI app


class ToolgateHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fast = _fast_path(self.app) if not self.root_path else None

    # uvicorn builds the request's ASGI scope when its message begins; here it is built only
    # for a request that needs it (all but the hot route's), with uvicorn's own code.
    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.scope = None  # type: ignore[assignment]

    def _begin_scope(self) -> None:
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()  # a new scope, and url, headers, expect reset
        self.url, self.headers, self.expect_100_continue = url, headers, expect
        self.scope["headers"] = headers

    def on_headers_complete(self) -> None:
        fast = self._fast
        parser = self.parser
        if (fast is not None and fast.authorizer is not None and self.url == _PATH
                and not self.expect_100_continue and self.limit_concurrency is None
                and (self.cycle is None or self.cycle.response_complete)
                and not self.flow.write_paused and parser.get_method() == b"POST"
                and not parser.should_upgrade() and self._length_within(fast.limit)):
            version = parser.get_http_version()
            self.cycle = _HotCycle(version != "1.0" and parser.should_keep_alive(), version)
            return
        self._begin_scope()
        super().on_headers_complete()

    def _length_within(self, limit: int) -> bool:
        """False for a declared Content-Length past `limit` (or unreadable): the ASGI app
        refuses it at once (413), before any of the body is read."""
        for name, value in self.headers:
            if name == b"content-length":
                return value.isdigit() and int(value) <= limit
        return True  # chunked: handed over once past the flow-control mark (on_body)

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if type(cycle) is not _HotCycle:
            super().on_body(body)
            return
        cycle.body += body
        if len(cycle.body) > HIGH_WATER_LIMIT:
            self._to_asgi(cycle)  # whose receive() reads the rest as it comes

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if type(cycle) is not _HotCycle:
            super().on_message_complete()
            return
        cycle.more_body = False
        try:
            if self._answer(cycle):
                return
        except Exception:  # a bug of ours: the ASGI app still answers, and says what it is
            log.exception("the hot route's protocol handling failed; the ASGI app answers")
        self._to_asgi(cycle)

    def _to_asgi(self, hot: _HotCycle) -> None:
        """Hand a hot request to the ASGI app, as uvicorn would have: its scope and cycle
        built by uvicorn's own code, with the body read so far."""
        self.cycle = None  # type: ignore[assignment]  # else uvicorn takes it as pipelined
        self._begin_scope()
        self.scope.update(hot.flags)
        super().on_headers_complete()  # builds the RequestResponseCycle and starts its task
        cycle = self.cycle
        cycle.body, cycle.more_body = hot.body, hot.more_body
        cycle.keep_alive = cycle.keep_alive and hot.keep_alive  # a shutdown meanwhile
        cycle.message_event.set()

    def _answer(self, cycle: _HotCycle) -> bool:
        """Decide from memory and hand the record over; False if the ASGI app must run."""
        fast = self._fast
        assert fast is not None
        headers = dict(self.headers)
        if len(headers) != len(self.headers):
            return False  # a header name sent twice (two keys?): the ASGI app looks closer
        answer = fast.ready(cycle.flags, headers, bytes(cycle.body))
        if answer is None:
            return False
        body, record = answer
        if record is None:  # the decision log is off
            self._finish(cycle, self._ok(cycle, body), None)
            return True
        # False when no writer runs: the ASGI app's write() starts one.
        return fast.submit([record], partial(self._recorded, cycle, body))

    def _recorded(self, cycle: _HotCycle, body: bytes, number: int | None,
                  error: RecordingFailed | None) -> None:
        """The decision log's answer for one request: committed (`number`), or not."""
        try:
            if error is None:
                self._finish(cycle, self._ok(cycle, body), number)
                return
            from app.decisions.audit import not_recorded
            from app.kit import handlers

            exc = not_recorded(error)
            response = handlers.envelope(exc.status, exc.code, exc.message, exc.details,
                                         headers=exc.headers)
            self._finish(cycle, self._head(exc.status, response.raw_headers, cycle)
                         + response.body, None, exc.status)
        except Exception:  # no answer can be given: the client sees the connection end
            log.exception("answering a decision failed; closing its connection")
            self.transport.close()

    def _ok(self, cycle: _HotCycle, body: bytes) -> bytes:
        return b"".join((STATUS_LINE[200], self._defaults(), _OK_HEADERS,
                         str(len(body)).encode(), b"\r\n",
                         b"" if cycle.keep_alive else b"connection: close\r\n", b"\r\n",
                         body))

    def _head(self, status: int, headers: list[tuple[bytes, bytes]], cycle: _HotCycle) -> bytes:
        lines = [STATUS_LINE[status], self._defaults()]
        lines += [b"%s: %s\r\n" % (name, value) for name, value in headers]
        if not cycle.keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def _defaults(self) -> bytes:
        """uvicorn's default header lines (date, server), formatted once per list: uvicorn
        sets a new list when the date changes, once a second."""
        global _default_lines
        headers = self.server_state.default_headers
        cached = _default_lines
        if cached[0] is not headers:
            cached = _default_lines = (
                headers, b"".join(b"%s: %s\r\n" % pair for pair in headers))
        return cached[1]

    def _finish(self, cycle: _HotCycle, data: bytes, ack: int | None,
                status: int = 200) -> None:
        """Write the whole answer, then complete the cycle as uvicorn's send() would.

        Never at once: an answer of a commit's acknowledgement waits for the outbox's flush,
        which the decision log runs right after all the requests that acknowledgement
        released; any other (log off, a 503) for the next loop turn, as an ASGI task's would.
        Until then the response is not complete, so uvicorn queues a pipelined request
        behind it, arms no keep-alive timer, and a shutdown only marks the connection to
        close after it: the answer of a recorded decision is never dropped in between."""
        if cycle.disconnected or self.transport.is_closing():
            return  # the client went away; its decision is recorded all the same
        cycle.response_started = True
        if self.access_log:  # uvicorn's line, as its send() writes it
            self.access_logger.info('%s - "%s %s HTTP/%s" %d',
                                    get_client_addr({"client": self.client}), "POST", PATH,
                                    cycle.http_version, status)
        fast = self._fast
        assert fast is not None
        if not fast.outbox.hold(self.transport, data, ack, partial(self._completed, cycle)):
            self.loop.call_soon(self._write_completed, cycle, data)

    def _write_completed(self, cycle: _HotCycle, data: bytes) -> None:
        if cycle.disconnected or self.transport.is_closing():
            return
        self.transport.write(data)
        self._completed(cycle)

    def _completed(self, cycle: _HotCycle) -> None:
        """The answer is written: close (asked for, or the server is shutting down), or go
        on with the connection's next request or its keep-alive wait."""
        cycle.response_complete = True
        if not cycle.keep_alive:
            self.transport.close()
        self.on_response_complete()
