"""The hot route, POST /v1/authorize-tool, answered as plain ASGI and inside toolgate's
HTTP protocol: thin adapters over the pipeline (app/authorize/pipeline.py).

Every agent calls this before every tool call, so it skips what FastAPI adds per request
(dependency solving, thread-pool hops for sync dependencies, request/response wrappers).
It reads the body, runs the pipeline (`head`, `step`, `finish` for what needs I/O), hands
the record to the recorder main.py gave it (503 when it cannot be recorded) and answers;
errors are rendered by edge.handlers.render, the one mapping every route uses, so the
envelope is identical. The decision cases and bad inputs run through every transport.

`inline` is the same route inside toolgate's HTTP protocol (app/edge/connection.py), which
finds it on the app (`app.fast_path`) and hands it each complete request it may answer
without an ASGI task: the pipeline's synchronous step, the record to the decision log with
a callback, the answer written when the commit is acknowledged. Whatever the step does not
answer goes back to the protocol with the step's outcome for the scope (OUTCOME), and from
there to `__call__`, which goes on from it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from time import perf_counter
from typing import Any

from app.authorize.pipeline import OUTCOME, PATH, Answer, NeedsIO, Pipeline
from app.edge.cycle import Cycle
from app.edge.handlers import envelope, render
from app.edge.logs import access, envelope_code, request_id_of
from app.edge.middleware import body_from, too_large
from app.log.audit import not_recorded
from app.log.decision_log import RecordingFailed

log = logging.getLogger("toolgate")

_JSON_HEADERS = [(b"content-type", b"application/json")]
_OK_HEADERS = b"content-type: application/json\r\ncontent-length: "


class FastAuthorize:
    """Answers POST /v1/authorize-tool; ToolgateApp (app/main.py) calls it ahead of the
    middleware stack for the requests it `handles`. Everything it uses is handed to it by
    main.py's lifespan (`attach`): the pipeline, and the decision log as the recorder. It
    reaches for nothing else."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.outbox = _Outbox()
        self.pipeline: Pipeline | None = None  # None until attached: not serving yet
        # The recorder: `write(records)` awaits the commit (-> its acknowledgement number),
        # `submit(records, done)` calls `done` at the commit (the HTTP protocol's hot route).
        # None with the decision log off.
        self.write: Callable[[list[dict[str, Any]]], Awaitable[int | None]] | None = None
        self.submit: Callable[..., Any] | None = None
        self._log: Any = None  # whose after_ack hook runs the outbox, when it does
        self.tally: Any = None  # the metrics' (app/kit/metrics.py Tally); None: off
        self.access_log = False  # one line per request (TOOLGATE_ACCESS_LOG)

    def attach(self, *, pipeline: Pipeline, decision_log: Any, tally: Any = None,
               access_log: bool = False) -> None:
        """Serve with these; the decision log's acknowledgements flush the outbox."""
        self.tally, self.access_log = tally, access_log
        self.pipeline = pipeline
        if decision_log is not None:
            self.write = decision_log.write
            self.submit = decision_log.submit
            decision_log.after_ack = self.outbox
            self._log = decision_log

    path = PATH.encode()  # what toolgate's HTTP protocol hands to `inline`

    def inline(self, request: Any, raw_headers: list[tuple[bytes, bytes]],
               body: bytes) -> dict[str, Any] | None:
        """A complete POST /v1/authorize-tool read by toolgate's HTTP protocol (`request`
        its app/edge/connection.py HotRequest): None when it is answered here (memory
        decided, the record is on its way; the answer is written at its commit), else
        what the protocol puts in the ASGI scope for __call__ (the step's outcome: a
        NeedsIO, or the request's error, which __call__ renders)."""
        headers = dict(raw_headers)
        if len(headers) != len(raw_headers):
            return {}  # a header name sent twice (two keys?): __call__ looks closer
        pipeline = self.pipeline
        assert pipeline is not None
        try:
            pipeline.head(raw_headers, headers)
            outcome = pipeline.step(headers, body)
        except Exception as exc:  # __call__ renders it
            return {OUTCOME: exc}
        if type(outcome) is not Answer:
            return {OUTCOME: outcome}
        reply = partial(self._reply, request, request_id_of(headers.get(b"x-request-id")),
                        outcome.record["decision_id"],
                        perf_counter() if self.access_log else None, outcome.body)
        if self.submit is None:  # the decision log is off
            reply(None, None)
            return None
        if self.submit([outcome.record], reply):
            return None
        return {OUTCOME: outcome}  # no writer runs: __call__'s write() starts one

    def _reply(self, request: Any, request_id: bytes, decision_id: str,
               started: float | None, body: bytes, number: int | None,
               error: RecordingFailed | None) -> None:
        """The decision log's answer for one request: committed (`number`), or not."""
        try:
            if error is None:
                status = 200
                data = request.compose(200, b"x-request-id: %s\r\n%s%d\r\n" % (
                    request_id, _OK_HEADERS, len(body)), body)
            else:
                exc = not_recorded(error)
                status, number = exc.status, None
                response = envelope(exc.status, exc.code, exc.message, exc.details,
                                    headers=exc.headers)
                data = request.compose(status, b"".join(
                    [b"x-request-id: %s\r\n" % request_id]
                    + [b"%s: %s\r\n" % pair for pair in response.raw_headers]),
                    response.body)
        except Exception:  # no answer can be given: the client sees the connection end
            log.exception("answering a decision failed; closing its connection")
            request.transport.close()
            return
        if request.gone:
            return  # the client went away; its decision is recorded all the same
        tally = self.tally
        if tally is not None:  # the metrics: one integer (app/kit/metrics.py Tally)
            if status == 200:
                tally.hot_ok += 1
            else:
                tally.request(PATH, status)
        if self.access_log:
            self.log_answer(request_id, status, decision_id, started=started,
                            code=None if status == 200 else "decision_not_recorded",
                            client=request.client)
        # Never at once: an answer of a commit's acknowledgement waits for the outbox's
        # flush, which the decision log runs right after all the requests that
        # acknowledgement released; any other (log off, a 503) for the next loop turn, as
        # an ASGI task's would. Until then the response is not complete: a pipelined
        # request waits behind it, and a shutdown only marks the connection to close
        # after it, so the answer of a recorded decision is never dropped in between.
        if not self.outbox.hold(request.transport, data, number, request.completed):
            request.conn.loop.call_soon(request.write_completed, data)

    @staticmethod
    def handles(scope: dict) -> bool:
        return scope["type"] == "http" and scope["path"] == PATH and scope["method"] == "POST"

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        # One coroutine for the whole request (each await of a nested one costs). Every step
        # that can answer from memory is a plain call: a request with a known key on a
        # cached plan awaits only its body and its record's commit.
        request_id = None
        if self.access_log:
            scope[_STARTED] = perf_counter()
        try:
            headers = dict(scope["headers"])
            request_id = request_id_of(headers.get(b"x-request-id"))
            pipeline = self.pipeline
            assert pipeline is not None
            outcome = scope.get(OUTCOME)  # where the HTTP protocol's hot route stopped
            if outcome is None:
                pipeline.head(scope["headers"], headers)
                message = await receive()
                if message["type"] == "http.request" and not message.get("more_body", False):
                    raw = message.get("body", b"")  # the whole body in one message: the rule
                    if len(raw) > self.limit:
                        raise too_large(self.limit)
                else:
                    raw = await body_from(message, receive, self.limit)
                    if raw is None:
                        return  # the client went away
                outcome = pipeline.step(headers, raw)
            elif isinstance(outcome, BaseException):
                raise outcome
            if type(outcome) is NeedsIO:
                outcome = await pipeline.finish(outcome)
            answer, body = outcome.answer, outcome.body
            ack, outbox = None, None
            if self.write is not None:
                try:
                    ack = await self.write([outcome.record])
                except RecordingFailed as failed:
                    raise not_recorded(failed) from None
                # Held for a flush only if this outbox is the hook that will run.
                if ack is not None and self._log.after_ack is self.outbox:
                    outbox = self.outbox
        except Exception as exc:  # rendered exactly as every route's errors
            response = render(exc, method="POST", path=PATH)
            request_id = request_id or request_id_of(None)
            response.headers["x-request-id"] = request_id.decode("latin-1")
            await response(scope, receive, send)
            self.answered(request_id, response.status_code, scope, None,
                          code=envelope_code(response.body) if self.access_log else None)
            return
        await _answer(send, body, outbox, ack, request_id)
        self.answered(request_id, 200, scope, answer["decision_id"])

    def answered(self, request_id: bytes, status: int, scope: dict | None,
                 decision_id: str | None, *, started: float | None = None,
                 code: str | None = None, client: str | None = None) -> None:
        """Counted in the metrics, and the access line when on: every answer of this route,
        from __call__ or from the HTTP protocol's hot route."""
        if self.tally is not None:
            self.tally.request(PATH, status)
        if self.access_log:
            if scope is not None:
                started = scope.get(_STARTED)
                peer = scope.get("client")
                client = f"{peer[0]}:{peer[1]}" if peer else None
            self.log_answer(request_id, status, decision_id, started=started, code=code,
                            client=client)

    @staticmethod
    def log_answer(request_id: bytes, status: int, decision_id: str | None, *,
                   started: float | None, code: str | None, client: str | None) -> None:
        """The access line of one answer of this route (TOOLGATE_ACCESS_LOG)."""
        access(request_id=request_id.decode("latin-1"), method="POST", route=PATH,
               status=status, decision_id=decision_id, code=code, client=client,
               duration_ms=(perf_counter() - started) * 1000 if started else 0.0)


