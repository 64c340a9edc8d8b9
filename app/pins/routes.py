"""Pins of the gateway's tool definitions (SPEC §19): GET /v1/gateway/pins, GET/PUT/DELETE
/v1/gateway/pins/{server}/{tool} (admins change them, audited), and POST
.../{server}/{tool}/seen, where a gateway reports the definition it sees (an agent key)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from app.auth.deps import PrincipalDep
from app.edge.bodies import bad
from app.edge.errors import NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, Session, Sessions
from app.log.deps import DecisionLogDep
from app.pins import repository as pins_repo
from app.pins import service as pins_service
from app.pins.digest import NotCanonical, digest
from app.pins.schemas import (
    SERVER_PATTERN,
    TOOL_PATTERN,
    PinIn,
    PinList,
    PinOut,
    SeenAnswer,
    SeenIn,
)
from app.plans import service as plan_service
from app.plans.deps import PlanCacheDep
from app.store.engine import WRITE_OPTION

router = APIRouter(prefix="/v1/gateway", route_class=JSONRoute, tags=["gateway pins"])

ServerParam = Annotated[str, Path(pattern=SERVER_PATTERN)]
ToolParam = Annotated[str, Path(pattern=TOOL_PATTERN)]


def _nul_field(value: Any, path: str) -> str | None:
    """The first field holding a NUL character (PostgreSQL stores none), or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, item in items:
        if isinstance(key, str) and "\x00" in key:
            return f"{path}.{key}"
        if (found := _nul_field(item, f"{path}.{key}")) is not None:
            return found
    return None


def _definition(tool: str, definition: Any) -> tuple[dict[str, Any], str]:
    """The definition as stored and its digest, or 422 naming the field."""
    value = definition.model_dump()
    if value["name"] != tool:
        raise bad("definition.name", f"must be the tool of the path ({tool!r})", "value_error")
    if (field := _nul_field(value, "definition")) is not None:
        raise bad(field, "must not contain NUL (\\u0000) characters", "value_error")
    try:
        return value, digest(value)
    except NotCanonical as exc:
        raise bad("definition", str(exc), "value_error") from None


@router.get("/pins", response_model=PinList)
async def list_pins(session: Session,
                    server: Annotated[str | None, Query(pattern=SERVER_PATTERN)] = None) -> dict:
    """Every pin (or one server's), by server and tool, with the definition last seen
    where it differs (`status`: `pinned`, `changed`, or `pending` = never pinned)."""
    rows = await pins_repo.list_pins(session, server)
    return {"items": [pins_service.pin_out(row) for row in rows]}


@router.get("/pins/{server}/{tool}", response_model=PinOut, responses=errors(404))
async def get_pin(server: ServerParam, tool: ToolParam, session: Session) -> dict:
    row = await pins_repo.get_pin(session, server, tool)
    if row is None:
        raise NotFound(f"no pin for {server}.{tool}", server=server, tool=tool)
    return pins_service.pin_out(row)


@router.put("/pins/{server}/{tool}", response_model=PinOut,
            responses={201: {"model": PinOut, "description": "Created"}})
async def put_pin(server: ServerParam, tool: ToolParam, body: PinIn, session: Session,
                  response: Response, caller: CallerDep) -> dict:
    """Pin the tool to `digest`: accept the definition a gateway saw (its digest is in the
    pin's `seen`), or give the definition itself. Gateways list and pass its calls once
    their definition has this digest."""
    definition = None
    if body.definition is not None:
        definition, computed = _definition(tool, body.definition)
        if computed != body.digest:
            raise bad("digest", f"is not the definition's ({computed})", "value_error")
    row = await pins_repo.lock_pin(session, server, tool)
    row, created = await pins_service.put_pin(session, caller, row, server=server, tool=tool,
                                              digest=body.digest, definition=definition)
    response.status_code = 201 if created else 200
    return pins_service.pin_out(row)


@router.delete("/pins/{server}/{tool}", status_code=204, responses=errors(404))
async def delete_pin(server: ServerParam, tool: ToolParam, session: Session,
                     caller: CallerDep) -> Response:
    """Forget the pin and what was seen: under `first_use` the next definition a gateway
    sees is pinned; under `approve` the tool waits for an admin again."""
    row = await pins_repo.lock_pin(session, server, tool)
    if row is None:
        raise NotFound(f"no pin for {server}.{tool}", server=server, tool=tool)
    await pins_service.delete_pin(session, caller, row)
    return Response(status_code=204)


@router.post("/pins/{server}/{tool}/seen", response_model=SeenAnswer, responses=errors(404))
async def report_seen(server: ServerParam, tool: ToolParam, body: SeenIn, sessions: Sessions,
                      caller: CallerDep, principal: PrincipalDep, plans: PlanCacheDep,
                      decision_log: DecisionLogDep) -> dict:
    """A gateway reports the definition its upstream lists (`mode`: its server's `pin`).
    `match`: it is the pinned one. With `call` and no match, the call is refused here:
    `decision` is the recorded deny (`tool_not_activated`, `details.pin`)."""
    definition, seen = _definition(tool, body.definition)
    project = action_id = None
    # Its own transaction, committed before a deny is recorded: on SQLite the log writer
    # waits for the write lock this transaction holds.
    async with sessions() as session, session.begin():
        await session.connection(execution_options={WRITE_OPTION: True})
        if body.call is not None:
            # Checked first: a plan the key does not see is 404 and nothing is stored.
            plan = await plan_service.load_lock(session, plans, body.call.plan_id)
            if not principal.sees(plan.project):
                raise NotFound(f"plan '{body.call.plan_id}' does not exist",
                               plan_id=body.call.plan_id)
            project, action_id = plan.project, plan.action_id
        row, match = await pins_service.report_seen(session, caller, server=server, tool=tool,
                                                    definition=definition, digest=seen,
                                                    mode=body.mode)
        answer: dict[str, Any] = {"match": match, "digest": seen,
                                  "pin": pins_service.pin_out(row), "decision": None}
        pinned = row.digest
    if body.call is not None and not match:
        answer["decision"] = await pins_service.refuse_call(
            decision_log, caller, server=server, tool=tool, pinned=pinned, seen=seen,
            plan_id=body.call.plan_id, project=project, action_id=action_id,
            args=body.call.args)
    return answer
