"""The hot route, POST /v1/authorize-tool, answered as plain ASGI.

Every agent calls this before every tool call, so it skips what FastAPI adds per request
(dependency solving, thread-pool hops for sync dependencies, request/response wrappers).
The steps are the FastAPI route's (app/authorize/routes.py), made of the same functions:

  body limit (kit.middleware) -> key (auth.access.bearer_secret, the Authenticator: 401,
  429) -> role (auth.access.require_role: 403) -> decode: msgspec's one pass over the raw
  body (authorize/wire.py), else strict JSON (kit.middleware.strict_json: 422
  invalid_json) then AuthorizeIn's validation (422 naming fields) -> Authorizer.decide
  (scope 404, the core) -> the recorder (503 when it cannot be recorded) -> answer.

Errors are rendered by kit.handlers.render, the one mapping every route uses, so the
envelope is identical; the decision cases and bad inputs run through both paths.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import lru_cache
from time import perf_counter
from typing import Any

import orjson

from app.auth.access import bearer_secret, one_authorization, require_role
from app.auth.keys import hash_secret
from app.auth.roles import rule_for
from app.authorize.service import Authorizer
from app.authorize.wire import decode_authorize, decode_authorize_json
from app.decisions.audit import not_recorded
from app.decisions.log import RecordingFailed
from app.kit.caller import Caller
from app.kit.handlers import render
from app.kit.logs import access, client_request_id, envelope_code, request_id_of
from app.kit.middleware import body_from, refuse_declared, strict_json, too_large

log = logging.getLogger("toolgate")

PATH = "/v1/authorize-tool"
_RULE = rule_for("POST", PATH)  # (permission, rule), looked up once
_JSON_HEADERS = [(b"content-type", b"application/json")]
# Set in the ASGI scope when the protocol's hot route already spent this request's
# rate-limit token before handing the request to __call__ (which must not spend another).
TOKEN_TAKEN = "toolgate.rate_limit_token_taken"


class FastAuthorize:
    """Answers POST /v1/authorize-tool; ToolgateApp (app/main.py) calls it ahead of the
    middleware stack for the requests it `handles`. Everything it uses is handed to it by
    main.py's lifespan (`attach`): the authenticator, the rate limiter, the authorize
    service, and the decision log as the recorder. It reaches for nothing else."""

    def __init__(self, *, limit: int) -> None:
        self.limit = limit
        self.outbox = _Outbox()
        self.authorizer: Authorizer | None = None  # None until attached: not serving yet
        self.authenticator: Any = None
        self.rate_limiter: Any = None
        # The recorder: `write(records)` awaits the commit (-> its acknowledgement number),
        # `submit(records, done)` calls `done` at the commit (the HTTP protocol's hot route).
        # None with the decision log off.
        self.write: Callable[[list[dict[str, Any]]], Awaitable[int | None]] | None = None
        self.submit: Callable[..., Any] | None = None
        self._log: Any = None  # whose after_ack hook runs the outbox, when it does
        self.tally: Any = None  # the metrics' (app/kit/metrics.py Tally); None: off
        self.access_log = False  # one line per request (TOOLGATE_ACCESS_LOG)

    def attach(self, *, authorizer: Authorizer, authenticator: Any, rate_limiter: Any,
               decision_log: Any, tally: Any = None, access_log: bool = False) -> None:
        """Serve with these; the decision log's acknowledgements flush the outbox."""
        self.tally, self.access_log = tally, access_log
        self.authorizer = authorizer
        self.authenticator = authenticator
        self.rate_limiter = rate_limiter
        if decision_log is not None:
            self.write = decision_log.write
            self.submit = decision_log.submit
            decision_log.after_ack = self.outbox
            self._log = decision_log

    def _remembered(self, header: bytes) -> tuple[str, Any]:
        """The key hash of an Authorization header, and its principal when memory knows the
        key (None: only the database can tell). Both ways of answering start here. A
        header's hash is kept for next time only once its key is known valid."""
        key_hash = _HASHES.get(header)
        if key_hash is not None:
            return key_hash, self.authenticator.remembered(key_hash)
        key_hash = _key_hash(header)
        principal = self.authenticator.remembered(key_hash)
        if principal is not None:
            _remember_hash(header, key_hash)
        return key_hash, principal

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
            one_authorization(scope["headers"], headers)  # 401 for two Authorization headers
            refuse_declared(headers.get(b"content-length"), self.limit)
            message = await receive()
            if message["type"] == "http.request" and not message.get("more_body", False):
                raw = message.get("body", b"")  # the whole body in one message: the rule
                if len(raw) > self.limit:
                    raise too_large(self.limit)
            else:
                raw = await body_from(message, receive, self.limit)
                if raw is None:
                    return  # the client went away
            header = headers.get(b"authorization", b"")
            key_hash, principal = self._remembered(header)
            if principal is None:
                principal = await self.authenticator.look_up(key_hash)
                _remember_hash(header, key_hash)
            if self.rate_limiter is not None and not scope.get(TOKEN_TAKEN):
                self.rate_limiter.take(principal.key_id)
            require_role(principal, "POST", PATH, _RULE)
            request = decode_authorize_json(raw)
            if request is None:  # refused or unusual: orjson and AuthorizeIn say what it is
                request = decode_authorize(strict_json(raw))
            caller = _caller_of(headers, principal.key_id)
            authorizer = self.authorizer
            assert authorizer is not None
            # from_memory first as a plain call: awaiting decide() (which starts with the
            # same call) would cost a coroutine per request for nothing.
            decided = authorizer.from_memory(request, principal, caller)
            if decided is None:
                decided = await authorizer.decide(request, principal, caller)
            answer, record = decided
            # Encoded before the commit is awaited: when a commit is acknowledged, its
            # requests then go out back to back.
            body = orjson.dumps(answer)
            ack, outbox = None, None
            if self.write is not None:
                try:
                    ack = await self.write([record])
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

    def ready(self, marks: dict[str, Any], headers: dict[bytes, bytes], raw: bytes
              ) -> tuple[bytes, dict[str, Any] | None] | None:
        """The answer's JSON body and its log record (None with the log off), decided from
        memory without awaiting anything, by the same steps in the same order as __call__;
        or None when the request needs __call__ (an unknown key or plan, a stale registry,
        anything refused or unusual), which then runs every step and renders whatever error
        there is. The HTTP protocol's hot route (toolgate_uvicorn/protocol.py) calls it;
        nothing it does before that hand-over has an effect but the rate limiter's token,
        which it marks in `marks` as spent (the protocol puts them in the ASGI scope it then
        builds)."""
        authorizer = self.authorizer
        if authorizer is None or len(raw) > self.limit:
            return None
        try:
            _, principal = self._remembered(headers.get(b"authorization", b""))
            if principal is None:
                return None
            if self.rate_limiter is not None:
                self.rate_limiter.take(principal.key_id)
                marks[TOKEN_TAKEN] = True
            if principal.role not in _RULE[1].roles:
                return None
            request = decode_authorize_json(raw)
            if request is None:
                return None
            decided = authorizer.from_memory(request, principal,
                                             _caller_of(headers, principal.key_id))
        except Exception:  # __call__ meets it again and renders it
            return None
        if decided is None:
            return None
        answer, record = decided
        return orjson.dumps(answer), (record if self.write is not None else None)


