"""Liveness and readiness; the only routes that will never need a key."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app.edge.handlers import envelope
from app.edge.openapi import errors
from app.log.checkpoints import LAST_HELD, contradiction
from app.store.migrate import schema_verdict

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
            oldest = None
            if current is not None and current != state.schema_head \
                    and current not in state.known_revisions:
                # Ahead of this code: served only when the migrations past its head are
                # marked as served by it (app/store/migrate.py, docs/deployment.md).
                oldest = await conn.scalar(
                    text("SELECT oldest_revision FROM toolgate_schema WHERE id = 1"))
    except Exception as exc:  # any failure to reach the database means not ready
        return envelope(503, "not_ready", f"database unreachable: {type(exc).__name__}")
    verdict = schema_verdict(current, oldest, head=state.schema_head,
                             known=state.known_revisions)
    if not verdict.serves:
        # Behind: the tables this code needs may be missing. Ahead and not marked for this
        # release: a contracting migration ran, and what this code reads may be gone.
        return envelope(503, "not_ready", verdict.message,
                        {"current": current, "head": state.schema_head, "oldest": oldest})
    problem = await _forged(state.engine)
    if problem is not None:
        # Still serving (decisions go on, logged and chained), yet the log contradicts its
        # last signed checkpoint and no new one is signed: an operator must look.
        return JSONResponse({"status": "degraded", "checkpoints": problem})
    return Response(b'{"status":"ready"}', media_type="application/json")


async def _forged(engine: Any) -> str | None:
    """Why the stored log contradicts its last signed checkpoint (app/log/checkpoints.py,
    the writer's own test before it signs), or None."""
    try:
        async with engine.connect() as conn:
            held = (await conn.execute(text(LAST_HELD))).first()
    except Exception:  # not this check's to judge: the database answered just above
        return None
    problem = held and contradiction(*held[2:7])
    return f"signing stopped: the log contradicts its checkpoint at seq {held[2]}: " \
        f"{problem}" if problem else None
