"""uvicorn's httptools protocol, with the hot route answered without an ASGI task.

`toolgate serve` runs uvicorn with this protocol (`http=ToolgateHttpToolsProtocol`). For
every request but one kind it is uvicorn's own `HttpToolsProtocol`, unchanged. For
POST /v1/authorize-tool, a request whose answer memory can give (a known key, a cached
plan, a fresh registry: `FastAuthorize.ready`) is decided when its body is complete, its
record handed to the decision log with a callback, and the answer written to the
connection when the commit is acknowledged. Per request that skips the ASGI task and
its coroutine, the receive/send messages, uvicorn's per-message header checks and the
await on the commit (docs/performance.md has the figures).

Everything else about the request stays uvicorn's: it parses the request and builds the
same scope and RequestResponseCycle, whose state (`response_complete`, `keep_alive`,
`disconnected`) its keep-alive, pipelining, shutdown and connection-lost handling read as
always. Only the start of the ASGI task is held back until the body is complete; then,
for anything `ready` does not answer (an unknown key or plan, any refusal, a body over
the flow-control mark, a client that expects 100-continue, a pipelined request, a
connection whose writes are paused), the task starts as uvicorn would
have started it and the ASGI app (app/api/fastpath.py) runs every step, rendering
errors with the one envelope. So the answer, headers included, is the same either way.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.protocols.utils import get_client_addr

if TYPE_CHECKING:
    from app.api.fastpath import FastAuthorize
    from app.decisions.log import RecordingFailed

log = logging.getLogger("toolgate")

# app.api.fastpath.PATH (tests check it). Nothing of toolgate is imported here until a
# ToolgateApp is served: any other app (the benchmark's bare one) runs on this protocol
# with uvicorn's own imports only.
PATH = "/v1/authorize-tool"
_PATH = PATH.encode()
_OK_HEADERS = b"content-type: application/json\r\ncontent-length: "


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


class ToolgateHttpToolsProtocol(HttpToolsProtocol):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._fast = _fast_path(self.app) if not self.root_path else None
        self._holding = False  # set while uvicorn handles the headers of an eligible request
        self._held: tuple[Any, Any] | None = None  # (cycle, app) whose task waits for its body

    def on_headers_complete(self) -> None:
        fast = self._fast
        self._holding = (
            fast is not None and fast.state is not None and self.url == _PATH
            and not self.expect_100_continue
            and (self.cycle is None or self.cycle.response_complete)
            and not self.flow.write_paused and self.parser.get_method() == b"POST"
        )
        try:
            super().on_headers_complete()
        finally:
            self._holding = False

    def _start_asgi_task(self, cycle: Any, app: Any) -> None:
        if self._holding and app is self.app:
            self._held = (cycle, app)  # started, or answered, once the body is complete
            return
        super()._start_asgi_task(cycle, app)

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        held = self._held
        if held is not None and len(held[0].body) > HIGH_WATER_LIMIT:
            # uvicorn paused reading: only the ASGI app's receive() resumes it.
            self._held = None
            super()._start_asgi_task(*held)

    def on_message_complete(self) -> None:
        super().on_message_complete()
        held, self._held = self._held, None
        if held is None:
            return
        cycle, app = held
        if cycle is not self.cycle or cycle.disconnected:
            return
        try:
            if self._answer(cycle):
                return
        except Exception:  # a bug of ours: the ASGI app still answers, and says what it is
            log.exception("the hot route's protocol handling failed; the ASGI app answers")
        super()._start_asgi_task(cycle, app)

    def _answer(self, cycle: Any) -> bool:
        """Decide from memory and hand the record over; False if the ASGI app must run."""
        fast = self._fast
        assert fast is not None
        answer = fast.ready(cycle.scope, dict(cycle.scope["headers"]), bytes(cycle.body))
        if answer is None:
            return False
        body, record = answer
        if record is None:  # the decision log is off
            self._finish(cycle, self._ok(cycle, body), None)
            return True
        # False when no writer runs: the ASGI app's write() starts one.
        return fast.state.decision_log.submit(
            [record], lambda number, error: self._recorded(cycle, body, number, error))

    def _recorded(self, cycle: Any, body: bytes, number: int | None,
                  error: RecordingFailed | None) -> None:
        """The decision log's answer for one request: committed (`number`), or not."""
        try:
            self._answer_recorded(cycle, body, number, error)
        except Exception:  # no answer can be given: the client sees the connection end
            log.exception("answering a decision failed; closing its connection")
            self.transport.close()

    def _answer_recorded(self, cycle: Any, body: bytes, number: int | None,
                         error: RecordingFailed | None) -> None:
        if error is None:
            self._finish(cycle, self._ok(cycle, body), number)
            return
        from app.api import handlers
        from app.decisions.audit import not_recorded

        exc = not_recorded(error)
        response = handlers.envelope(exc.status, exc.code, exc.message, exc.details,
                                     headers=exc.headers)
        self._finish(cycle, self._head(exc.status, response.raw_headers, cycle)
                     + response.body, None, exc.status)

    def _ok(self, cycle: Any, body: bytes) -> bytes:
        return b"".join((STATUS_LINE[200], *self._defaults(), _OK_HEADERS,
                         str(len(body)).encode(), b"\r\n",
                         b"" if cycle.keep_alive else b"connection: close\r\n", b"\r\n",
                         body))

    def _head(self, status: int, headers: list[tuple[bytes, bytes]], cycle: Any) -> bytes:
        lines = [STATUS_LINE[status], *self._defaults()]
        lines += [b"%s: %s\r\n" % (name, value) for name, value in headers]
        if not cycle.keep_alive:
            lines.append(b"connection: close\r\n")
        lines.append(b"\r\n")
        return b"".join(lines)

    def _defaults(self) -> list[bytes]:
        return [b"%s: %s\r\n" % pair for pair in self.server_state.default_headers]

    def _finish(self, cycle: Any, data: bytes, ack: int | None, status: int = 200) -> None:
        """Write the whole answer and complete the cycle as uvicorn's send() would."""
        if cycle.disconnected or self.transport.is_closing():
            return  # the client went away; its decision is recorded all the same
        cycle.response_started = cycle.response_complete = True
        if self.access_log:  # uvicorn's line, as its send() writes it
            self.access_logger.info('%s - "%s %s HTTP/%s" %d', get_client_addr(cycle.scope),
                                    "POST", PATH, cycle.scope["http_version"], status)
        if not cycle.keep_alive:  # asked for, or the server is shutting down
            self.transport.write(data)
            self.transport.close()
        elif self.pipeline or not self._fast.outbox.hold(self.transport, data, ack):
            # A pipelined request starts below and may answer before the outbox's flush:
            # this answer goes first.
            self.transport.write(data)
        cycle.message_event.set()
        cycle.on_response()
