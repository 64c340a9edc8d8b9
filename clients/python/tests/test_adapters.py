"""The framework adapters on the scripted fake toolgate (no service, no model): how a tool
call becomes a request, what a deny becomes, that nothing runs without a decision, and the
outcome reported. Each framework's part skips when its extra is not installed; the service's
suite runs them for real (tests/adapters)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from _toolgate_client_testkit import FakeToolgate, allow_payload, deny_payload, make_client
from toolgate_client import ToolgateUnavailableError, ToolSafetyViolationError
from toolgate_client.adapters import Gate, deny_message

DENY = deny_payload("ToolSafetyViolationError", "unsafe_tool", check="unsafe",
                    message="Tool 'run' is marked unsafe (plan 'p-1')")


def test_importing_the_adapters_imports_no_framework() -> None:
    import subprocess
    import sys

    code = ("import sys, toolgate_client.adapters; "
            "print([m for m in ('langchain_core', 'agents', 'claude_agent_sdk') "
            "if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONPATH": ":".join(sys.path)})
    assert out.stdout.strip() == "[]"


def test_the_request_of_a_tool_call() -> None:
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    gate = Gate(make_client(fake), plan_id="p-1",
                context=lambda name, args: {"sandbox_id": "sb", "dry_run": args.get("dry")},
                tool=lambda name, args: {"name": name.replace("_", "."), "args": args})
    decision, message = gate.decide("fs_write", {"path": "/a", "dry": True})
    assert decision is not None and decision.allowed and message is None
    assert fake.body() == {"tool": {"name": "fs.write", "args": {"path": "/a", "dry": True}},
                           "context": {"sandbox_id": "sb", "dry_run": True}, "plan_id": "p-1"}


def test_a_deny_is_a_message_or_raised() -> None:
    fake = FakeToolgate(httpx.Response(200, json=DENY))
    decision, message = Gate(make_client(fake)).decide("run", {})
    assert decision is None
    assert message == ("Denied by toolgate: ToolSafetyViolationError (unsafe_tool): Tool 'run' "
                       f"is marked unsafe (plan 'p-1') [decision {DENY['decision_id']}]")
    with pytest.raises(ToolSafetyViolationError) as caught:
        Gate(make_client(fake), on_deny="raise").decide("run", {})
    assert deny_message(caught.value) == message
    with pytest.raises(ValueError):
        Gate(make_client(fake), on_deny="ignore")  # type: ignore[arg-type]


def test_no_decision_raises_and_outcomes_are_reported() -> None:
    down = FakeToolgate(httpx.ConnectError("refused"))
    with pytest.raises(ToolgateUnavailableError):
        Gate(make_client(down, retries=0)).decide("run", {})
    fake = FakeToolgate(httpx.Response(200, json=allow_payload()))
    gate = Gate(make_client(fake))
    decision, _ = gate.decide("t", {})
    assert decision is not None
    gate.outcome(decision)
    gate.outcome(decision, OSError("disk full"))
    asyncio.run(gate.aoutcome(decision, "boom"))
    assert [body for _, body in fake.outcomes] == [
        {"status": "succeeded"}, {"status": "execution_failed", "error": "OSError: disk full"},
        {"status": "execution_failed", "error": "boom"}]


def test_langchain_guard_keeps_the_tool_and_answers_a_deny_as_an_error_message() -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.messages import ToolMessage
    from langchain_core.tools import tool

    from toolgate_client.adapters.langchain import guard

    ran: list[str] = []

    @tool
    def run(command: str) -> str:
        """Run a command."""
        ran.append(command)
        return "ran"

    fake = FakeToolgate(httpx.Response(200, json=DENY), httpx.Response(200, json=allow_payload()))
    guarded = guard(run, make_client(fake), plan_id="p-1")
    answer = guarded.invoke({"type": "tool_call", "id": "c1", "name": "run",
                             "args": {"command": "ls"}})
    assert isinstance(answer, ToolMessage) and answer.status == "error"
    assert answer.tool_call_id == "c1" and "(unsafe_tool)" in str(answer.content)
    assert ran == [] and fake.outcomes == []
    assert guarded.invoke({"command": "ls"}) == "ran" and ran == ["ls"]
    assert [body for _, body in fake.outcomes] == [{"status": "succeeded"}]
    assert fake.body(0)["tool"] == {"name": "run", "args": {"command": "ls"}}


def test_openai_agents_guard_asks_before_the_function_runs() -> None:
    pytest.importorskip("agents")
    from agents import function_tool
    from agents.tool_context import ToolContext

    from toolgate_client.adapters.openai_agents import guard

    ran: list[str] = []

    @function_tool
    def run(command: str) -> str:
        """Run a command."""
        ran.append(command)
        return "ran"

    fake = FakeToolgate(httpx.Response(200, json=DENY), httpx.Response(200, json=allow_payload()))
    guarded = guard(run, make_client(fake), plan_id="p-1")
    assert guarded is not run and guarded.name == "run"

    def context(call_id: str) -> Any:
        return ToolContext(context=None, tool_name="run", tool_call_id=call_id,
                           tool_arguments='{"command": "ls"}')

    answer = asyncio.run(guarded.on_invoke_tool(context("c1"), '{"command": "ls"}'))
    assert answer.startswith("Denied by toolgate: ToolSafetyViolationError") and ran == []
    assert asyncio.run(guarded.on_invoke_tool(context("c2"), '{"command": "ls"}')) == "ran"
    assert ran == ["ls"] and [b for _, b in fake.outcomes] == [{"status": "succeeded"}]


def test_claude_agent_sdk_hooks_decide_and_report_by_tool_use_id() -> None:
    pytest.importorskip("claude_agent_sdk")
    from toolgate_client.adapters.claude_agent_sdk import Toolgate

    fake = FakeToolgate(httpx.Response(200, json=allow_payload()), httpx.Response(200, json=DENY))
    gate = Toolgate(make_client(fake), plan_id="p-1")
    hooks = gate.hooks()
    assert set(hooks) == {"PreToolUse", "PostToolUse", "PostToolUseFailure"}

    def pre(name: str, use_id: str) -> dict[str, Any]:
        return asyncio.run(gate.pre_tool_use({"hook_event_name": "PreToolUse",
                                              "tool_name": name, "tool_input": {"x": 1},
                                              "tool_use_id": use_id}, use_id, None))

    allowed = pre("mcp__fs__read", "u1")["hookSpecificOutput"]
    assert allowed["permissionDecision"] == "allow"
    assert fake.body(0)["tool"] == {"name": "fs.read", "args": {"x": 1}}
    denied = pre("Bash", "u2")
    assert denied["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert "continue_" not in denied  # a deny lets Claude adapt; only no decision stops
    asyncio.run(gate.post_tool_use({"hook_event_name": "PostToolUseFailure",
                                    "tool_use_id": "u1", "error": "exit 1"}, "u1", None))
    asyncio.run(gate.post_tool_use({"hook_event_name": "PostToolUse", "tool_use_id": "u2"},
                                   "u2", None))  # denied: nothing to report
    assert [b for _, b in fake.outcomes] == [{"status": "execution_failed", "error": "exit 1"}]
