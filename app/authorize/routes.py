"""Decisions: /v1/authorize-tool, /v1/authorize-tools, /v1/errors."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from app.auth.deps import PrincipalDep
from app.authorize.deps import PipelineDep
from app.authorize.pipeline import NeedsIO
from app.authorize.schemas import AuthorizeBatchIn, AuthorizeIn, DecisionBatchOut, DecisionOut
from app.edge.errors import ToolgateError
from app.edge.openapi import errors
from app.edge.routing import BatchRoute, JSONRoute
from app.kit.deps import CallerDep
from app.log.audit import record_decisions
from app.log.deps import DecisionLogDep
from app.policy.denies import errors_document
from app.policy.tool import MissingCapability

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["decisions"])
batch_router = APIRouter(prefix="/v1", route_class=BatchRoute, tags=["decisions"])


def _json(body: object) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


@router.post("/authorize-tool", response_model=DecisionOut, responses=errors(404),
             summary="May this tool run, in this plan, with this context?")
async def authorize_tool(body: AuthorizeIn, pipeline: PipelineDep,
                         decision_log: DecisionLogDep, caller: CallerDep,
                         principal: PrincipalDep) -> Response:
    """A deny is a successful decision (HTTP 200 with `allowed: false` and `deny`).
    The answer is sent only once the decision is recorded; otherwise 503.

    This route is the OpenAPI declaration of the pipeline (app/authorize/pipeline.py),
    which `toolgate serve` runs from its transports ahead of FastAPI; it serves the
    requests of TOOLGATE_FAST_PATH=false (and of any other ASGI server) through the same
    pipeline, and nothing else differs."""
    decided = pipeline.decide(body, principal, caller)
    if type(decided) is NeedsIO:
        decided = await pipeline.finish(decided)
    await record_decisions(decision_log, [decided.record])
    return Response(decided.body, media_type="application/json")


@batch_router.post("/authorize-tools", response_model=DecisionBatchOut, responses=errors(404),
                   summary="Up to 100 decisions, answered in order")
async def authorize_tools(body: AuthorizeBatchIn, pipeline: PipelineDep,
                          decision_log: DecisionLogDep, caller: CallerDep,
                          principal: PrincipalDep) -> Response:
    """Body `{"requests": [...]}` (or a bare JSON list); answer `{"items": [...]}` in order.
    The batch is all-or-nothing: an item that is not a valid request fails the whole batch
    (the error names its index), and the answer is sent once every item is recorded."""
    for index, item in enumerate(body.requests):
        try:
            await pipeline.check(item, principal)
        except ToolgateError as refused:
            refused.details["index"] = index
            raise
    decided = []
    for index, item in enumerate(body.requests):
        try:
            one = pipeline.decide(item, principal, caller)
            decided.append(await pipeline.finish(one) if type(one) is NeedsIO else one)
        except MissingCapability as missing:
            raise MissingCapability([f"requests.{index}.{f}" for f in missing.fields]) from None
    await record_decisions(decision_log, [one.record for one in decided])
    return _json({"items": [one.answer for one in decided]})


@router.get("/errors", summary="The error hierarchy and deny codes")
async def list_errors() -> Response:
    return _json(errors_document())
