"""Outcome reports and the ledger's routes (SPEC §11)."""

from __future__ import annotations

import orjson
from fastapi import APIRouter, Response

from app.auth.deps import PrincipalDep
from app.auth.scope import plan_not_found
from app.edge.errors import NotFound, ToolgateError
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import CallerDep, NameParam, Session
from app.ledger import book
from app.ledger.deps import LedgerDep
from app.ledger.schemas import (
    CreditIn,
    OutcomeBatchIn,
    OutcomeBatchOut,
    OutcomeIn,
    OutcomeOut,
    PlanLedgerOut,
    ProjectLedgerOut,
)
from app.ledger.service import NO_PROJECT, plan_ledger, project_ledger
from app.log.audit import audit_change

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["outcomes and ledger"])


def _json(body: object, status: int = 200) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


REPORTED = errors(403, 404, 409, s409="the decision was a deny, or already has a different "
                                      "outcome")


@router.post("/decisions/{decision_id}/outcome", response_model=OutcomeOut, status_code=201,
             responses={200: {"description": "The same report again: the stored outcome",
                              "model": OutcomeOut}, **REPORTED},
             summary="Report what an allowed tool call did")
async def report_outcome(decision_id: str, body: OutcomeIn, principal: PrincipalDep,
                         caller: CallerDep, ledger: LedgerDep) -> Response:
    """201 for the first report, 200 for the same body again, 409 for a different one.
    Only the key that made the decision, or an admin, may report."""
    # Booked in one transaction of the ledger's own connection (app/ledger/book.py), not
    # the session.
    status, out = await book.report(ledger.book, decision_id, body, principal, caller)
    return _json(out, status)


@router.post("/outcomes", response_model=OutcomeBatchOut,
             summary="Report up to 100 outcomes, answered in order")
async def report_outcomes(body: OutcomeBatchIn, principal: PrincipalDep,
                          caller: CallerDep, ledger: LedgerDep) -> Response:
    """Each item is answered on its own (`status_code` as its single route would; `error`
    its error envelope's body): one refused item changes nothing of the others."""
    # Booked in one transaction, each item in a savepoint of its own (app/ledger/book.py).
    reports = [book.Report(item.decision_id, OutcomeIn.model_validate(
        item.model_dump(exclude={"decision_id"}, exclude_unset=True)), principal, caller)
        for item in body.outcomes]
    items = []
    for report, result in zip(reports, await ledger.book.book(reports, alone=False),
                              strict=True):
        if isinstance(result, ToolgateError):
            items.append({"decision_id": report.decision_id, "status_code": result.status,
                          "error": {"code": result.code, "message": result.message,
                                    "details": result.details}})
        else:
            items.append({"decision_id": report.decision_id, "status_code": result[0],
                          "outcome": result[1]})
    return _json({"items": items})


@router.get("/projects/{project}/ledger", response_model=ProjectLedgerOut,
            responses=errors(404), summary="A project's spend and holds over its plans")
async def get_project_ledger(project: NameParam, session: Session,
                             principal: PrincipalDep) -> Response:
    if not principal.sees(project):
        raise NotFound(f"project '{project}' does not exist", project=project)
    return _json(await project_ledger(session, project))


@router.post("/plans/{plan_id}/ledger/credit", response_model=PlanLedgerOut,
             responses=errors(404), summary="Lower a plan's spend (top up its budget)")
async def credit_plan(plan_id: NameParam, body: CreditIn, session: Session,
                      principal: PrincipalDep, caller: CallerDep,
                      ledger: LedgerDep) -> Response:
    plan = await ledger.plan_of(session, plan_id) if ledger.plan_of else None
    if plan is None or not principal.sees(plan.project):
        raise plan_not_found(plan_id)
    before = await plan_ledger(session, plan_id)
    await ledger.credit(session, amount=body.amount, plan_id=plan_id, project=plan.project)
    after = await plan_ledger(session, plan_id)
    await audit_change(session, caller, resource="ledger", name=plan_id,
                       project=plan.project, operation="credit",
                       before={"spent": before["spent"]},
                       after={"spent": after["spent"], "amount": body.amount,
                              "reason": body.reason})
    return _json(after)


@router.post("/projects/{project}/ledger/credit", response_model=ProjectLedgerOut,
             responses=errors(404), summary="Lower a project's spend (top up its budget)")
async def credit_project(project: NameParam, body: CreditIn, session: Session,
                         principal: PrincipalDep, caller: CallerDep,
                         ledger: LedgerDep) -> Response:
    if not principal.sees(project):
        raise NotFound(f"project '{project}' does not exist", project=project)
    before = await project_ledger(session, project)
    await ledger.credit(session, amount=body.amount, plan_id=None, project=project)
    after = await project_ledger(session, project)
    await audit_change(session, caller, resource="ledger", name=project or NO_PROJECT,
                       project=project, operation="credit",
                       before={"spent": before["spent"]},
                       after={"spent": after["spent"], "amount": body.amount,
                              "reason": body.reason})
    return _json(after)
