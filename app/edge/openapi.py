"""The error envelope in the OpenAPI document: one component schema (`Error`) and the error
responses each operation documents, so the document is the contract (SPEC §4 "Errors that
are not decisions") and tests/test_openapi_contract.py can hold the app to it.

Where each status is documented (`install` adds the envelope's schemas to the document):
- 401, 403, 503 (and 429 when rate limits are on) on every route that needs a key: main.py
  passes `errors(...)` to `include_router` once for all of them (the key is read from the
  database, which may be unavailable: 503).
- 422 on every operation that takes input (a parameter or a body) and 413 on every one with
  a body: `document_inputs` derives them from each router's routes, replacing FastAPI's
  own 422 schema, which is not the shape toolgate sends.
- 404 and 409 where a route can raise them: `errors(404)` in that route's `responses=`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.dependencies.utils import get_flat_params
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

# What each status means on toolgate's routes; an operation can say more in its own
# `responses=` (its description wins).
MEANINGS: dict[int, str] = {
    401: "No key, or a key that is not valid (unknown, revoked or expired); "
         "`WWW-Authenticate: Bearer`",
    403: "The key's role may not use this route (docs/auth.md)",
    404: "The resource does not exist, or is outside the key's projects",
    409: "Conflict with the stored state (the error's code says which); a concurrent "
         "change of the same resource may be retried",
    413: "The body is larger than TOOLGATE_MAX_BODY_BYTES",
    422: "Invalid input: `invalid_json`, or `invalid_input` with every bad field named in "
         "`details.fields`",
    429: "Rate limited (TOOLGATE_RATE_LIMIT_PER_SECOND); `Retry-After` says when to retry",
    503: "The database is unavailable, or a decision could not be recorded in time; "
         "try again",
}


class ErrorBody(BaseModel):
    model_config = ConfigDict(title="ErrorBody")

    code: str = Field(description="machine-readable, e.g. not_found, invalid_input")
    message: str
    details: dict[str, Any] = Field(description="what the code names, e.g. `fields` for 422")


class Error(BaseModel):
    """The one envelope of every answer that is not a decision (app/edge/handlers.py)."""

    model_config = ConfigDict(title="Error")

    error: ErrorBody


# Always JSON, whatever the route's own answers are (GET /v1/audit/export streams JSONL):
# FastAPI would document a `model` under the route's media type, so the schema is given as
# a reference and `install` puts the component in the document.
ENVELOPE = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}


def errors(*statuses: int, **described: str) -> dict[int | str, dict[str, Any]]:
    """`responses=` entries for these error statuses, each with the envelope's schema.
    `described` overrides a status's meaning for one route: `errors(409, s409="...")`."""
    return {status: {"content": ENVELOPE,
                     "description": described.get(f"s{status}", MEANINGS[status])}
            for status in statuses}


def install(app: FastAPI) -> None:
    """The envelope (`Error`, `ErrorBody`) as component schemas of the app's document."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            envelope = Error.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(envelope.pop("$defs", {}))
            schemas["Error"] = envelope
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]


def _has_body(route: APIRoute) -> bool:
    return route.body_field is not None or "requestBody" in (route.openapi_extra or {})


def _has_parameters(route: APIRoute) -> bool:
    return bool(get_flat_params(route.dependant))  # path, query, header and cookie


def document_inputs(router: APIRouter) -> None:
    """422 on every operation of this router that takes input, 413 on every one with a
    body, with the envelope's schema (FastAPI would otherwise document its own 422 shape).
    Called on each router before it is included (idempotent)."""
    for route in router.routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        body = _has_body(route)
        if body or _has_parameters(route):
            route.responses.setdefault(422, errors(422)[422])
        if body:
            route.responses.setdefault(413, errors(413)[413])