_STARTED = "toolgate.started"  # perf_counter() at the request's start (access log on)


async def _answer(send: Any, body: bytes, outbox: _Outbox | None, ack: int | None,
                  request_id: bytes) -> None:
    """200 with the JSON `body`. Under toolgate's protocol (the default) its cycle renders
    the answer (Cycle.render) and this writes it in one piece: one write, one TCP segment,
    one wakeup of a client that reads each write as it lands. Given the `outbox` and the
    number of the commit acknowledgement that released this request, the write waits in
    the outbox until every request of that acknowledgement has been answered, and they
    all go out together (see _Outbox).

    Under any other server (TOOLGATE_HTTP_PROTOCOL=uvicorn included) the two ASGI messages
    go out as from any ASGI app: nothing of the server's own objects is touched."""
    start = {"type": "http.response.start", "status": 200,
             "headers": [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()),
                         (b"x-request-id", request_id)]}
    cycle = getattr(send, "__self__", None)
    if type(cycle) is Cycle:  # toolgate's own protocol (app/edge/cycle.py)
        conn = cycle.conn
        if conn.write_paused and not cycle.disconnected:
            await conn.drain()
        if cycle.disconnected:
            return
        data = cycle.render(start, body)
        if not (outbox is not None and outbox.hold(cycle.transport, data, ack, cycle.done)):
            if not cycle.transport.is_closing():
                cycle.transport.write(data)
            cycle.done()
        return
    await send(start)
    await send({"type": "http.response.body", "body": body})


