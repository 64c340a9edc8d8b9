"""Decisions: /v1/authorize-tool, /v1/authorize-tools, /v1/errors."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from app.auth.deps import PrincipalDep
from app.auth.scope import check_authorize
from app.authorize.schemas import AuthorizeBatchIn, AuthorizeIn, DecisionBatchOut, DecisionOut
from app.authorize.service import decide
from app.decisions.audit import record_decisions
from app.kit.deps import CallerDep, State
from app.kit.errors import ToolgateError
from app.kit.middleware import BatchRoute, JSONRoute
from app.policy.checks import MissingCapability
from app.policy.denies import errors_document

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["decisions"])
batch_router = APIRouter(prefix="/v1", route_class=BatchRoute, tags=["decisions"])


def _json(body: object) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


@router.post("/authorize-tool", response_model=DecisionOut,
             summary="May this tool run, in this plan, with this context?")
async def authorize_tool(body: AuthorizeIn, state: State, caller: CallerDep,
                         principal: PrincipalDep) -> Response:
    """A deny is a successful decision (HTTP 200 with `allowed: false` and `deny`).
    The answer is sent only once the decision is recorded; otherwise 503."""
    await check_authorize(body, principal, state=state)
    response, record = await decide(body, sessions=state.sessions, cache=state.plan_cache,
                                    registry=state.registry,
                                    masked=state.settings.masked, caller=caller)
    await record_decisions(state.decision_log, [record])
    return _json(response)


@batch_router.post("/authorize-tools", response_model=DecisionBatchOut,
                   summary="Up to 100 decisions, answered in order")
async def authorize_tools(body: AuthorizeBatchIn, state: State,
                          caller: CallerDep, principal: PrincipalDep) -> Response:
    """Body `{"requests": [...]}` (or a bare JSON list); answer `{"items": [...]}` in order.
    The batch is all-or-nothing: an item that is not a valid request fails the whole batch
    (the error names its index), and the answer is sent once every item is recorded."""
    for index, item in enumerate(body.requests):
        try:
            await check_authorize(item, principal, state=state)
        except ToolgateError as refused:
            refused.details["index"] = index
            raise
    decided = []
    for index, item in enumerate(body.requests):
        try:
            decided.append(await decide(item, sessions=state.sessions, cache=state.plan_cache,
                                        registry=state.registry,
                                        masked=state.settings.masked, caller=caller))
        except MissingCapability as missing:
            raise MissingCapability([f"requests.{index}.{f}" for f in missing.fields]) from None
    await record_decisions(state.decision_log, [record for _, record in decided])
    return _json({"items": [response for response, _ in decided]})


@router.get("/errors", summary="The error hierarchy and deny codes")
async def list_errors() -> Response:
    return _json(errors_document())
