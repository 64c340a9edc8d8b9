"""The hook route's wire contract as documentation (SPEC §15): Claude Code's hook input and
output. The route reads the body itself (app/hooks/claude.py), so that a body Claude Code
did not mean is a deny, never a 422."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

HOOK_INPUT = {
    "required": True,
    "content": {"application/json": {"schema": {
        "type": "object",
        "required": ["hook_event_name", "session_id", "cwd", "tool_name", "tool_input",
                     "tool_use_id"],
        "properties": {
            "hook_event_name": {"enum": ["PreToolUse", "PostToolUse", "PostToolUseFailure"]},
            "session_id": {"type": "string"},
            "cwd": {"type": "string", "description": "absolute; the sandbox root"},
            "tool_name": {"type": "string",
                          "description": "`mcp__S__T` is decided as the tool `S.T`"},
            "tool_input": {"type": "object"},
            "tool_use_id": {"type": "string"},
            "tool_response": {"description": "PostToolUse: what the tool answered"},
            "error": {"type": "string", "description": "PostToolUseFailure: why it failed"},
        },
    }}},
}


class PreToolUseOutput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    hookEventName: Literal["PreToolUse"]
    permissionDecision: Literal["allow", "deny", "ask"]
    permissionDecisionReason: str


class HookOutput(BaseModel):
    """`{}` after PostToolUse; `decision`/`reason` also on a call that could not be decided
    (`block`: Claude Code's older form of a deny, and a PostToolUse's note to the model)."""

    hookSpecificOutput: PreToolUseOutput | None = None
    decision: Literal["block"] | None = None
    reason: str | None = None
