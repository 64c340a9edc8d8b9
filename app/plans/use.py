"""Plan use for a caller (SPEC §2, §4 `POST /v1/plans`): the scope checks, the lock, and its
audit record in the caller's transaction. The route and the coding-agent hooks (app/hooks,
a plan per agent session) both go through `plan_use`."""

from __future__ import annotations

from uuid import uuid4

from sqlalchemy.ext.asyncio import AsyncSession

from app.auth.keys import Principal
from app.auth.roles import Role
from app.auth.scope import action_not_found, require_inline_allowed
from app.edge.errors import Conflict
from app.kit.caller import Caller
from app.log.audit import record_in_transaction
from app.plans import repository as plan_repo
from app.plans.schemas import PlanIn
from app.plans.service import use_plan
from app.plans.tables import Plan
from app.profiles import service as profile_service


async def plan_use(session: AsyncSession, body: PlanIn, *, principal: Principal,
                   caller: Caller, allow_inline_profiles: bool) -> tuple[Plan, bool]:
    """(the plan, whether this call created it). Raises as the route answers: 403 for an
    inline profile the key may not bring, 404 for an action outside the key's projects,
    409 for a plan_id taken by another request."""
    if body.safety_profile is not None:
        require_inline_allowed(principal, allow_inline_profiles,
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
        # An agent can tighten, never loosen: a non-admin key's plan-level profile must be
        # no looser than what the action resolves to (403 profile_loosening_forbidden).
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
    return plan, created


async def _check_plan_use(session: AsyncSession, principal: Principal, body: PlanIn) -> None:
    """The action must be in the key's projects (else: as if it did not exist). A plan_id
    taken in another project cannot be answered as missing, since it cannot be created
    either: it is a conflict, without a word about the plan that holds it."""
    action = await profile_service.get_action(session, body.action_id)
    if action is None or not principal.sees(action.project):
        raise action_not_found(body.action_id)
    if body.plan_id is not None:
        existing = await plan_repo.get_plan(session, body.plan_id)
        if existing is not None and not principal.sees(existing.project):
            raise Conflict(f"plan_id '{body.plan_id}' is not available",
                           code="plan_conflict", plan_id=body.plan_id)
