"""Plan use, resolution, plan transitions (SPEC §2 "Plans and the lock", §4)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Annotated
from uuid import uuid4

import orjson
from fastapi import APIRouter, Query, Response

from app.auth.deps import PrincipalDep
from app.auth.keys import Principal
from app.auth.roles import Role
from app.auth.routing import JSONRoute
from app.auth.scope import (
    action_not_found,
    plan_not_found,
    require_action,
    require_inline_allowed,
    require_plan,
)
from app.decisions.audit import audit_change, record_in_transaction
from app.kit.deps import CallerDep, NameParam, Session, SettingsDep
from app.kit.errors import Conflict, InvalidInput, NotFound
from app.kit.openapi import errors
from app.kit.schemas import NAME_PATTERN
from app.ledger.service import plan_ledger
from app.plans import repository as plan_repo
from app.plans.deps import PlanCacheDep
from app.plans.schemas import (
    PlanIn,
    PlanList,
    PlanOut,
    PlanWithLedgerOut,
    ResolveIn,
    ResolveOut,
)
from app.plans.service import (
    PlanLock,
    get_action_or_404,
    load_lock,
    plan_level,
    plan_out,
    resolve_stored,
    use_plan,
)
from app.policy.checks import check_plan_transition
from app.profiles import repository as profile_repo

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["plans"])


@router.post("/plans", response_model=PlanOut, status_code=201,
             responses={200: {"model": PlanOut, "description": "The same request again"},
                        **errors(404, 409, s409="plan_id exists with a different request")})
async def create_plan(body: PlanIn, session: Session, response: Response, settings: SettingsDep,
                      caller: CallerDep, principal: PrincipalDep) -> dict:
    if body.safety_profile is not None:
        require_inline_allowed(principal, settings.allow_inline_profiles,
                               what="an inline safety_profile")
    if principal.scoped:
        await _check_plan_use(session, principal, body)
    plan, created = await use_plan(
        session,
        plan_id=body.plan_id or str(uuid4()),
        action_id=body.action_id,
        automation_profile=body.automation_profile,
        safety_profile=body.safety_profile,
        generated_id=body.plan_id is None,
        tighten_only=principal.role is not Role.ADMIN,
    )
    if created:
        await record_in_transaction(
            session, caller, "plan", project=plan.project, plan_id=plan.plan_id,
            action_id=plan.action_id, provenance=plan.provenance,
            profile_name=plan.profile_name, profile_version=plan.profile_version,
            detail={"safety_profile": plan.safety, "read_only": plan.read_only,
                    "is_default": plan.is_default, "request": plan.request},
        )
    response.status_code = 201 if created else 200
    return plan_out(plan)


async def _check_plan_use(session: Session, principal: Principal, body: PlanIn) -> None:
    """The action must be in the key's projects (else: as if it did not exist). A plan_id
    taken in another project cannot be answered as missing, since it cannot be created
    either: it is a conflict, without a word about the plan that holds it."""
    action = await profile_repo.get_action(session, body.action_id)
    if action is None or not principal.sees(action.project):
        raise action_not_found(body.action_id)
    if body.plan_id is not None:
        existing = await plan_repo.get_plan(session, body.plan_id)
        if existing is not None and not principal.sees(existing.project):
            raise Conflict(f"plan_id '{body.plan_id}' is not available",
                           code="plan_conflict", plan_id=body.plan_id)


def _encode_cursor(created_at: datetime, plan_id: str) -> str:
    raw = orjson.dumps([created_at.isoformat(), plan_id])
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        moment, plan_id = orjson.loads(base64.urlsafe_b64decode(padded))
        parsed = datetime.fromisoformat(moment)
        if parsed.tzinfo is None:
            raise ValueError(moment)
        return parsed.astimezone(UTC), str(plan_id)
    except Exception:  # any malformed cursor is the client's input error
        raise InvalidInput("cursor is not valid", code="invalid_input",
                           fields=[{"field": "cursor", "message": "not a cursor from a previous "
                                    "page", "type": "value_error"}]) from None


@router.get("/plans", response_model=PlanList)
async def list_plans(
    session: Session,
    principal: PrincipalDep,
    action_id: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
    project: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> dict:
    before = _decode_cursor(cursor) if cursor else None
    rows = await plan_repo.list_plans(session, action_id=action_id, project=project,
                                 before=before, limit=limit + 1,
                                 projects=principal.project_list())
    page = rows[:limit]
    next_cursor = (_encode_cursor(page[-1].created_at, page[-1].plan_id)
                   if len(rows) > limit else None)
    return {"items": [plan_out(p) for p in page], "next_cursor": next_cursor}


@router.get("/plans/{plan_id}", response_model=PlanWithLedgerOut, responses=errors(404))
async def get_plan(plan_id: NameParam, session: Session, principal: PrincipalDep) -> dict:
    plan = await plan_repo.get_plan(session, plan_id)
    if plan is None or not principal.sees(plan.project):
        raise plan_not_found(plan_id)
    return {**plan_out(plan), "ledger": await plan_ledger(session, plan_id)}


async def _transition(plan_id: str, transition: str, target: str, session: Session,
                      caller: CallerDep, principal: Principal) -> dict:
    plan = await plan_repo.lock_plan(session, plan_id)
    if plan is None or not principal.sees(plan.project):
        raise plan_not_found(plan_id)
    refused = check_plan_transition(plan_id, read_only=plan.read_only, transition=transition)
    if refused is not None:  # before any state transition
        raise Conflict(refused.message, code=refused.code, error=refused.error,
                       hierarchy=list(refused.hierarchy), **refused.details)
    before = plan.state
    await plan_repo.set_plan_state(session, plan, target)
    await audit_change(session, caller, resource="plan", name=plan_id, project=plan.project,
                       operation=transition, before={"state": before}, after={"state": target})
    return plan_out(plan)


@router.post("/plans/{plan_id}/execute", response_model=PlanOut,
             responses=errors(404, 409, s409="PlanReadOnlyError (code plan_read_only)"))
async def execute_plan(plan_id: NameParam, session: Session, caller: CallerDep,
                       principal: PrincipalDep) -> dict:
    return await _transition(plan_id, "execute", "executing", session, caller, principal)


@router.post("/plans/{plan_id}/lifecycle-apply", response_model=PlanOut,
             responses=errors(404, 409, s409="PlanReadOnlyError (code plan_read_only)"))
async def lifecycle_apply(plan_id: NameParam, session: Session, caller: CallerDep,
                          principal: PrincipalDep) -> dict:
    return await _transition(plan_id, "lifecycle-apply", "applied", session, caller,
                             principal)


def _lock_out(lock: PlanLock) -> dict:
    return {"safety_profile": lock.safety.as_dict(), **lock.summary}


@router.post("/resolve", response_model=ResolveOut, responses=errors(404))
async def resolve(body: ResolveIn, session: Session, plans: PlanCacheDep, caller: CallerDep,
                  principal: PrincipalDep) -> dict:
    if body.plan_id is not None:
        lock = await load_lock(session, plans, body.plan_id)
        require_plan(principal, body.plan_id, lock.project)
        answer = _lock_out(lock)
        await _record_resolve(session, caller, body, answer, project=lock.project,
                              plan_id=lock.plan_id, action_id=lock.action_id)
        return answer
    action = None
    project = body.project
    if body.action_id is not None:
        action = await get_action_or_404(session, body.action_id)
        require_action(principal, body.action_id, action.project)
        if body.project is not None and body.project != action.project:
            raise InvalidInput(
                f"project '{body.project}' differs from action '{action.action_id}''s project "
                f"'{action.project}'",
                fields=[{"field": "project", "message": "differs from the action's project",
                         "type": "value_error"}],
            )
        project = action.project
    elif project is not None and not principal.sees(project):
        raise NotFound(f"project '{project}' does not exist", project=project)
    resolved = await resolve_stored(
        session, plan=plan_level(body.automation_profile, body.safety_profile),
        action=action, project=project,
    )
    answer = {"safety_profile": resolved.safety.as_dict(), **resolved.summary()}
    await _record_resolve(session, caller, body, answer, project=project, plan_id=None,
                          action_id=body.action_id)
    return answer


async def _record_resolve(session: Session, caller: CallerDep, body: ResolveIn, answer: dict,
                          *, project: str | None, plan_id: str | None,
                          action_id: str | None) -> None:
    await record_in_transaction(
        session, caller, "resolve", project=project, plan_id=plan_id, action_id=action_id,
        provenance=answer["provenance"], profile_name=answer["name"],
        profile_version=answer["version"],
        detail={"request": body.model_dump(exclude_none=True, mode="json"),
                "safety_profile": answer["safety_profile"], "is_default": answer["is_default"]},
    )
