"""One authorize decision: gather the plan's lock and the registry's word, run the core.

This is the hot path. On a known plan it reads nothing from the database.
"""

from __future__ import annotations

from typing import Any

from uuid_utils import uuid7

from app.api.schemas import AuthorizeIn
from app.plans import PlanCache, load_lock
from app.policy.checks import evaluate
from app.policy.model import Layer


def new_decision_id() -> str:
    """Time-ordered (UUIDv7), so the decision log sorts by id as it sorts by time."""
    return str(uuid7())


async def decide(request: AuthorizeIn, *, sessions: Any, cache: PlanCache) -> dict[str, Any]:
    if request.plan_id is not None:
        lock = cache.get(request.plan_id)
        if lock is None:
            async with sessions() as session:
                lock = await load_lock(session, cache, request.plan_id)
        profile = lock.safety
        summary: dict[str, Any] | None = lock.summary
        label: str | None = lock.plan_id
        stored_read_only = lock.read_only
    else:
        profile = request.safety_profile
        summary = (
            {"provenance": "inline", "name": None, "version": None, "is_default": False}
            if profile is not None else None
        )
        label = request.context.plan_id
        stored_read_only = False

    tool = request.core_tool(None)
    context = request.core_context(plan_id=label, stored_read_only=stored_read_only)
    verdict = evaluate(tool, context, profile, layer=Layer(request.layer),
                       explain=request.explain)
    return {
        "decision_id": new_decision_id(),
        "allowed": verdict.allowed,
        "deny": verdict.deny.as_dict() if verdict.deny is not None else None,
        "plan_id": label,
        "profile": summary,
        "checks": [c.as_dict() for c in verdict.checks] if verdict.checks is not None else None,
    }
