"""Liveness and readiness; the only routes that will never need a key."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from sqlalchemy import text

from app.kit.handlers import envelope
from app.kit.openapi import errors

router = APIRouter(tags=["health"])


# GET and HEAD (load balancers' and probes' check): one route each, so each operation has
# its own operationId in the OpenAPI document.
@router.head("/healthz")
@router.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}


NOT_READY = errors(503, s503="Not ready (code not_ready): the database does not answer, or "
                               "its schema is behind this code's")


@router.head("/readyz", responses=NOT_READY)
@router.get("/readyz", responses=NOT_READY)
async def readyz(request: Request) -> Response:
    state = request.app.state  # the engine and the schema revisions main.py put there
    try:
        async with state.engine.connect() as conn:
            current = await conn.scalar(text("SELECT version_num FROM alembic_version"))
    except Exception as exc:  # any failure to reach the database means not ready
        return envelope(503, "not_ready", f"database unreachable: {type(exc).__name__}")
    if current != state.schema_head and (current is None or current in state.known_revisions):
        # Behind this code's head: the tables it needs may be missing. A schema *ahead* of
        # the code (a revision this code does not know) is an upgrade in progress: serve.
        return envelope(503, "not_ready",
                        f"schema at {current}, expected {state.schema_head}: run toolgate migrate",
                        {"current": current, "head": state.schema_head})
    return Response(b'{"status":"ready"}', media_type="application/json")
