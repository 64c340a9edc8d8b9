"""POST /v1/authorize-tool as one pipeline, the one decision entry point every transport
calls (OPA's server is handed its evaluator the same way: the transport does I/O, the
pipeline decides).

    head(headers)                  the head's checks, before the body is read
    step(headers, body)  -> Answer | NeedsIO, or raises the request's error
    await finish(needs)  -> Answer, or raises the request's error
    await admit(headers, path, rule) -> Principal   key, rate limit, role alone; then
    decide(request, principal, caller) -> Answer | NeedsIO, and finish   (the hooks)

`step` is synchronous: key (from memory) -> rate limit -> role and scoping
(auth.access.require_role, `unscoped_only` included) -> decode (msgspec's one pass, else
strict JSON and AuthorizeIn naming the field) -> the decision from memory. Whatever needs
I/O (a key only the database knows, a plan not in memory, a stale registry, a ledger read,
an approval) comes back as `NeedsIO`, which `finish` completes with the same steps. An error
is raised as the one envelope's exception; every transport renders it with
app/edge/handlers.py `render`.

The transports, each a thin adapter:
- the HTTP protocol's hot route (app/edge/connection.py, calling hotpath.py `inline`):
  `step` once the body is complete; an Answer is written when its record commits; a
  NeedsIO or an error is handed, in the ASGI scope (`OUTCOME`), to
- the plain-ASGI route (app/authorize/hotpath.py `FastAuthorize`): reads the body, `step`
  (or the protocol's outcome), `finish`, renders errors, records, answers;
- the coding-agent hooks (app/hooks/asgi.py and app/hooks/service.py): `admit` for the
  key, rate limit and role of POST /v1/hooks/claude-code, then the hook body's authorize
  request through `decide` and `finish`, as any other;
- the FastAPI route (app/authorize/routes.py): the OpenAPI declaration. FastAPI has
  authenticated the key and checked its role (app/auth/deps.py, the same auth.access
  functions) and validated the body (AuthorizeIn): it calls `decide` and `finish`.
Recording is the transport's (the recorder main.py hands it), the decision's record is in
the Answer.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import orjson

from app.auth.access import bearer_secret, one_authorization, require_role
from app.auth.keys import Principal, hash_secret
from app.auth.roles import Rule, rule_for
from app.authorize.service import Authorizer, check_authorize, decide
from app.authorize.wire import decode_authorize, decode_authorize_json
from app.edge.middleware import refuse_declared, strict_json, too_large
from app.kit.caller import Caller, client_request_id

PATH = "/v1/authorize-tool"
RULE = rule_for("POST", PATH)  # (permission, rule), looked up once
# The ASGI scope key under which the HTTP protocol hands its outcome (a NeedsIO or the
# request's error) to the plain-ASGI route, which then goes on from there.
OUTCOME = "toolgate.authorize_outcome"


class Answer:
    """A decision: the response body (and its JSON) and its log record."""

    __slots__ = ("answer", "record", "body")

    def __init__(self, answer: dict[str, Any], record: dict[str, Any]) -> None:
        self.answer, self.record = answer, record
        # Encoded before the commit is awaited: when a commit is acknowledged, its requests
        # then go out back to back.
        self.body = orjson.dumps(answer)


class NeedsIO:
    """Where `step` stopped: the key is to be read (`principal` None), or the decision
    needs a read or a write (`request` decoded)."""

    __slots__ = ("headers", "raw", "header", "key_hash", "principal", "request", "caller")

    def __init__(self, headers: dict[bytes, bytes], raw: bytes, *, header: bytes = b"",
                 key_hash: str = "", principal: Principal | None = None,
                 request: Any = None, caller: Caller | None = None) -> None:
        self.headers, self.raw, self.header, self.key_hash = headers, raw, header, key_hash
        self.principal, self.request, self.caller = principal, request, caller


class Pipeline:
    """One per process, built by main.py's lifespan from each feature's state."""

    __slots__ = ("authorizer", "authenticator", "rate_limiter", "limit")

    def __init__(self, *, authorizer: Authorizer, authenticator: Any, rate_limiter: Any,
                 limit: int) -> None:
        self.authorizer = authorizer
        self.authenticator = authenticator
        self.rate_limiter = rate_limiter
        self.limit = limit  # TOOLGATE_MAX_BODY_BYTES

    def head(self, raw_headers: list[tuple[bytes, bytes]],
             headers: dict[bytes, bytes]) -> None:
        """Before the body is read: two Authorization headers (401), then a declared
        Content-Length past the limit (413)."""
        one_authorization(raw_headers, headers)
        refuse_declared(headers.get(b"content-length"), self.limit)

    def step(self, headers: dict[bytes, bytes], raw: bytes) -> Answer | NeedsIO:
        """Everything that needs no I/O, in order. Raises the request's error."""
        if len(raw) > self.limit:
            raise too_large(self.limit)
        header = headers.get(b"authorization", b"")
        key_hash, principal = self._remembered(header)
        if principal is None:
            return NeedsIO(headers, raw, header=header, key_hash=key_hash)
        return self._keyed(headers, raw, principal)

    async def finish(self, needs: NeedsIO) -> Answer:
        """The I/O `step` left: the key's read, then the decision's. Raises the error."""
        if needs.principal is None:
            principal = await self.authenticator.look_up(needs.key_hash)
            _remember_hash(needs.header, needs.key_hash)
            outcome = self._keyed(needs.headers, needs.raw, principal)
            if type(outcome) is Answer:
                return outcome
            needs = outcome  # type: ignore[assignment]
        assert needs.principal is not None and needs.caller is not None
        return Answer(*await self.authorizer.decide(needs.request, needs.principal,
                                                    needs.caller))

    def decide(self, request: Any, principal: Principal, caller: Caller) -> Answer | NeedsIO:
        """A decoded request of an authenticated key whose role was checked: the decision
        from memory, or what `finish` must do (the FastAPI routes start here)."""
        decided = self.authorizer.from_memory(request, principal, caller)
        if decided is None:
            return NeedsIO({}, b"", principal=principal, request=request, caller=caller)
        return Answer(*decided)

    async def check(self, request: Any, principal: Principal) -> None:
        """The scope check alone (a batch checks every item before deciding any)."""
        await check_authorize(request, principal, plans=self.authorizer.plans,
                              sessions=self.authorizer.sessions)

    async def rehearse(self, request: Any) -> dict[str, Any]:
        """POST /v1/test: the answer as the current configuration gives it, neither
        recorded nor holding, using or asking anything of the ledger or approvals."""
        authorizer = self.authorizer
        answer, record = await decide(request, sessions=authorizer.sessions,
                                      cache=authorizer.plans, registry=authorizer.registry)
        # The call rules that matched (SPEC §18), for cases that name them.
        return {**answer, "rules": record["detail"].get("rules", [])}

    async def admit(self, raw_headers: list[tuple[bytes, bytes]],
                    headers: dict[bytes, bytes], *, path: str,
                    rule: tuple[str | None, Rule]) -> Principal:
        """The key -> rate limit -> role steps alone, for `POST path` (its `rule`): for a
        transport whose body is not an authorize request (the coding-agent hooks,
        app/hooks/asgi.py), which then builds the request and goes on with `decide` and
        `finish`. Raises the request's error, as `head` and `step` do."""
        one_authorization(raw_headers, headers)
        header = headers.get(b"authorization", b"")
        key_hash, principal = self._remembered(header)
        if principal is None:
            principal = await self.authenticator.look_up(key_hash)
            _remember_hash(header, key_hash)
        self._admitted(principal, path, rule)
        return principal

    def _admitted(self, principal: Principal, path: str,
                  rule: tuple[str | None, Rule]) -> None:
        if self.rate_limiter is not None:
            self.rate_limiter.take(principal.key_id)
        require_role(principal, "POST", path, rule)

    def _keyed(self, headers: dict[bytes, bytes], raw: bytes,
               principal: Principal) -> Answer | NeedsIO:
        self._admitted(principal, PATH, RULE)
        request = decode_authorize_json(raw)
        if request is None:  # refused or unusual: orjson and AuthorizeIn say what it is
            request = decode_authorize(strict_json(raw))
        return self.decide(request, principal, caller_of(headers, principal.key_id))

    def _remembered(self, header: bytes) -> tuple[str, Any]:
        """The key hash of an Authorization header, and its principal when memory knows the
        key (None: only the database can tell). A header's hash is kept for next time only
        once its key is known valid."""
        key_hash = _HASHES.get(header)
        if key_hash is not None:
            return key_hash, self.authenticator.remembered(key_hash)
        key_hash = _key_hash(header)
        principal = self.authenticator.remembered(key_hash)
        if principal is not None:
            _remember_hash(header, key_hash)
        return key_hash, principal


def caller_of(headers: dict[bytes, bytes], key_id: str | None) -> Caller:
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
