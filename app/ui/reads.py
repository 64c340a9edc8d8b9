"""What the operators' page reads beyond the feature routes (docs/ui.md "The page's reads"):
who is behind the key ids in records, the deny an approval was asked by, who created a
plan, the approvals waiting now, and the outcomes of a page of decisions. Each reads
through the owning feature's service or queries and answers within the key's projects."""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, StringConstraints

from app.approvals.deps import ApprovalsDep
from app.auth import repository as keys_repo
from app.auth.deps import PrincipalDep
from app.auth.keys import ADMIN_TOKEN_ID
from app.decisions import queries
from app.edge.errors import NotFound
from app.edge.openapi import errors
from app.kit.deps import NameParam, Session
from app.kit.schemas import NAME_PATTERN
from app.ledger.service import outcomes_of
from app.log.records import iso
from app.plans import repository as plan_repo

router = APIRouter(prefix="/v1", tags=["operators' page"])

KeyId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._:-]{1,64}$")]
DecisionId = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9-]{1,36}$")]
MAX_IDS = 100


class Who(BaseModel):
    key_id: str
    name: str
    principal: str
    role: str
    revoked: bool


class WhoList(BaseModel):
    items: list[Who]


class Creator(BaseModel):
    plan_id: str
    key_id: str | None
    created_at: str | None
    who: Who | None


class PendingApprovals(BaseModel):
    pending: int
    oldest_requested_at: str | None


class OutcomeList(BaseModel):
    items: dict[str, dict[str, Any]]


def _json(body: object) -> Response:
    return Response(orjson.dumps(body), media_type="application/json")


async def _who(session: Session, key_ids: list[str]) -> dict[str, dict[str, Any]]:
    found = {row.id: {"key_id": row.id, "name": row.name,
                      "principal": row.principal or row.id, "role": row.role,
                      "revoked": row.revoked_at is not None}
             for row in await keys_repo.by_ids(session, sorted(set(key_ids)))}
    if ADMIN_TOKEN_ID in key_ids:  # TOOLGATE_ADMIN_TOKEN: no stored key (docs/auth.md)
        found[ADMIN_TOKEN_ID] = {"key_id": ADMIN_TOKEN_ID, "name": "TOOLGATE_ADMIN_TOKEN",
                                 "principal": ADMIN_TOKEN_ID, "role": "admin",
                                 "revoked": False}
    return found


@router.get("/principals", response_model=WhoList,
            summary="Who is behind these key ids: each key's name, principal and role")
async def principals(session: Session,
                     key_id: Annotated[list[KeyId], Query(max_length=MAX_IDS)]) -> dict:
    """Up to 100 `key_id`s, as records, approvals and plans name them; ids of no key are
    left out. Never a key's secret, prefix or projects."""
    found = await _who(session, key_id)
    return {"items": [found[k] for k in dict.fromkeys(key_id) if k in found]}


@router.get("/approvals/{approval_id}/decision", responses=errors(404),
            summary="The denied call an approval was asked for, as the log holds it")
async def approval_decision(approval_id: str, session: Session, principal: PrincipalDep,
                            approvals: ApprovalsDep) -> Response:
    """What an approver grants: the decision that created the approval (tool, arguments
    and context as logged, masked; the deny's message), as `GET /v1/decisions/{id}` shows
    it. 404 for an approval outside the key's projects, or once retention pruned the
    decision."""
    approval_id = approval_id[:64]
    row = await approvals.get(session, approval_id)
    if row is None or not principal.sees(row.project):
        raise NotFound(f"approval '{approval_id}' does not exist", approval_id=approval_id)
    record = await queries.first_of_plan(
        session, row.plan_id, kind="authorize",
        contains=orjson.dumps({"approval_id": approval_id}).decode()[1:-1])
    if record is None:
        raise NotFound(f"the decision that asked for approval '{approval_id}' is no longer "
                       "in the log", approval_id=approval_id)
    return _json(queries.shown(record))


@router.get("/plans/{plan_id}/creator", response_model=Creator, responses=errors(404),
            summary="Which key created a plan, from the plan's first record in the log")
async def plan_creator(plan_id: NameParam, session: Session,
                       principal: PrincipalDep) -> dict:
    plan = await plan_repo.get_plan(session, plan_id)
    if plan is None or not principal.sees(plan.project):
        raise NotFound(f"plan '{plan_id}' does not exist", plan_id=plan_id)
    record = await queries.first_of_plan(session, plan_id, kind="plan")
    if record is None:  # pruned by retention
        return {"plan_id": plan_id, "key_id": None, "created_at": None, "who": None}
    who = await _who(session, [record.key_id]) if record.key_id else {}
    return {"plan_id": plan_id, "key_id": record.key_id,
            "created_at": iso(record.created_at), "who": who.get(record.key_id or "")}


@router.get("/approval-stats", response_model=PendingApprovals,
            summary="How many approvals wait for a person, and since when")
async def approval_stats(
    session: Session, principal: PrincipalDep, approvals: ApprovalsDep,
    project: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
) -> dict:
    count, oldest = await approvals.pending_summary(
        session, projects=principal.project_list(), project=project)
    return {"pending": count, "oldest_requested_at": iso(oldest) if oldest else None}


@router.get("/outcomes", response_model=OutcomeList,
            summary="The reported outcomes of up to 100 decisions (a page of the list)")
async def outcomes(session: Session, principal: PrincipalDep,
                   decision_id: Annotated[list[DecisionId], Query(max_length=MAX_IDS)]
                   ) -> dict:
    """Keyed by decision id; decisions without a report (or outside the key's projects)
    are left out. Each outcome as `GET /v1/decisions/{id}` shows it."""
    return {"items": await outcomes_of(session, list(dict.fromkeys(decision_id)),
                                       projects=principal.project_list())}
