"""toolgate's HTTP/1.1 protocol: what `toolgate serve` runs (TOOLGATE_HTTP_PROTOCOL=toolgate,
the default), as `uvicorn.run(http=HttpProtocol)`.

A plain `asyncio.Protocol` on httptools' public parser (llhttp): it subclasses nothing of
uvicorn's and imports none of its modules; uvicorn hands it what it hands every protocol
class (its `Config`, the `ServerState` whose connections, tasks and default headers its
graceful shutdown and date header use, the lifespan's state) and runs the socket. Per
connection, one parser and one timer; per request:

- POST /v1/authorize-tool, when the app brings its hot route (`app.fast_path`, found
  through the app object: this folder imports no feature) and nothing else is in flight:
  its body is read here and handed, complete, to the route's `inline` (app/authorize/
  hotpath.py), which runs the pipeline's synchronous step and either answers through the
  `HotRequest` (app/edge/inline.py; when its record commits; no ASGI task, no scope) or
  says what to put in the scope for the ASGI app, which goes on from the step's outcome;
- every other request: an ASGI http cycle of our own (app/edge/cycle.py) in a task, the
  requests of one connection answered in order (a pipelined request waits, its socket
  paused, until the one before it is out).

The HTTP edge's limits (app/edge/limits.py: head size, header and body deadlines, the idle
wait, the connection cap, lingering after an early answer) are enforced here for every
request (app/edge/deadlines.py). llhttp refuses what is not HTTP/1.1 (a request with both
Content-Length and Transfer-Encoding, a bad header name, a bad chunk size): 400 and close.
An Upgrade (websocket, h2c) or CONNECT is answered as a plain request, then the connection
closes: toolgate serves no websocket route.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections import deque
from typing import Any

import httptools

from app.edge.cycle import STATUS_LINE, Cycle, service_unavailable
from app.edge.deadlines import BODY, DISCARD, HEAD, IDLE, LINGER, WAIT, Deadlines, Stop
from app.edge.inline import HotRequest, served
from app.edge.limits import HEAD_CHECKED

log = logging.getLogger("uvicorn.error")

# Past this many body bytes not yet read by the app, the socket is paused (uvicorn's mark).
HIGH_WATER = 65536
_BAD_REQUEST = "Invalid HTTP request received."
_default_lines: tuple[object, bytes] = (None, b"")  # see default_lines


class HttpProtocol(Deadlines, asyncio.Protocol):
    """uvicorn.run(http=...)'s protocol class: `HttpProtocol(config=..., server_state=...,
    app_state=...)`, as uvicorn calls any protocol class."""

    def __init__(self, config: Any, server_state: Any, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        if not config.loaded:
            config.load()
        self.config = config
        self.app = config.loaded_app
        self.loop = _loop or asyncio.get_event_loop()
        self.server_state = server_state
        self.connections = server_state.connections
        self.tasks = server_state.tasks
        self.app_state = app_state
        self.root_path = config.root_path
        self.asgi = {"version": config.asgi_version, "spec_version": "2.3"}
        self.limit_concurrency = config.limit_concurrency
        self.access_log = bool(config.access_log)
        self.keep_alive_wait = config.timeout_keep_alive
        fast, edge = served(self.app)
        self.fast = fast if not self.root_path else None
        self.edge = edge
        self.hot_path = fast.path if fast is not None else None
        self.parser = httptools.HttpRequestParser(self)
        # Data after a request that asked to close is not an error (uvicorn sets it too):
        # that request is answered, then the connection closes.
        self.parser.set_dangerous_leniencies(lenient_data_after_close=True)
        self.transport: Any = None
        self.server: tuple[str, int] | None = None
        self.client: tuple[str, int] | None = None
        self.scheme = "http"
        self.read_paused = self.write_paused = False
        self._writable: asyncio.Event | None = None
        self.pipeline: deque[tuple[Cycle, Any]] = deque()
        self.cycle: Any = None  # the request being read (or the last one read)
        self.active: Any = None  # the request being answered
        self.reading: Any = None  # the request whose body is being read
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.expect_100 = False
        self.init_deadlines()

    # --- the connection ------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:  # type: ignore[override]
        if len(self.connections) >= self.edge.max_connections and not self.evict():
            self.refuse_connection(transport)
            return
        self.connections.add(self)
        self.transport = transport
        self.server = _address(transport.get_extra_info("sockname"))
        self.client = _address(transport.get_extra_info("peername"))
        if transport.get_extra_info("sslcontext"):
            self.scheme = "https"
        self.start_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self.connections.discard(self)
        if self.lost_refused():
            return
        self.stop_timer()
        for cycle in {self.cycle, self.active, *(c for c, _ in self.pipeline)}:
            if cycle is None:
                continue
            if not cycle.response_complete:
                cycle.disconnected = True
            if type(cycle) is Cycle:
                cycle.event.set()
        self.resume_writing()
        if exc is None and self.transport is not None:
            self.transport.close()

    def eof_received(self) -> None:
        pass  # asyncio closes the transport

    def pause_writing(self) -> None:
        if not self.write_paused:
            self.write_paused = True
            self._writable = asyncio.Event()

    def resume_writing(self) -> None:
        if self.write_paused:
            self.write_paused = False
            assert self._writable is not None
            self._writable.set()

    async def drain(self) -> None:
        if self._writable is not None:
            await self._writable.wait()

    def pause_reading(self) -> None:
        if not self.read_paused:
            self.read_paused = True
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.read_paused:
            self.read_paused = False
            self.transport.resume_reading()

    def shutdown(self) -> None:
        """uvicorn's graceful shutdown: close now if nothing is being answered, else once
        the answer in flight (and those queued behind it) are out."""
        cycle = self.cycle
        if self.transport is None:
            return
        if cycle is None or cycle.response_complete:
            self.transport.close()
        else:
            cycle.keep_alive = False

    def data_received(self, data: bytes) -> None:
        if self._phase >= DISCARD:  # on its way out: read and dropped
            self.dropped(len(data))
            return
        self._chunk = len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as exc:
            if type(exc.__context__) is not Stop:
                self._bad_request()
            return
        except httptools.HttpParserError:
            self._bad_request()
            return
        except httptools.HttpParserUpgrade:
            self._upgraded()
            return
        if self._phase == HEAD:  # a head still incomplete: what the parser holds of it
            self._head_raw += len(data)
            if self._head_raw > self.edge.max_header_bytes:
                self.refuse_head(too_many=False)

    def _bad_request(self) -> None:
        """What llhttp refused: 400 and close, as uvicorn answers it. A request whose body
        broke off is over (its app hears the client went); an answer in flight before it
        goes out first, then the connection closes without the 400."""
        log.warning(_BAD_REQUEST)
        cycle, active = self.reading, self.active
        if self._phase == BODY and cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            if type(cycle) is Cycle:
                cycle.event.set()
            self.pipeline = deque(item for item in self.pipeline if item[0] is not cycle)
            if cycle.response_started:
                self.transport.close()
                return
            if active is not None and active is not cycle and not active.response_complete:
                active.keep_alive = False
                self.discard()
                return
        elif self.in_flight():
            self.cycle.keep_alive = False
            self.discard()
            return
        self.transport.write(b"".join((
            STATUS_LINE[400], self.default_lines(),
            b"content-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n" % len(_BAD_REQUEST), _BAD_REQUEST.encode())))
        self.linger()

    def _upgraded(self) -> None:
        """An Upgrade or CONNECT request: what follows its head is not HTTP/1.1 (nor
        parsed). Its answer is the ASGI app's (toolgate has no websocket route), then
        the connection closes."""
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.keep_alive = False
            if cycle.more_body:  # the body, if any, ends here
                cycle.more_body = False
                cycle.event.set()
        self.discard()

    # --- the parser's callbacks ---------------------------------------------------------

    def on_message_begin(self) -> None:
        self.url = b""
        self.expect_100 = False
        self.headers = []
        self.began_head()

    def on_url(self, url: bytes) -> None:
        self.url += url
        self._head_bytes += len(url)
        if self._head_bytes > self.edge.max_header_bytes:
            self.refuse_head(too_many=False)
            raise Stop

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"expect" and value.lower() == b"100-continue":
            self.expect_100 = True
        headers = self.headers
        headers.append((name, value))
        self._head_bytes += len(name) + len(value)
        edge = self.edge
        if self._head_bytes > edge.max_header_bytes or len(headers) > edge.max_headers:
            self.refuse_head(too_many=len(headers) > edge.max_headers)
            raise Stop

    def on_headers_complete(self) -> None:
        self.began_body()
        parser = self.parser
        version = parser.get_http_version()
        upgrade = parser.should_upgrade()
        keep_alive = version != "1.0" and parser.should_keep_alive() and not upgrade
        fast = self.fast
        previous = self.cycle
        idle = previous is None or previous.response_complete
        if (fast is not None and self.url == self.hot_path and idle and not upgrade
                and not self.expect_100 and not self.write_paused
                and self.limit_concurrency is None and parser.get_method() == b"POST"
                and fast.pipeline is not None and self._length_within(fast.limit)):
            self.cycle = self.active = self.reading = HotRequest(self, keep_alive, version)
            return
        self._to_asgi(parser.get_method().decode("ascii"), version, keep_alive, idle)

    def _length_within(self, limit: int) -> bool:
        """False for a declared Content-Length past `limit`: the ASGI app refuses it at
        once (413), before any of the body is read."""
        for name, value in self.headers:
            if name == b"content-length":
                return value.isdigit() and int(value) <= limit
        return True  # chunked: handed over once past the flow-control mark (on_body)

    def _to_asgi(self, method: str, version: str, keep_alive: bool, idle: bool,
                 extra: dict[str, Any] | None = None) -> Cycle:
        parsed = httptools.parse_url(self.url)
        raw_path = parsed.path
        path = raw_path.decode("ascii")
        if "%" in path:
            path = urllib.parse.unquote(path)
        scope = {"type": "http", "asgi": self.asgi, "http_version": version,
                 "server": self.server, "client": self.client, "scheme": self.scheme,
                 "method": method, "root_path": self.root_path,
                 "path": self.root_path + path,
                 "raw_path": self.root_path.encode("ascii") + raw_path,
                 "query_string": parsed.query or b"", "headers": self.headers,
                 "state": self.app_state.copy(),
                 # counted against the edge's limits as it arrived: the app need not again
                 HEAD_CHECKED: True}
        if extra:
            scope.update(extra)
        cycle = self.cycle = self.reading = Cycle(self, scope, keep_alive, self.expect_100)
        app = self.app
        if self.limit_concurrency is not None and (
                len(self.connections) >= self.limit_concurrency
                or len(self.tasks) >= self.limit_concurrency):
            log.warning("Exceeded concurrency limit.")
            app = service_unavailable
        if idle:
            self._start(cycle, app)
        else:  # pipelined: answered after the one in flight
            self.pause_reading()
            self.pipeline.appendleft((cycle, app))
        return cycle

    def _start(self, cycle: Cycle, app: Any) -> None:
        self.active = cycle
        task = self.loop.create_task(cycle.run(app))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)

    def on_body(self, body: bytes) -> None:
        cycle = self.cycle
        if cycle.response_complete:  # answered already (a 413): the rest is dropped
            if not self.drained(len(body)):
                raise Stop
            return
        cycle.body += body
        if type(cycle) is HotRequest:
            if len(cycle.body) > HIGH_WATER:
                self._hand_over(cycle, None)  # whose receive() reads the rest as it comes
            return
        if len(cycle.body) > HIGH_WATER:
            self.pause_reading()
        cycle.event.set()

    def on_message_complete(self) -> None:
        cycle = self.cycle
        self.reading = None
        if cycle.response_complete:  # the rest of an answered request's body was read
            self.went_idle()
            return
        self._phase = WAIT
        cycle.more_body = False
        if type(cycle) is not HotRequest:
            cycle.event.set()
            return
        try:
            extra = self.fast.inline(cycle, self.headers, bytes(cycle.body))
        except Exception:  # a bug of ours: the ASGI app still answers, and says what it is
            log.exception("the hot route's protocol handling failed; the ASGI app answers")
            extra = {}
        if extra is not None:
            self._hand_over(cycle, extra)

    def _hand_over(self, hot: HotRequest, extra: dict[str, Any] | None) -> None:
        """Hand a hot request to the ASGI app with the body read so far (and, from the
        hot route, the step's outcome in the scope)."""
        cycle = self._to_asgi("POST", hot.version, hot.keep_alive, True, extra)
        cycle.body, cycle.more_body = hot.body, hot.more_body
        cycle.event.set()

    # --- answers --------------------------------------------------------------------------

    def default_lines(self) -> bytes:
        """The server's default header lines (date, server), formatted once per list:
        uvicorn sets a new list when the date changes, once a second."""
        global _default_lines
        headers = self.server_state.default_headers
        cached = _default_lines
        if cached[0] is not headers:
            cached = _default_lines = (
                headers, b"".join(b"%s: %s\r\n" % pair for pair in headers))
        return cached[1]

    def response_done(self, cycle: Any) -> None:
        """An answer is out: close (asked for, or the server is shutting down), or go on
        with the next request queued, or wait for one (the connection timer's idle wait)."""
        if not cycle.keep_alive:
            self.close_after_answer()
        self.server_state.total_requests += 1
        if self.transport.is_closing() or self._phase >= DISCARD:
            return
        self.resume_reading()
        if self.pipeline:
            queued, app = self.pipeline.pop()
            self._start(queued, app)
            return
        phase = self._phase
        if phase == WAIT:
            self.went_idle()
        elif phase == BODY and self.cycle.response_complete:
            self.answered_early()


def _address(info: Any) -> tuple[str, int] | None:
    if isinstance(info, (list, tuple)) and len(info) >= 2:
        return str(info[0]), int(info[1])
    return None


__all__ = ["BODY", "DISCARD", "HEAD", "IDLE", "LINGER", "WAIT", "HotRequest",
           "HttpProtocol", "served"]
