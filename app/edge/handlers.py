"""The one error envelope: {"error": {"code", "message", "details"}} for every non-decision."""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import ValidationError
from sqlalchemy.exc import DataError, DBAPIError, IntegrityError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import compile_path

from app.edge.errors import InvalidJSON, ToolgateError
from app.edge.logs import envelope_code
from app.edge.observe import ERROR_KEY
from app.kit import metrics
from app.policy.tool import MissingCapability

log = logging.getLogger("toolgate")


def envelope(status: int, code: str, message: str, details: dict[str, Any] | None = None,
             headers: dict[str, str] | None = None) -> Response:
    body = {"error": {"code": code, "message": message, "details": details or {}}}
    return Response(orjson.dumps(body), status_code=status, media_type="application/json",
                    headers=headers)


def _field(loc: tuple[Any, ...]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    # Pydantic adds the model-validator or union member name to the location; drop it.
    parts = [p for p in parts if not (isinstance(p, str) and p.startswith("function-"))]
    return ".".join(str(p) for p in parts)


def validation_details(errors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for error in errors:
        item = {"field": _field(tuple(error.get("loc", ()))), "message": error.get("msg", ""),
                "type": error.get("type", "")}
        out.append(item)
    return out


def render_validation(errors: list[dict[str, Any]]) -> Response:
    """422 naming every bad field (or `invalid_json`), for FastAPI's errors and pydantic's."""
    if any(e.get("type") == "json_invalid" for e in errors):
        detail = next(e for e in errors if e.get("type") == "json_invalid")
        reason = (detail.get("ctx") or {}).get("error", "")
        return envelope(422, "invalid_json", f"body is not valid JSON: {reason}".rstrip(": "))
    fields = validation_details(errors)
    summary = "; ".join(f"{f['field'] or 'body'}: {f['message']}" for f in fields[:10])
    return envelope(422, "invalid_input", f"invalid input: {summary}",
                    {"fields": fields})


def _missing_capability(exc: MissingCapability) -> Response:
    fields = [{"field": f, "message": "required for a tool that is not in the registry",
               "type": "missing"} for f in exc.fields]
    return envelope(422, "invalid_input",
                    f"invalid input: {', '.join(exc.fields)} required for an unregistered tool",
                    {"fields": fields})


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
               400: "bad_request"}


def render(exc: Exception, *, method: str = "", path: str = "") -> Response:
    """The one mapping from an error to its status and envelope (OPA's writer.ErrorAuto),
    for every route and for the hot path, which calls it directly."""
    if isinstance(exc, ToolgateError):
        return envelope(exc.status, exc.code, exc.message, exc.details, headers=exc.headers)
    if isinstance(exc, InvalidJSON):
        return envelope(422, "invalid_json", str(exc))
    if isinstance(exc, RequestValidationError | ValidationError):
        return render_validation(list(exc.errors()))
    if isinstance(exc, MissingCapability):
        return _missing_capability(exc)
    if isinstance(exc, StarletteHTTPException):
        return envelope(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"),
                        str(exc.detail), headers=getattr(exc, "headers", None))
    if isinstance(exc, DataError):
        # The database refused a value the schemas let through (the client's data, not an
        # outage): a 4xx, and the transaction was rolled back, so nothing changed.
        log.info("database refused a value: %s", exc)
        return envelope(422, "invalid_input", "a value in the request cannot be stored")
    if isinstance(exc, IntegrityError):
        # Writers of one resource are serialised (app/store/engine.py lock_key), so this is
        # a conflict the caller can retry, not an outage.
        log.info("integrity conflict: %s", exc)
        return envelope(409, "conflict", "a concurrent change conflicted with this one; retry")
    # OSError includes TimeoutError: a statement the server did not answer in time, or a
    # connection that could not be made (TOOLGATE_DB_TIMEOUT_SECONDS); PoolTimeout is no
    # free pooled connection within that bound.
    if isinstance(exc, OperationalError | DBAPIError | OSError | PoolTimeout):
        log.warning("storage unavailable: %s", exc)
        metrics.storage_error()
        return envelope(503, "storage_unavailable", "the database is unavailable; try again",
                        headers={"Retry-After": "1"})
    # Still the envelope, and never an allow: decisions are only sent from the route itself.
    log.exception("unexpected error on %s %s", method, path)
    return envelope(500, "internal", "internal error; the request was not completed")


try:  # FastAPI >= 0.165 keeps included routers as such: this walks their routes
    from fastapi.routing import iter_route_contexts as _routes
except ImportError:  # before, include_router copied every route into app.routes
    def _routes(routes: Any) -> Any:
        return routes


@lru_cache(maxsize=1024)
def _path_regex(template: str) -> re.Pattern[str]:
    return compile_path(template)[0]


def allowed_methods(app: Any, path: str) -> list[str]:
    """Every method some route answers at this path. Starlette's 405 names only the
    methods of the first route whose path matched (`PUT /v1/profiles/x` routes its GET
    and DELETE elsewhere), which is not what `Allow` means (RFC 9110 §10.2.1)."""
    methods: set[str] = set()
    for route in _routes(app.routes):
        template, answered = getattr(route, "path", None), getattr(route, "methods", None)
        if template and answered and _path_regex(template).match(path):
            methods |= answered
    return sorted(methods)


async def _handle(request: Request, exc: Exception) -> Response:
    response = render(exc, method=request.method, path=request.url.path)
    request.scope[ERROR_KEY] = envelope_code(response.body)  # for the access line
    if response.status_code == 405:
        methods = allowed_methods(request.app, request.scope.get("path", ""))
        if methods:
            response.headers["Allow"] = ", ".join(methods)
    return response


def install(app: FastAPI) -> None:
    for kind in (RequestValidationError, ToolgateError, MissingCapability,
                 StarletteHTTPException, DataError, IntegrityError, OperationalError,
                 DBAPIError, OSError, PoolTimeout, Exception):
        app.add_exception_handler(kind, _handle)