_STARTED = "toolgate.started"  # perf_counter() at the request's start (access log on)


async def _answer(send: Any, body: bytes, outbox: _Outbox | None, ack: int | None,
                  request_id: bytes) -> None:
    """200 with the JSON `body`, written to the connection in one piece under uvicorn.

    uvicorn writes the status line and headers, then the body, as two socket writes. On a
    loopback or LAN client that reads each one as it lands, that is two wakeups of the
    client and two TCP segments per answer. So while uvicorn handles our two messages, its
    request cycle writes into a holder that passes the bytes on in one write afterwards
    (and before a close). Only when `send` is the method of a cycle of uvicorn's httptools
    protocol (`uvicorn[standard]`, what `toolgate serve` runs): its response-complete step
    writes nothing itself. uvicorn's h11 protocol does (it parses a pipelined next request
    there and may answer it 400 and close), which would put that answer before ours, so
    under h11, as under any other server, the messages go out as from any ASGI app.

    Given the `outbox` and the number of the commit acknowledgement that released this
    request, the write waits in the outbox until every request of that acknowledgement
    has been answered, and they all go out together (see _Outbox)."""
    start = {"type": "http.response.start", "status": 200,
             "headers": [*_JSON_HEADERS, (b"content-length", str(len(body)).encode()),
                         (b"x-request-id", request_id)]}
    message = {"type": "http.response.body", "body": body}
    cycle = getattr(send, "__self__", None)
    transport = getattr(cycle, "transport", None)
    if transport is None or type(cycle).__module__ != _HTTPTOOLS:
        await send(start)
        await send(message)
        return
    held = _OneWrite(transport)
    cycle.transport = held
    try:
        await send(start)
        await send(message)
    finally:
        cycle.transport = transport
        data = held.release()
        if data and not (outbox is not None and outbox.hold(transport, data, ack)):
            transport.write(data)


