"""What an approval is for (SPEC §10): the fields of a request a grant is bound to, and
their digest. Pure: the same request gives the same binding on every replica."""

from __future__ import annotations

from typing import Any

from app.kit.canonical import canonical_sha256
from app.policy.model import Context, Tool
from app.policy.paths import referenced_variables


def binding(tool: Tool, ctx: Context, safety_category: str | None) -> dict[str, Any]:
    """The bound fields: the tool, its effective capability and category, its arguments,
    the variables its path arguments reference, the sandbox, dry_run and confirmed."""
    return {
        "tool": tool.name,
        "capability": {"writes": tool.writes, "checkpointable": tool.checkpointable,
                       "unsafe": tool.unsafe, "destructive": tool.destructive,
                       "skill_category": tool.skill_category},
        "safety_category": "destructive" if tool.destructive else safety_category,
        "args": tool.args,
        "variables": referenced_variables(tool.args, tool.path_args, ctx.variables),
        "sandbox_id": ctx.sandbox_id,
        "sandbox_root": ctx.sandbox_root,
        "dry_run": ctx.dry_run,
        "confirmed": ctx.confirmed,
    }


def digests(bound: dict[str, Any]) -> tuple[str | None, str | None]:
    """(request_sha256, args_sha256); None where RFC 8785 cannot represent the value exactly
    (an integer beyond 2^53): such a request never matches an approval."""
    return canonical_sha256(bound), canonical_sha256(bound["args"])


def with_approval(response: dict[str, Any], record: dict[str, Any],
                  details: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A human_approval_required deny (and its record) with `details.approval` and the
    sentence its state adds to the message."""
    deny = response["deny"]
    deny["details"] = {**deny["details"], "approval": details}
    state = details.get("state")
    if state == "rejected":
        deny["message"] += f"; approval {details['approval_id']} was rejected" + (
            f": {details['reason']}" if details.get("reason") else "")
    elif state == "pending":
        deny["message"] += f"; approval {details.get('approval_id')} is pending"
    elif state == "too_many_pending":
        deny["message"] += "; this plan has too many pending approvals, none was created"
    elif state == "unbindable":
        deny["message"] += ("; its arguments hold a number RFC 8785 cannot represent "
                            "exactly, so no approval can match it")
    elif state == "not_requested":
        deny["message"] += ("; no approval was requested: even granted, the call would be "
                            f"denied {details['would_fail']}")
    record["detail"]["deny_details"] = deny["details"]
    record["detail"]["message"] = deny["message"]
    return response, record
