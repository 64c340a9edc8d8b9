"""Approvals (SPEC §10): the queue people work from, and their grants, rejections and
cancellations. Check 6 creates and uses approvals (app/authorize/service.py)."""

from __future__ import annotations

import asyncio
import base64
from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Response
from sqlalchemy import and_, or_, select
from starlette.background import BackgroundTask

from app.approvals.deps import ApprovalsDep
from app.approvals.schemas import ApprovalList, ApprovalOut, CancelIn, GrantIn, RejectIn, State
from app.approvals.service import LIVE_STATES, ApprovalService, approval_out, state_of
from app.approvals.tables import Approval
from app.auth import principals
from app.auth.deps import PrincipalDep
from app.auth.keys import Principal
from app.edge.errors import Conflict, Forbidden, InvalidInput, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, Session, Sessions
from app.kit.metrics import metric
from app.kit.schemas import NAME_PATTERN
from app.store.base import utcnow

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["approvals"])

NameQuery = Annotated[str | None, Query(pattern=NAME_PATTERN)]


def _json(body: object, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def not_found(approval_id: str) -> NotFound:
    return NotFound(f"approval '{approval_id}' does not exist", approval_id=approval_id)


def _cursor(approval_id: str) -> str:
    return base64.urlsafe_b64encode(f"a{approval_id}".encode()).decode().rstrip("=")


def _after(cursor: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith("a") or not 1 < len(raw) <= 37:
            raise ValueError(raw)
        return raw[1:]
    except Exception:
        raise InvalidInput("cursor is not valid", fields=[
            {"field": "cursor", "message": "not a cursor from a previous page",
             "type": "value_error"}]) from None


@router.get("/approvals", response_model=ApprovalList,
            summary="Approvals, newest first, filtered and paged")
async def list_approvals(
    session: Session,
    principal: PrincipalDep,
    state: State | None = None,
    project: NameQuery = None,
    plan_id: NameQuery = None,
    tool: NameQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> Response:
    """Within the key's projects. `state` is the state a reader sees: a pending or granted
    approval past its expiry is listed as expired."""
    now = utcnow()
    query = select(Approval)
    if state == "expired":
        query = query.where(or_(Approval.state == "expired",
                                and_(Approval.state.in_(LIVE_STATES),
                                     Approval.expires_at <= now)))
    elif state in LIVE_STATES:
        query = query.where(Approval.state == state, Approval.expires_at > now)
    elif state is not None:
        query = query.where(Approval.state == state)
    if project is not None:
        query = query.where(Approval.project == project)
    if principal.projects is not None:
        query = query.where(Approval.project.in_(principal.project_list() or []))
    if plan_id is not None:
        query = query.where(Approval.plan_id == plan_id)
    if tool is not None:
        query = query.where(Approval.tool == tool)
    if cursor is not None:
        query = query.where(Approval.approval_id < _after(cursor))
    rows = list((await session.execute(
        query.order_by(Approval.approval_id.desc()).limit(limit + 1))).scalars())
    items = [approval_out(row, now) for row in rows[:limit]]
    next_cursor = _cursor(rows[limit - 1].approval_id) if len(rows) > limit else None
    return _json({"items": items, "next_cursor": next_cursor})


async def _read(sessions: Sessions, approval_id: str, principal: Principal) -> Approval:
    async with sessions() as session:
        row = await session.get(Approval, approval_id)
    if row is None or not principal.sees(row.project):
        raise not_found(approval_id)
    return row


@router.get("/approvals/{approval_id}", response_model=ApprovalOut, responses=errors(404),
            summary="One approval; ?wait=S answers when it leaves pending")
async def get_approval(
    approval_id: str,
    sessions: Sessions,
    principal: PrincipalDep,
    approvals: ApprovalsDep,
    wait: Annotated[int | None, Query(ge=1, le=60)] = None,
) -> Response:
    """With `wait`, a pending approval is answered when it is decided (on any replica) or
    expires, or after `wait` seconds, whichever is first; no database connection is held
    while waiting."""
    approval_id = approval_id[:64]
    row = await _read(sessions, approval_id, principal)
    if wait is not None and state_of(row, utcnow()) == "pending":
        waits = metric("approval_waits")
        waits.inc()
        try:
            deadline = asyncio.get_running_loop().time() + wait
            while state_of(row, utcnow()) == "pending":
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                await approvals.wait(approval_id, remaining, until=row.expires_at)
                row = await _read(sessions, approval_id, principal)
        finally:
            waits.dec()
    return _json(approval_out(row))


async def _decidable(session: Session, approvals: ApprovalService, approval_id: str,
                     principal: Principal, *, states: tuple[str, ...]) -> Approval:
    row = await approvals.get(session, approval_id)
    if row is None or not principal.sees(row.project):
        raise not_found(approval_id)
    me = principal.principal_name or principal.key_id
    if row.requested_by == principal.key_id or principals.same(row.requested_principal, me):
        raise Forbidden(
            f"approval '{approval_id}' was requested by this key or another key of the same "
            f"principal ('{me}'): a person other than the requester must decide it",
            code="self_approval_forbidden", approval_id=approval_id)
    state = state_of(row, utcnow())
    if state not in states:
        raise Conflict(f"approval '{approval_id}' is {state}: it can no longer be decided",
                       code="approval_decided", approval_id=approval_id, state=state)
    return row


async def _decide(session: Session, approvals: ApprovalService, row: Approval, *,
                  to: str, caller: CallerDep, **values: object) -> Response:
    if not await approvals.decide(session, row, to=to, caller=caller, **values):  # type: ignore[arg-type]
        state = state_of(row, utcnow())
        raise Conflict(f"approval '{row.approval_id}' was decided meanwhile",
                       code="approval_decided", approval_id=row.approval_id, state=state)
    # Waiters on this process are woken once the change is committed (the session
    # commits when the route returns, before the background task runs); other replicas'
    # by the NOTIFY sent in the same transaction.
    return Response(orjson.dumps(approval_out(row)), media_type="application/json",
                    background=BackgroundTask(approvals.wake, row.approval_id))


DECIDED = errors(403, 404, 409, s409="the approval was already decided, or has expired")


@router.post("/approvals/{approval_id}/grant", response_model=ApprovalOut, responses=DECIDED,
             summary="Grant a pending approval: the agent's same request is then allowed")
async def grant_approval(approval_id: str, session: Session, principal: PrincipalDep,
                         approvals: ApprovalsDep, caller: CallerDep,
                         body: GrantIn | None = None) -> Response:
    """`uses` allowed calls of the bound request within `ttl_seconds` (default 1 and 900)."""
    body = body or GrantIn()
    row = await _decidable(session, approvals, approval_id[:64], principal,
                           states=("pending",))
    return await _decide(session, approvals, row, to="granted", caller=caller,
                         note=body.note, ttl_seconds=body.ttl_seconds, uses=body.uses)


@router.post("/approvals/{approval_id}/reject", response_model=ApprovalOut, responses=DECIDED,
             summary="Reject a pending approval: the binding stays rejected for the plan")
async def reject_approval(approval_id: str, body: RejectIn, session: Session,
                          principal: PrincipalDep, approvals: ApprovalsDep,
                          caller: CallerDep) -> Response:
    row = await _decidable(session, approvals, approval_id[:64], principal,
                           states=("pending",))
    return await _decide(session, approvals, row, to="rejected", caller=caller,
                         reason=body.reason)


@router.post("/approvals/{approval_id}/cancel", response_model=ApprovalOut, responses=DECIDED,
             summary="Withdraw a pending or granted approval")
async def cancel_approval(approval_id: str, session: Session, principal: PrincipalDep,
                          approvals: ApprovalsDep, caller: CallerDep,
                          body: CancelIn | None = None) -> Response:
    body = body or CancelIn()
    row = await _decidable(session, approvals, approval_id[:64], principal,
                           states=("pending", "granted"))
    return await _decide(session, approvals, row, to="cancelled", caller=caller,
                         reason=body.reason)
