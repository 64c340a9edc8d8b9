"""GitHub Copilot CLI's preToolUse/postToolUse command hooks (SPEC §20), on the route's
protocol.

Copilot CLI (`@github/copilot`, 1.0.102) reads hooks from `~/.copilot/hooks/*.json` (and,
in a trusted folder, the repository's `.github/hooks/*.json`): `{"version": 1, "hooks":
{"preToolUse": [{"type": "command", "bash": "...", "timeoutSec": N}], "postToolUse":
[...]}}`. The body it sends on stdin: `sessionId`, `timestamp`, `cwd`, `toolName` (its own
tools: `bash`, `create`, `edit`, `view`, ...), `toolArgs` (an object; older versions sent
it as a JSON string), and after the call `toolResult` (`resultType`: `success`, `failure`,
`denied`, ...; `textResultForLlm`). No event name and no call id: a body with `toolResult`
is a postToolUse, and the call's own digest (session, tool, arguments) ties it to its
preToolUse, as for Gemini CLI.

Its answer: `{"permissionDecision": "allow"|"deny"|"ask", "permissionDecisionReason"}` on
stdout, read on exit code 2 too. Measured with 1.0.102 headless (`-p`): a deny, exit code 2
and any other failing exit code block the call; an allow runs it without Copilot CLI's own
approval; an empty answer, and a hook that times out, leave it to Copilot CLI's own
permissions (with `--allow-all-tools` it runs).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from app.hooks.command import Verdict

SUCCESS = "success"


def call_id(body: dict[str, Any], args: Any) -> str:
    """The same for a preToolUse and the postToolUse of the same call."""
    try:
        text = orjson.dumps([body.get("sessionId"), body.get("toolName"), args],
                            option=orjson.OPT_SORT_KEYS)
    except TypeError:
        text = b""
    return "copilot-" + hashlib.sha256(text).hexdigest()[:40]


def _args(raw: Any) -> Any:
    if isinstance(raw, str):  # toolArgs as a JSON string (older versions)
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw  # not an object: the route refuses it, naming tool_input
    return raw


def to_claude(body: Any) -> Any:
    """The route's body for a Copilot CLI hook body (anything else is passed on as it is,
    for the route to refuse)."""
    if not isinstance(body, dict):
        return body
    args = _args(body.get("toolArgs"))
    out: dict[str, Any] = {"session_id": body.get("sessionId"), "cwd": body.get("cwd"),
                           "tool_name": body.get("toolName"), "tool_input": args,
                           "tool_use_id": call_id(body, args)}
    if "toolResult" not in body:
        out["hook_event_name"] = "PreToolUse"
        return out
    result = body.get("toolResult")
    kind = result.get("resultType") if isinstance(result, dict) else None
    text = result.get("textResultForLlm") if isinstance(result, dict) else None
    if kind == SUCCESS:
        out["hook_event_name"] = "PostToolUse"
        out["tool_response"] = result
    else:  # failure, denied, rejected: it did not succeed
        out["hook_event_name"] = "PostToolUseFailure"
        out["error"] = text if isinstance(text, str) and text else f"resultType {kind!r}"
    return out


def command_output(verdict: Verdict) -> dict[str, Any] | None:
    """What `toolgate hook copilot-cli` prints: Copilot CLI reads it on exit code 2 too, so
    a block prints a deny with its reason (the model reads it)."""
    if verdict.outcome == "done":
        return None
    decision = "deny" if verdict.outcome == "blocked" else verdict.outcome
    return {"permissionDecision": decision, "permissionDecisionReason": verdict.reason}
