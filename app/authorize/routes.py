"""Decisions: /v1/authorize-tool, /v1/authorize-tools, /v1/errors."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from app.auth.deps import PrincipalDep
from app.authorize.deps import AuthorizerDep
from app.authorize.schemas import AuthorizeBatchIn, AuthorizeIn, DecisionBatchOut, DecisionOut
from app.authorize.service import check_authorize
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
async def authorize_tool(body: AuthorizeIn, authorizer: AuthorizerDep,
                         decision_log: DecisionLogDep, caller: CallerDep,
                         principal: PrincipalDep) -> Response:
    """A deny is a successful decision (HTTP 200 with `allowed: false` and `deny`).
    The answer is sent only once the decision is recorded; otherwise 503.

    `toolgate serve` answers this route in app/authorize/hotpath.py, by the same steps
    (Authorizer.decide); this route serves the OpenAPI document, any other ASGI server's
    requests with TOOLGATE_FAST_PATH=false, and nothing else differs."""
    response, record = await authorizer.decide(body, principal, caller)
    await record_decisions(decision_log, [record])
    return _json(response)


@batch_router.post("/authorize-tools", response_model=DecisionBatchOut, responses=errors(404),
                   summary="Up to 100 decisions, answered in order")
async def authorize_tools(body: AuthorizeBatchIn, authorizer: AuthorizerDep,
                          decision_log: DecisionLogDep, caller: CallerDep,
                          principal: PrincipalDep) -> Response:
    """Body `{"requests": [...]}` (or a bare JSON list); answer `{"items": [...]}` in order.
    The batch is all-or-nothing: an item that is not a valid request fails the whole batch
    (the error names its index), and the answer is sent once every item is recorded."""
    for index, item in enumerate(body.requests):
        try:
            await check_authorize(item, principal, plans=authorizer.plans,
                                  sessions=authorizer.sessions)
        except ToolgateError as refused:
            refused.details["index"] = index
            raise
    decided = []
    for index, item in enumerate(body.requests):
        try:
            decided.append(await authorizer.decide(item, principal, caller))
        except MissingCapability as missing:
            raise MissingCapability([f"requests.{index}.{f}" for f in missing.fields]) from None
    await record_decisions(decision_log, [record for _, record in decided])
    return _json({"items": [response for response, _ in decided]})


@router.get("/errors", summary="The error hierarchy and deny codes")
async def list_errors() -> Response:
    return _json(errors_document())
