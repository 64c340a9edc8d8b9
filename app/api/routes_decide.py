"""Decisions: /v1/authorize-tool, /v1/authorize-tools, /v1/errors."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from app.api.deps import State
from app.api.middleware import BatchRoute, JSONRoute
from app.api.schemas import AuthorizeBatchIn, AuthorizeIn, DecisionBatchOut, DecisionOut
from app.decide import decide
from app.policy.errors import errors_document

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["decisions"])
batch_router = APIRouter(prefix="/v1", route_class=BatchRoute, tags=["decisions"])


def _json(body: object) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


@router.post("/authorize-tool", response_model=DecisionOut,
             summary="May this tool run, in this plan, with this context?")
async def authorize_tool(body: AuthorizeIn, state: State) -> Response:
    """A deny is a successful decision (HTTP 200 with `allowed: false` and `deny`)."""
    return _json(await decide(body, sessions=state.sessions, cache=state.plan_cache))


@batch_router.post("/authorize-tools", response_model=DecisionBatchOut,
                   summary="Up to 100 decisions, answered in order")
async def authorize_tools(body: AuthorizeBatchIn, state: State) -> Response:
    """Body `{"requests": [...]}` (or a bare JSON list); answer `{"items": [...]}` in order."""
    items = [await decide(r, sessions=state.sessions, cache=state.plan_cache)
             for r in body.requests]
    return _json({"items": items})


@router.get("/errors", summary="The error hierarchy and deny codes")
async def list_errors() -> Response:
    return _json(errors_document())
