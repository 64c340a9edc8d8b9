"""Project isolation for the routes whose resource is only known after a lookup.

Rule (docs/auth.md "Isolation"): a plan, action or decision of a project outside the key's
scope is answered exactly as one that does not exist (same status, code and message), so
its existence does not leak. Routes with a `{project}` path parameter are handled once in
`app.auth.deps.authorize`.
"""

from __future__ import annotations

from typing import Any

from app.auth.keys import Principal
from app.auth.roles import Role
from app.kit.errors import Forbidden, NotFound
from app.plans.service import PlanLock


def plan_not_found(plan_id: str) -> NotFound:
    # The very words of app.plans.service.load_lock and the plan routes for a missing plan.
    return NotFound(f"plan '{plan_id}' does not exist", plan_id=plan_id)


def action_not_found(action_id: str) -> NotFound:
    return NotFound(f"action '{action_id}' does not exist", action_id=action_id)


def require_plan(principal: Principal, plan_id: str, project: str | None) -> None:
    if not principal.sees(project):
        raise plan_not_found(plan_id)


def require_action(principal: Principal, action_id: str, project: str | None) -> None:
    if not principal.sees(project):
        raise action_not_found(action_id)


def require_inline_allowed(principal: Principal, allowed: bool, *, what: str) -> None:
    """`allow_inline_profiles = false`: only admins may bring their own profile."""
    if not allowed and principal.role is not Role.ADMIN:
        raise Forbidden(
            f"{what} is disabled for non-admin keys (allow_inline_profiles is false): "
            "name a plan instead", code="inline_profile_forbidden",
        )


async def check_authorize(request: Any, principal: Principal, *, state: Any) -> None:
    """Before a decision: the plan must be in the key's projects, and a stateless request
    is refused to non-admins when inline profiles are off (no profile at all is laxer
    than any inline one, so it is refused too)."""
    lock: PlanLock | None = None
    if request.plan_id is not None and principal.scoped:
        lock = await state.plan_cache.fetch(state.sessions, request.plan_id)
    check_scope(request, principal, lock,
                allow_inline=state.settings.allow_inline_profiles)


def check_scope(request: Any, principal: Principal, lock: PlanLock | None, *,
                allow_inline: bool) -> None:
    """check_authorize with the plan's lock at hand (needed only for a scoped key)."""
    if request.plan_id is None:
        require_inline_allowed(principal, allow_inline,
                               what="a stateless request (no plan_id)")
    elif principal.scoped:
        assert lock is not None, "a scoped key's plan check needs the plan's lock"
        require_plan(principal, request.plan_id, lock.project)