class _Outbox:
    """The answers of the requests one acknowledgement (one frame) released, written together.

    When the acknowledgement arrives, DecisionLog resolves its requests' futures, which
    queues their continuations on the event loop one after the other, and then queues
    `flush` (its `after_ack` hook). Each continuation puts its answer here; `flush` then
    writes them all in a row, so a client that reads as data arrives wakes once for the
    burst rather than once per answer (+8 % with the log, docs/performance.md).

    Nothing else can run between those continuations and `flush`: an answer waits here only
    while the requests of its own acknowledgement run. That matters because uvicorn
    considers a response complete once our messages are sent, and its graceful shutdown
    closes such connections at once; a flush queued later than the acknowledgement (at
    the first answer, say) could find the connection closed and the answer lost. A
    continuation that runs after its flush (it waited for the connection to drain) writes
    its answer itself, as does every answer without an acknowledgement number."""

    __slots__ = ("_held", "_flushed")

    def __init__(self) -> None:
        self._held: list[tuple[Any, bytes, Callable[[], object] | None]] = []
        self._flushed = 0  # the last acknowledgement whose answers were written

    def hold(self, transport: Any, data: bytes, ack: int | None,
             then: Callable[[], object] | None = None) -> bool:
        """Keep `data` for the flush of acknowledgement `ack`, and call `then` once it is
        written (the HTTP protocol completes its response there); False if that flush has
        run, and nothing is kept."""
        if ack is None or ack <= self._flushed:
            return False
        self._held.append((transport, data, then))
        return True

    def flush(self, ack: int) -> None:
        self._flushed = max(self._flushed, ack)
        held, self._held = self._held, []
        for transport, data, then in held:
            if transport.is_closing():
                continue  # the client went away while its answer was being decided
            try:
                transport.write(data)
                if then is not None:
                    then()
            except Exception:  # one broken connection must not keep the others' answers
                log.exception("writing an answer failed")

    __call__ = flush  # the decision log's after_ack hook
