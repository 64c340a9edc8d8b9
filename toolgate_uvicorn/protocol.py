"""uvicorn's httptools protocol, with the hot route answered without an ASGI task.

`toolgate serve` runs uvicorn with this protocol (`http=ToolgateHttpToolsProtocol`). For
every request but one kind it is uvicorn's own `HttpToolsProtocol`, unchanged. For
POST /v1/authorize-tool, a request whose answer memory can give (a known key, a cached
plan, a fresh registry) is decided when its body is complete, by the pipeline's
synchronous step (app/authorize/pipeline.py); its record is handed to the decision log
with a callback, and the answer written to the connection when the commit is
acknowledged. Per request that skips the ASGI task and its coroutine, the receive/send
messages, uvicorn's per-message header checks and the await on the commit
(docs/performance.md has the figures).

Everything else stays uvicorn's: it parses every request, and whatever is not answered
here gets the scope, RequestResponseCycle and ASGI task uvicorn's own code builds. A hot
request's cycle is a `_HotCycle`, which holds the state uvicorn's keep-alive, pipelining,
shutdown and connection-lost handling read and set; its scope is never built. What the
step does not answer (it needs I/O: an unknown key or plan; or it refused the request)
goes, with the step's outcome in the scope, to the ASGI app (app/authorize/hotpath.py),
which finishes it and renders errors with the one envelope; so does a body past the
flow-control mark, a client that expects 100-continue, a pipelined request or a
connection whose writes are paused, where the ASGI app runs the whole pipeline. So the
answer, headers included, is the same either way (tests/toolgate_uvicorn/
test_protocol.py; the decision cases and bad inputs run through this protocol too).

It also holds the HTTP edge's limits (app/edge/limits.py, the app's `edge`), for every
request: a head past its size (431) or not complete within its deadline, a body not
complete within its deadline (408), a connection idle too long (also a new one that sends
nothing), a connection past the worker's cap (the one waiting longest on its client is
closed, else the new one gets 503). Each connection has one timer, which looks at what
the connection is doing when it fires (`_phase` and since when: a few attribute writes
per request, no timer per request; it replaces uvicorn's keep-alive timer, one per
request). When a request was answered before its body was read (a 413), the rest of the
body is read and dropped, within bounds, and a connection closed with data still coming
is closed the lingering way (our side shut for writing, what arrives dropped until the
client closes or a bound is reached): closing at once would make the kernel reset the
connection, and a client still sending would never read its answer.

Why one module of ~650 lines: it is one subclass of uvicorn's protocol whose overrides
(data_received, on_headers_complete, on_message_complete, timers, connection_lost) share
per-connection state; the limits' policy (sizes, deadlines, the cap's choice of whom to
close) is kept outside it, in app/edge/limits.py, and tested there and here.
"""

from __future__ import annotations

import heapq
import logging
import os
import re
import time
from functools import partial
from itertools import count
from time import perf_counter
from typing import TYPE_CHECKING, Any

import httptools
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.utils import get_client_addr

if TYPE_CHECKING:
    from app.authorize.hotpath import FastAuthorize
    from app.log.decision_log import RecordingFailed

log = logging.getLogger("toolgate")

# app.authorize.hotpath.PATH (tests check it). Nothing of toolgate is imported here until a
# ToolgateApp is served: any other app (the benchmark's bare one) runs on this protocol
# with uvicorn's own imports only.
PATH = "/v1/authorize-tool"
_PATH = PATH.encode()
# app.authorize.pipeline.OUTCOME (tests check it): where a hot request's outcome is handed
# to the ASGI app; and the pipeline's Answer type, set once a ToolgateApp is served.
_OUTCOME = "toolgate.authorize_outcome"
_Answer: Any = None
_OK_HEADERS = b"content-type: application/json\r\ncontent-length: "
_default_lines: tuple[object, bytes] = (None, b"")  # see _defaults

# What a connection is doing, for its timer and the connection cap: waiting for a request
# (IDLE), receiving a request's head (HEAD) or body (BODY), waiting for the app's answer
# (WAIT: no deadline of ours), or on its way out: dropping what arrives until the
# answer in flight is out (DISCARD), lingering after its answer (LINGER), refused at the
# cap (REFUSED). From DISCARD on, what arrives is dropped unparsed.
IDLE, HEAD, BODY, WAIT, DISCARD, LINGER, REFUSED = range(7)


