"""Around every request the app serves through its middleware stack (ToolgateApp, app/
main.py): its X-Request-ID (echoed, or generated), its count in the metrics by route
template and status, and its access line. The hot route does the same itself
(app/authorize/hotpath.py, in the ASGI app or in the HTTP protocol), without a wrapper
around `send`."""

from __future__ import annotations

from time import perf_counter
from typing import Any

from app.edge.logs import REQUEST_ID, access, request_id_of
from app.kit.metrics import Tally

SCOPE_KEY = "toolgate.request_id"
ERROR_KEY = "toolgate.error_code"  # set by the error handlers: the envelope's code


def header(scope: dict, name: bytes) -> bytes | None:
    for key, value in scope["headers"]:
        if key == name:
            return value
    return None


async def observed(inner: Any, scope: dict, receive: Any, send: Any, *,
                   tally: Tally | None, access_log: bool) -> None:
    started = perf_counter()
    raw_id = request_id_of(header(scope, b"x-request-id"))
    request_id = raw_id.decode("latin-1")
    scope[SCOPE_KEY] = request_id
    token = REQUEST_ID.set(request_id)
    status = 0

    async def sending(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
            message = {**message, "headers": [*message.get("headers", ()),
                                              (b"x-request-id", raw_id)]}
        await send(message)

    try:
        await inner(scope, receive, sending)
    finally:
        REQUEST_ID.reset(token)
        if status:  # else nothing was answered (the client went away)
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            if tally is not None:
                tally.request(route, status)
            if access_log:
                access(request_id=request_id, method=scope["method"], route=route,
                       status=status, duration_ms=(perf_counter() - started) * 1000,
                       code=scope.get(ERROR_KEY), client=_client(scope))


def _client(scope: dict) -> str | None:
    client = scope.get("client")
    return f"{client[0]}:{client[1]}" if client else None