# Not an import of uvicorn's private modules: a module name compared, and `transport` read
# with getattr, so a uvicorn release that changes its cycle loses only this one-write
# optimisation (the answer then goes out as from any ASGI app). tests/authorize/
# test_one_write.py drives uvicorn's own classes; pyproject pins the tested uvicorn.
_HTTPTOOLS = "uvicorn.protocols.http.httptools_impl"


class _OneWrite:
    """Stands in for a transport: keeps what is written until `release` (or `close`, which
    writes it first). Anything else is the transport's own."""

    __slots__ = ("_transport", "_parts")

    def __init__(self, transport: Any) -> None:
        self._transport = transport
        self._parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self._parts.append(data)

    def release(self) -> bytes:
        data = b"".join(self._parts)
        self._parts.clear()
        return data

    def close(self) -> None:  # uvicorn closes after the body when the client asked to
        data = self.release()
        if data:
            self._transport.write(data)
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


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


def _caller_of(headers: dict[bytes, bytes], key_id: str | None) -> Caller:
    request_id = client_request_id(headers.get(b"x-request-id"))
    return Caller(request_id=request_id, key_id=key_id) if request_id else _caller(key_id)


@lru_cache(maxsize=1024)
def _caller(key_id: str | None) -> Caller:
    """The Caller of a request without X-Request-ID: one per key, built once."""
    return Caller(key_id=key_id)


# Authorization header -> its key's hash, for the headers of valid keys seen lately:
# SHA-256 costs more than the rest of authentication. Only a header whose key was valid is
# kept (a client sending a new bogus key on every request adds nothing here), only headers
# of a plausible size, and the whole is bounded in entries and in bytes: forgotten all at
# once when either bound is reached. A key's validity is the key cache's business: this
# only remembers a pure function's results.
_HASHES: dict[bytes, str] = {}
_HASHES_MAX = 1024
_HASHES_MAX_BYTES = 256 * 1024
_HASHES_MAX_HEADER = 512  # a key is 46 characters; the admin token may be longer
_hashes_bytes = 0


def _key_hash(header: bytes) -> str:
    known = _HASHES.get(header)
    if known is not None:
        return known
    return hash_secret(bearer_secret(header.decode("latin-1")))


def _remember_hash(header: bytes, key_hash: str) -> None:
    """Keep `header`'s hash for next time: called once its key was found valid."""
    global _hashes_bytes
    if header in _HASHES or len(header) > _HASHES_MAX_HEADER:
        return
    if len(_HASHES) >= _HASHES_MAX or _hashes_bytes + len(header) > _HASHES_MAX_BYTES:
        _HASHES.clear()
        _hashes_bytes = 0
    _HASHES[header] = key_hash
    _hashes_bytes += len(header)
