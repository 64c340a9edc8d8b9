"""toolgate for the Claude Agent SDK (extra ``claude-agent-sdk``).

A :class:`Toolgate` gives the SDK's two ways in: PreToolUse / PostToolUse hooks, and a
``can_use_tool`` permission callback::

    from claude_agent_sdk import ClaudeAgentOptions, query
    from toolgate_client.adapters.claude_agent_sdk import Toolgate

    gate = Toolgate(client, plan_id="p-1")
    options = ClaudeAgentOptions(hooks=gate.hooks())     # every tool call, read-only ones too
    # or: ClaudeAgentOptions(can_use_tool=gate.can_use_tool, hooks=gate.hooks(decide=False))

The PreToolUse hook decides every call (``permissionDecision`` ``allow`` or ``deny`` with
``"Denied by toolgate: <Class> (<code>): <message> [decision <id>]"`` as the reason Claude
reads). ``can_use_tool`` is asked only for the calls Claude Code's own permission rules do
not already allow (not, by default, its read-only tools): use the hook where toolgate must
see everything. PostToolUse reports ``succeeded``, PostToolUseFailure ``execution_failed``,
for the decision made for that ``tool_use_id``.

Fail closed: when toolgate cannot decide (unavailable, or it refused the request: an
unregistered tool that says nothing of what it does, an unknown plan), the call is denied
and the turn stops
(``continue: false`` from the hook, ``interrupt=True`` from ``can_use_tool``); with
``on_deny="raise"`` a deny stops it too. Tool names are toolgate's (SPEC §15): ``Bash``,
``Write``...; ``mcp__S__T`` is the tool ``S.T``. The other keywords are
:class:`~._gate.Gate`'s; their functions receive that name.
"""

from __future__ import annotations

from typing import Any

from claude_agent_sdk import (
    HookContext,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ToolPermissionContext,
)
from claude_agent_sdk.types import PermissionResult

from ..errors import ToolgateDeny, ToolgateUnavailableError
from ..models import Decision
from ._gate import Gate, deny_message

__all__ = ["Toolgate", "can_use_tool", "hooks", "toolgate_name"]

MAX_PENDING = 1024  # decisions kept for their PostToolUse; the oldest go first


def toolgate_name(claude_name: str) -> str:
    """toolgate's name for a Claude Code tool: ``mcp__S__T`` is ``S.T``, others as they are."""
    if claude_name.startswith("mcp__"):
        server, _, tool = claude_name[len("mcp__"):].partition("__")
        if server and tool:
            return f"{server}.{tool}"
    return claude_name


def _pre(decision: str, reason: str, *, stop: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": decision,
        "permissionDecisionReason": reason}}
    if stop:
        out.update({"continue_": False, "stopReason": reason})
    return out


class Toolgate:
    """The hooks and the permission callback of one agent, sharing their decisions."""

    def __init__(self, client: Any, **options: Any) -> None:
        self.gate = client if isinstance(client, Gate) else Gate(client, **options)
        self._decisions: dict[str, Decision] = {}

    def _keep(self, tool_use_id: str | None, decision: Decision) -> None:
        if tool_use_id:
            self._decisions[tool_use_id] = decision
            while len(self._decisions) > MAX_PENDING:
                self._decisions.pop(next(iter(self._decisions)))

    async def _decide(self, name: str, tool_input: Any,
                      tool_use_id: str | None) -> tuple[bool, str, bool]:
        """(allowed, the reason, stop the turn)."""
        args = tool_input if isinstance(tool_input, dict) else {}
        try:
            decision, message = await self.gate.adecide(toolgate_name(name), args)
        except ToolgateDeny as exc:  # on_deny="raise": deny and stop
            return False, deny_message(exc), True
        except ToolgateUnavailableError as exc:
            return False, f"toolgate is unavailable, so no tool may run: {exc}", True
        except Exception as exc:  # a hook that fails would let the tool run
            return False, f"toolgate could not decide ({type(exc).__name__}: {exc})", True
        if decision is None:
            return False, message or "Denied by toolgate", False
        self._keep(tool_use_id, decision)
        return True, f"Allowed by toolgate [decision {decision.decision_id}]", False

    # -- can_use_tool ----------------------------------------------------------------------

    async def can_use_tool(self, tool_name: str, tool_input: dict[str, Any],
                           context: ToolPermissionContext) -> PermissionResult:
        allowed, reason, stop = await self._decide(tool_name, tool_input, context.tool_use_id)
        if allowed:
            return PermissionResultAllow()
        return PermissionResultDeny(message=reason, interrupt=stop)

    # -- hooks -----------------------------------------------------------------------------

    async def pre_tool_use(self, data: Any, tool_use_id: str | None,
                           context: HookContext) -> dict[str, Any]:
        if not isinstance(data, dict) or data.get("hook_event_name") != "PreToolUse":
            return _pre("deny", "toolgate: not a PreToolUse hook input", stop=True)
        allowed, reason, stop = await self._decide(
            str(data.get("tool_name") or ""), data.get("tool_input"),
            tool_use_id or data.get("tool_use_id"))
        return _pre("allow" if allowed else "deny", reason, stop=stop)

    async def post_tool_use(self, data: Any, tool_use_id: str | None,
                            context: HookContext) -> dict[str, Any]:
        data = data if isinstance(data, dict) else {}
        decision = self._decisions.pop(tool_use_id or data.get("tool_use_id") or "", None)
        if decision is not None:
            failed = data.get("hook_event_name") == "PostToolUseFailure"
            await self.gate.aoutcome(decision, str(data.get("error") or "failed")
                                     if failed else None)
        return {}

    def hooks(self, *, decide: bool = True, report: bool = True) -> dict[str, list[HookMatcher]]:
        """``ClaudeAgentOptions(hooks=...)``: PreToolUse decides (``decide=False`` when
        ``can_use_tool`` does), PostToolUse and PostToolUseFailure report."""
        found: dict[str, list[HookMatcher]] = {}
        if decide:
            found["PreToolUse"] = [HookMatcher(matcher=None, hooks=[self.pre_tool_use])]
        if report:
            for event in ("PostToolUse", "PostToolUseFailure"):
                found[event] = [HookMatcher(matcher=None, hooks=[self.post_tool_use])]
        return found


def hooks(client: Any, **options: Any) -> dict[str, list[HookMatcher]]:
    """``Toolgate(client, **options).hooks()``."""
    return Toolgate(client, **options).hooks()


def can_use_tool(client: Any, **options: Any) -> Any:
    """``Toolgate(client, **options).can_use_tool`` (no outcomes: add the Toolgate's
    ``hooks(decide=False)`` for them)."""
    return Toolgate(client, **options).can_use_tool
