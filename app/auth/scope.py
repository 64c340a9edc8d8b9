"""Project isolation for the routes whose resource is only known after a lookup.

Rule (docs/auth.md "Isolation"): a plan, action or decision of a project outside the key's
scope is answered exactly as one that does not exist (same status, code and message), so
its existence does not leak. Routes with a `{project}` path parameter are handled once in
`app.auth.deps.authorize`.
"""

from __future__ import annotations

from app.auth.keys import Principal
from app.auth.roles import Role
from app.edge.errors import Forbidden, NotFound


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
    """`allow_inline_profiles = false` (the default): only admins may create plans with a
    profile of their own."""
    if not allowed and principal.role is not Role.ADMIN:
        raise Forbidden(
            f"{what} is disabled for non-admin keys (allow_inline_profiles is false): "
            "name an action's configured profile instead", code="inline_profile_forbidden",
        )


def stateless_forbidden() -> Forbidden:
    """A request without plan_id by a key that may not send one (SPEC §9)."""
    return Forbidden(
        "requests without plan_id need an admin key or a key created with "
        '"stateless": true: name a plan instead', code="stateless_forbidden",
    )
