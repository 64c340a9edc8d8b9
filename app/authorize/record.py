"""The `detail` of an authorize decision's log record: what was decided on (masked where
TOOLGATE_MASKED_KEYS says so), and what replay (SPEC §12) needs to decide it again."""

from __future__ import annotations

from typing import Any

from app.authorize.schemas import AuthorizeIn
from app.authorize.wire import AuthorizeWire
from app.kit.canonical import canonical_sha256
from app.log.records import mask
from app.policy.model import Tool


def _capability(cap: Any) -> dict[str, Any] | None:
    if cap is None:
        return None
    return {"writes": cap.writes, "read_only": cap.read_only,
            "checkpointable": cap.checkpointable, "unsafe": cap.unsafe}


def record_detail(request: AuthorizeIn | AuthorizeWire, tool: Tool, *,
            context_masked: frozenset[str], deny: Any, stateless: bool) -> dict[str, Any]:
    ctx = request.context
    t = request.tool
    args = mask(tool.args, context_masked)
    metadata = mask(ctx.metadata, context_masked)
    variables = mask(ctx.variables, context_masked)
    detail: dict[str, Any] = {
        "layer": request.layer,
        "tool": {
            "writes": tool.writes, "checkpointable": tool.checkpointable,
            "unsafe": tool.unsafe, "destructive": tool.destructive,
            "skill_category": tool.skill_category, "registered": tool.registered,
            "args": args, "path_args": list(tool.path_args),
        },
        # The request's own word on the tool, before the registry's was merged in: replay
        # (SPEC §12) merges it with a candidate registry entry, or with none.
        "request": {"capability": _capability(t.capability),
                    "safety_category": t.safety_category,
                    "skill_category": t.skill_category,
                    "path_args": list(t.path_args)},
        "context": {  # spelled out: model_dump() cost more than the whole decision
            "plan_id": ctx.plan_id, "sandbox_id": ctx.sandbox_id,
            "sandbox_root": ctx.sandbox_root, "plan_read_only": ctx.plan_read_only,
            "require_checkpoints": ctx.require_checkpoints,
            "accumulated_cost": ctx.accumulated_cost,
            "total_accumulated_cost": ctx.total_accumulated_cost,
            "step_retry_count": ctx.step_retry_count, "dry_run": ctx.dry_run,
            "confirmed": ctx.confirmed, "step_id": ctx.step_id,
            "estimated_cost": ctx.estimated_cost,
            "metadata": metadata,
            "variables": variables,
        },
        "message": deny.message if deny else None,
        "deny_details": deny.details if deny else None,
    }
    if tool.requires_approval:  # only then: older records stay as they were
        detail["tool"]["requires_approval"] = True
    if args is not tool.args:
        # Masked arguments cannot be digested later: an outcome's args_sha256 (SPEC §11) is
        # compared with this digest of what was allowed.
        detail["tool"]["args_sha256"] = canonical_sha256(tool.args)
    if args is not tool.args or metadata is not ctx.metadata or variables is not ctx.variables:
        # Which keys the record does not hold: a replay that would read one of them
        # counts the decision unreplayable rather than guess (SPEC §12).
        detail["masked"] = {
            name: [k for k in values if k.lower() in context_masked]
            for name, values in (("args", tool.args), ("metadata", ctx.metadata),
                                 ("variables", ctx.variables))
            if any(k.lower() in context_masked for k in values)}
    if stateless and request.safety_profile is not None:
        detail["safety_profile"] = request.safety_profile.as_dict()
    return detail