class _EdgeDefaults:
    """The edge's limits for an app that brings none (not a ToolgateApp): the defaults of
    app.edge.limits.EdgeLimits, which a test keeps equal."""

    max_header_bytes = 16 * 1024
    max_headers = 100
    header_timeout = 10.0
    body_timeout = 30.0
    keep_alive = 5.0
    max_connections = 2048
    drain_bytes = 4 * 1024 * 1024
    drain_seconds = 5.0
    lingering_refusals = max(8, max_connections // 16)


class _Stop(Exception):
    """Raised in a parser callback to stop parsing: the connection is being closed."""


# X-Request-ID: the client's when it matches app.kit.caller.VALID_REQUEST_ID (the same
# pattern: 1 to 128 of [A-Za-z0-9._:-]), else generated like app.edge.logs.new_request_id: a
# random prefix of this module's own and a counter (unique without a draw per request).
_VALID_REQUEST_ID = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_id_prefix = [os.urandom(6).hex(), os.getpid()]
_id_counter = count(1)


def _request_id_of(value: bytes | None) -> bytes:
    global _id_counter
    if value and _VALID_REQUEST_ID.fullmatch(value):
        return value
    if _id_prefix[1] != os.getpid():  # a forked worker: its own prefix
        _id_prefix[:] = [os.urandom(6).hex(), os.getpid()]
        _id_counter = count(1)
    return b"%s-%x" % (_id_prefix[0].encode(), next(_id_counter))


_refusals = [0]  # refused connections of this process still waiting to close
_rendered: dict[tuple, bytes] = {}  # see _error
_warned = [0.0]  # when the last warning about the connection cap was logged


def _served(app: Any) -> tuple[FastAuthorize | None, Any]:
    """The FastAuthorize and the edge limits of the ToolgateApp that `app` is or wraps
    (uvicorn may wrap the loaded app in its own middleware); (None, defaults) for any
    other app."""
    for _ in range(8):
        edge = getattr(app, "edge", None)
        if edge is not None and hasattr(edge, "max_connections"):
            fast = getattr(app, "fast_path", None)
            if fast is None or not hasattr(fast, "pipeline"):
                return None, edge
            global _Answer
            from app.authorize.pipeline import Answer

            _Answer = Answer
            return fast, edge
        app = getattr(app, "app", None)
        if app is None:
            break
    return None, _EdgeDefaults


class _Closer:
    """The transport as an ASGI request's cycle sees it: uvicorn's cycle closes the
    connection after an answer when the client asked it to, and that close must linger
    when the request's body (or a next request) is still coming. Writes go straight to
    the transport."""

    __slots__ = ("_protocol", "_transport", "write", "get_extra_info")

    def __init__(self, protocol: ToolgateHttpToolsProtocol, transport: Any) -> None:
        self._protocol = protocol
        self._transport = transport
        self.write = transport.write
        self.get_extra_info = transport.get_extra_info

    def close(self) -> None:
        self._protocol._close_after_answer()

    def is_closing(self) -> bool:
        return self._protocol._phase >= LINGER or self._transport.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


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
                 "response_complete", "http_version", "flags", "request_id", "decision_id")
    message_event = _NoEvent()

    def __init__(self, keep_alive: bool, http_version: str) -> None:
        self.body = bytearray()
        self.more_body = True
        self.keep_alive = keep_alive
        self.disconnected = self.response_started = self.response_complete = False
        self.http_version = http_version
        self.flags: dict[str, Any] = {}  # what the pipeline found, for the ASGI app
        self.request_id = b""  # X-Request-ID as answered (the client's, or generated)
        self.decision_id: str | None = None  # for the access line


class ToolgateHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        fast, edge = _served(self.app)
        self._fast = fast if not self.root_path else None
        self._edge = edge
        # The timer looks again at least this often (see _on_timer).
        self._tick = max(0.05, min(t for t in (self.timeout_keep_alive, edge.header_timeout,
                                               edge.body_timeout, edge.drain_seconds or 60.0)
                                   if t > 0))
        self._phase, self._since = IDLE, 0.0
        self._timer: Any = None
        self._chunk = 0  # the size of the data being parsed
        self._head_bytes = self._head_raw = 0
        self._drain_left = edge.drain_bytes
        self._closer: _Closer | None = None
        self._started = 0.0  # perf_counter() at a hot request's head (access log on)

    # --- the connection ------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        edge = self._edge
        if len(self.connections) >= edge.max_connections and not self._evict():
            self._refuse_connection(transport)
            return
        super().connection_made(transport)
        self._closer = _Closer(self, transport)
        self._phase, self._since = IDLE, self.loop.time()
        self._timer = self.loop.call_at(self._since + self.timeout_keep_alive, self._on_timer)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._phase == REFUSED:
            _refusals[0] -= 1
            self._phase = DISCARD  # counted once
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._phase >= DISCARD:  # on its way out: read and dropped
            self._drain_left -= len(data)
            if self._drain_left < 0:
                self.transport.close()
            return
        self._chunk = len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if type(exc.__context__) is not _Stop:
                self._bad_request()
            return
        except httptools.HttpParserError:
            self._bad_request()
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._phase == HEAD:  # a head still incomplete: what the parser holds of it
            self._head_raw += len(data)
            if self._head_raw > self._edge.max_header_bytes:
                self._refuse_head(too_many=False)

    def handle_websocket_upgrade(self) -> None:
        if self._timer is not None:  # the connection is the websocket protocol's now
            self._timer.cancel()
            self._timer = None
        self._phase = WAIT
        super().handle_websocket_upgrade()

    def _bad_request(self) -> None:
        msg = "Invalid HTTP request received."  # as uvicorn's own data_received
        self.logger.warning(msg)
        self.send_400_response(msg)

    # uvicorn builds the request's ASGI scope when its message begins; here it is built only
    # for a request that needs it (all but the hot route's), with uvicorn's own code.
    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100_continue = False
        self.headers = []
        self.scope = None  # type: ignore[assignment]
        self._phase, self._since = HEAD, self.loop.time()
        self._head_bytes = 0
        self._head_raw = -self._chunk  # this chunk is counted by the callbacks

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._head_bytes += len(url)
        if self._head_bytes > self._edge.max_header_bytes:
            self._refuse_head(too_many=False)
            raise _Stop

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100_continue = True
        headers = self.headers
        headers.append((name, value))
        self._head_bytes += len(name) + len(value)
        edge = self._edge
        if self._head_bytes > edge.max_header_bytes or len(headers) > edge.max_headers:
            self._refuse_head(too_many=len(headers) > edge.max_headers)
            raise _Stop

    def _begin_scope(self) -> None:
        url, headers, expect = self.url, self.headers, self.expect_100_continue
        super().on_message_begin()  # a new scope, and url, headers, expect reset
        self.url, self.headers, self.expect_100_continue = url, headers, expect
        self.scope["headers"] = headers
        # This head was counted against the edge's limits as it arrived (on_header): the
        # app need not count it again (app/edge/limits.py HEAD_CHECKED).
        self.scope["toolgate.head_checked"] = True

    def on_headers_complete(self) -> None:
        self._phase, self._since = BODY, self.loop.time()
        fast = self._fast
        parser = self.parser
        if (fast is not None and fast.pipeline is not None and self.url == _PATH
                and not self.expect_100_continue and self.limit_concurrency is None
                and (self.cycle is None or self.cycle.response_complete)
                and not self.flow.write_paused and parser.get_method() == b"POST"
                and not parser.should_upgrade() and self._length_within(fast.limit)):
            version = parser.get_http_version()
            self.cycle = _HotCycle(version != "1.0" and parser.should_keep_alive(), version)
            if fast.access_log:
                self._started = perf_counter()
            return
        self._begin_scope()
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:  # (none for an upgrade)
            cycle.transport = self._closer  # type: ignore[assignment]

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
            if cycle is not None and cycle.response_complete:  # answered already (a 413):
                # the rest is dropped, within bounds
                self._drain_left -= len(body)
                if self._drain_left < 0:
                    self._linger()
                    raise _Stop
                return
            super().on_body(body)
            return
        cycle.body += body
        if len(cycle.body) > HIGH_WATER_LIMIT:
            self._to_asgi(cycle)  # whose receive() reads the rest as it comes

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if type(cycle) is not _HotCycle:
            if cycle is not None and cycle.response_complete:  # the rest of an answered
                self._phase, self._since = IDLE, self.loop.time()  # request's body was read
            else:
                self._phase = WAIT
            super().on_message_complete()
            return
        self._phase = WAIT
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
        cycle.transport = self._closer  # type: ignore[assignment]
        cycle.body, cycle.more_body = hot.body, hot.more_body
        cycle.keep_alive = cycle.keep_alive and hot.keep_alive  # a shutdown meanwhile
        cycle.message_event.set()

    def _answer(self, cycle: _HotCycle) -> bool:
        """Run the pipeline's synchronous step and hand the record over; False if the ASGI
        app must go on (with what the step found, in the scope: app/authorize/pipeline.py
        OUTCOME), which renders any error and finishes any I/O."""
        fast = self._fast
        assert fast is not None
        headers = dict(self.headers)
        if len(headers) != len(self.headers):
            return False  # a header name sent twice (two keys?): the ASGI app looks closer
        pipeline = fast.pipeline
        try:
            pipeline.head(self.headers, headers)
            outcome = pipeline.step(headers, bytes(cycle.body))
        except Exception as exc:  # the ASGI app renders it
            cycle.flags[_OUTCOME] = exc
            return False
        if type(outcome) is not _Answer:
            cycle.flags[_OUTCOME] = outcome
            return False
        cycle.request_id = _request_id_of(headers.get(b"x-request-id"))
        cycle.decision_id = outcome.record["decision_id"]
        if fast.write is None:  # the decision log is off
            self._finish(cycle, self._ok(cycle, outcome.body), None)
            return True
        # False when no writer runs: the ASGI app's write() starts one, for this answer.
        cycle.flags[_OUTCOME] = outcome
        return fast.submit([outcome.record], partial(self._recorded, cycle, outcome.body))

    def _recorded(self, cycle: _HotCycle, body: bytes, number: int | None,
                  error: RecordingFailed | None) -> None:
        """The decision log's answer for one request: committed (`number`), or not."""
        try:
            if error is None:
                self._finish(cycle, self._ok(cycle, body), number)
                return
            from app.edge import handlers
            from app.log.audit import not_recorded

            exc = not_recorded(error)
            response = handlers.envelope(exc.status, exc.code, exc.message, exc.details,
                                         headers=exc.headers)
            self._finish(cycle, self._head(exc.status, response.raw_headers, cycle)
                         + response.body, None, exc.status)
        except Exception:  # no answer can be given: the client sees the connection end
            log.exception("answering a decision failed; closing its connection")
            self.transport.close()

    def _ok(self, cycle: _HotCycle, body: bytes) -> bytes:
        return b"".join((STATUS_LINE[200], self._defaults(), b"x-request-id: ",
                         cycle.request_id, b"\r\n", _OK_HEADERS,
                         str(len(body)).encode(), b"\r\n",
                         b"" if cycle.keep_alive else b"connection: close\r\n", b"\r\n",
                         body))

    def _head(self, status: int, headers: list[tuple[bytes, bytes]], cycle: _HotCycle) -> bytes:
        lines = [STATUS_LINE[status], self._defaults(), b"x-request-id: %s\r\n"
                 % cycle.request_id]
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
        fast = self._fast
        assert fast is not None
        tally = fast.tally
        if tally is not None:  # the metrics: one integer (app/kit/metrics.py Tally)
            if status == 200:
                tally.hot_ok += 1
            else:
                tally.request(PATH, status)
        if fast.access_log:
            fast.log_answer(cycle.request_id, status, cycle.decision_id,
                            started=self._started, code=None if status == 200 else
                            "decision_not_recorded",
                            client=get_client_addr({"client": self.client}))
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
            self._close_after_answer()
        self.on_response_complete()

    # --- the edge: deadlines, the connection cap, draining -----------------------------

    def on_response_complete(self) -> None:
        """uvicorn's, except that the keep-alive wait is the connection timer's (no timer
        per request), and that an answer given before its request's body was read (a
        413) leaves the rest of that body to be read and dropped, within bounds."""
        self.server_state.total_requests += 1
        if self.transport.is_closing() or self._phase >= DISCARD:
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
            return
        phase = self._phase
        if phase == WAIT:
            self._phase, self._since = IDLE, self.loop.time()
        elif phase == BODY and self.cycle.response_complete:
            self._drain_left = self._edge.drain_bytes  # and the body deadline still runs

    def _close_after_answer(self) -> None:
        """Close once an answer is out: at once, or, when the request's body or another
        request is still coming, lingering."""
        if self._phase in (HEAD, BODY, DISCARD):
            self._linger()
        elif not self.transport.is_closing():
            self.transport.close()

    def _linger(self) -> None:
        """Shut our side for writing (after what is queued: the answer) and drop whatever
        arrives, until the client closes, drain_max_bytes have arrived or drain_seconds
        have passed: a close with unread data would reset the connection, and a client
        still sending would lose the answer."""
        transport = self.transport
        if self._phase >= LINGER or transport.is_closing():
            return
        self._phase, self._since = LINGER, self.loop.time()
        self._drain_left = self._edge.drain_bytes
        if self.flow is not None:
            self.flow.resume_reading()
        if not transport.can_write_eof() or self._edge.drain_seconds <= 0:
            transport.close()
            return
        transport.write_eof()
        self._rearm(self._since + self._edge.drain_seconds)

    def _rearm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self.loop.call_at(when, self._on_timer)

    def _on_timer(self) -> None:
        """The connection's one timer: acts on an overdue phase, or looks again when the
        current phase's deadline (or the next tick) comes."""
        self._timer = None
        if self.transport.is_closing():
            return
        now = self.loop.time()
        phase, edge = self._phase, self._edge
        if phase == IDLE:
            due: float | None = self._since + self.timeout_keep_alive
        elif phase == HEAD:
            due = self._since + edge.header_timeout
        elif phase == BODY:
            # Not while reading is paused: then it is us, not the client, who is slow.
            due = None if self.flow.read_paused else self._since + edge.body_timeout
        elif phase == DISCARD:
            due = None if self._in_flight() else self._since + edge.drain_seconds
        elif phase == WAIT:
            due = None
        else:
            due = self._since + (edge.drain_seconds if phase == LINGER
                                 else min(1.0, edge.drain_seconds))
        if due is not None and now >= due:
            self._expire(phase)
            return
        self._timer = self.loop.call_at(
            now + self._tick if due is None else min(due, now + self._tick), self._on_timer)

    def _in_flight(self) -> bool:
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete

    def _expire(self, phase: int) -> None:
        edge = self._edge
        if phase == HEAD:
            self._shed(408, "request_timeout", "the request's headers did not arrive within "
                       f"{edge.header_timeout:g} s")
        elif phase == BODY:
            self._shed(408, "request_timeout", "the request's body did not arrive within "
                       f"{edge.body_timeout:g} s")
        else:  # idle past the keep-alive wait, or done lingering
            self.transport.close()

    def _shed(self, status: int, code: str, message: str, **headers: str) -> None:
        """Close a connection whose client is still sending a request (too slowly, or the
        connection cap needs its place), answering `status` unless an answer is already
        on its way, which is let out first."""
        cycle = self.cycle
        if self._phase == HEAD and self._in_flight():  # a request pipelined behind one
            cycle.keep_alive = False  # whose answer goes out first, then the connection closes
            self._phase, self._since = DISCARD, self.loop.time()
            return
        if cycle is not None and self._phase == BODY:
            started = cycle.response_started
            cycle.disconnected = True  # the app's receive() ends; nothing more is written
            cycle.message_event.set()
            if started:
                self.transport.close()
                return
        self.transport.write(self._error(status, code, message, headers))
        self.transport.close()

    def _refuse_head(self, *, too_many: bool) -> None:
        """431 for a head past the limits, then the connection closes (lingering: the
        client may still be sending it)."""
        from app.edge import limits

        exc = limits.too_many_headers(self._edge) if too_many else \
            limits.head_too_large(self._edge)
        if self._in_flight():  # the answer before it goes out first, then the close
            self.cycle.keep_alive = False
            self._phase, self._since = DISCARD, self.loop.time()
            return
        self.transport.write(self._error(exc.status, exc.code, exc.message, None,
                                         exc.details))
        self._linger()

    def _evict(self) -> bool:
        """At the cap: close the connections that have waited longest on their clients, a
        few at a time; False when none is waiting on its client (every one waits for an
        answer of ours) and the new one must be refused. First those only waiting to
        close, then those still sending a request (oldest first: a slow client's), then
        those idle after an answer, and new ones that have sent nothing yet last (a client
        that just connected has had no chance to send its request)."""
        candidates = []
        for other in self.connections:
            phase = getattr(other, "_phase", WAIT)
            if phase == WAIT or phase == DISCARD or other.transport.is_closing():
                continue
            if phase == BODY and other.flow.read_paused:
                continue  # waiting on us, not on its client
            if phase == HEAD and other._in_flight():
                continue
            rank = (0 if phase == LINGER else 1 if phase != IDLE
                    else 2 if other.cycle is not None else 3)  # (no cycle: nothing sent yet)
            candidates.append((rank, other._since, id(other), other))
        if not candidates:
            return False
        batch = max(1, self._edge.max_connections // 64)
        for _, _, _, other in heapq.nsmallest(batch, candidates):
            self.connections.discard(other)  # its place is free now
            other._evicted()
        return True

    def _evicted(self) -> None:
        if self._phase in (HEAD, BODY):
            self._shed(503, "unavailable", "the server is at its connection limit and this "
                       "connection waited longest for its client; retry", **{"Retry-After": "1"})
        else:
            self.transport.close()

    def _refuse_connection(self, transport: Any) -> None:
        """Past the cap with no connection to close: 503 at once, before the request is
        read; our side is then shut and what arrives dropped for up to a second (so the
        client reads the 503, not a reset), unless too many refusals wait already."""
        self.transport = transport
        edge = self._edge
        now = time.monotonic()
        if now - _warned[0] > 10:
            _warned[0] = now
            self.logger.warning("connection limit (%d per worker) reached: refusing new "
                                "connections with 503 (TOOLGATE_MAX_CONNECTIONS)",
                                edge.max_connections)
        transport.write(self._error(503, "unavailable", "the server is at its connection "
                                    f"limit ({edge.max_connections}); retry", {
                                        "Retry-After": "1"}))
        if _refusals[0] >= edge.lingering_refusals or not transport.can_write_eof():
            transport.close()
            return
        _refusals[0] += 1
        self._phase, self._since = REFUSED, self.loop.time()
        self._drain_left = min(edge.drain_bytes, HIGH_WATER_LIMIT)
        transport.write_eof()
        self._timer = self.loop.call_at(self._since + min(1.0, edge.drain_seconds),
                                        self._on_timer)

    def _error(self, status: int, code: str, message: str, headers: dict[str, str] | None,
               details: dict[str, Any] | None = None) -> bytes:
        """An answer in the one envelope, with `connection: close`. Rendered once per
        kind (a refusal at the cap may be answered many times a second): only uvicorn's
        default lines (the date) are added each time."""
        key = (status, code, message, tuple((headers or {}).items()),
               tuple((details or {}).items()))
        rendered = _rendered.get(key)
        if rendered is None:
            from app.edge.handlers import envelope

            response = envelope(status, code, message, details, headers=headers or None)
            rendered = b"".join([b"%s: %s\r\n" % pair for pair in response.raw_headers]
                                + [b"connection: close\r\n\r\n", response.body])
            if len(_rendered) >= 64:
                _rendered.clear()
            _rendered[key] = rendered
        return b"".join((STATUS_LINE[status], self._defaults(), b"x-request-id: ",
                         _request_id_of(self._sent_request_id()), b"\r\n", rendered))

    def _sent_request_id(self) -> bytes | None:
        """The X-Request-ID of the request being read, if its head has come that far."""
        for name, value in getattr(self, "headers", None) or ():
            if name == b"x-request-id":
                return value
        return None
