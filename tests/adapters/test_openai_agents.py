"""OpenAI Agents SDK: function tools guarded with one call, in a real Runner whose model is
the SDK's ScriptedModel playing a script of tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.exceptions import UserError
from agents.testing import ScriptedModel, assistant_message, function_call
from toolgate_client import Client, ToolgateUnavailableError, ToolSafetyViolationError
from toolgate_client.adapters.openai_agents import guard, input_guardrail

from tests.adapters.conftest import decisions

pytestmark = pytest.mark.slow  # a served toolgate
OFFLINE = RunConfig(tracing_disabled=True)
RAN: list[str] = []


@function_tool
def write_note(text: str) -> str:
    """Write a note."""
    RAN.append(f"write_note:{text}")
    return f"wrote {len(text)} characters"


@function_tool
def run_shell(command: str) -> str:
    """Run a shell command."""
    RAN.append(f"run_shell:{command}")
    return "ran"


@pytest.fixture(autouse=True)
def _forget() -> None:
    RAN.clear()


def outputs(model: ScriptedModel) -> dict[str, str]:
    """call_id -> the tool output the model was sent on its last turn."""
    items = model.last_call.input if model.last_call else []
    return {i["call_id"]: i["output"] for i in items
            if isinstance(i, dict) and i.get("type") == "function_call_output"}


def scripted(*turns: Any) -> ScriptedModel:
    return ScriptedModel([[t] if not isinstance(t, list) else t for t in turns])


async def run(tools: list[Any], model: ScriptedModel, **agent: Any) -> Any:
    return await Runner.run(Agent(name="ops", model=model, tools=tools, **agent),
                            "note hello, then wipe the disk", run_config=OFFLINE)


async def test_an_allowed_call_runs_and_is_reported_a_denied_one_reaches_the_model(
        client: Client, plan: str) -> None:
    model = scripted(function_call("write_note", {"text": "hello"}, call_id="c1"),
                     function_call("run_shell", {"command": "rm -rf /"}, call_id="c2"),
                     assistant_message("done"))
    result = await run(guard([write_note, run_shell], client, plan_id=plan), model)

    assert result.final_output == "done"
    assert RAN == ["write_note:hello"]  # run_shell never ran
    answers = outputs(model)
    assert answers["c1"] == "wrote 5 characters"
    assert answers["c2"].startswith(
        "Denied by toolgate: ToolSafetyViolationError (unsafe_tool): Tool 'run_shell' ")
    records = decisions(client, plan)
    assert [(d["tool"], d["allowed"]) for d in records] == [("write_note", True),
                                                            ("run_shell", False)]
    assert records[0]["outcome"]["status"] == "succeeded" and records[1]["outcome"] is None
    assert f"[decision {records[1]['decision_id']}]" in answers["c2"]


async def test_on_deny_raise_raises_the_deny_class_out_of_the_run(client: Client,
                                                                  plan: str) -> None:
    model = scripted(function_call("run_shell", {"command": "ls"}, call_id="c1"),
                     assistant_message("done"))
    with pytest.raises(UserError) as caught:  # the SDK wraps what a tool raises
        await run(guard([run_shell], client, plan_id=plan, on_deny="raise"), model)
    deny = caught.value.__cause__
    assert isinstance(deny, ToolSafetyViolationError) and deny.code == "unsafe_tool"
    assert RAN == []


async def test_a_failing_tool_is_reported_execution_failed(client: Client, plan: str) -> None:
    @function_tool(name_override="write_note")
    def failing(text: str) -> str:
        """Write a note."""
        raise OSError("disk full")

    model = scripted(function_call("write_note", {"text": "x"}, call_id="c1"),
                     assistant_message("done"))
    result = await run(guard([failing], client, plan_id=plan), model)
    assert result.final_output == "done"
    assert outputs(model)["c1"].startswith("An error occurred while running the tool")
    [record] = decisions(client, plan)
    assert record["outcome"]["status"] == "execution_failed"
    assert "disk full" in record["outcome"]["error"]


async def test_toolgate_down_no_tool_runs(down: Client) -> None:
    model = scripted(function_call("write_note", {"text": "hello"}, call_id="c1"),
                     assistant_message("done"))
    with pytest.raises(UserError) as caught:
        await run(guard([write_note], down, plan_id="p-1"), model)
    assert isinstance(caught.value.__cause__, ToolgateUnavailableError)
    assert RAN == []


async def test_the_input_guardrail_rejects_a_deny_with_its_message(client: Client,
                                                                   plan: str) -> None:
    gate = input_guardrail(client, plan_id=plan)

    @function_tool(name_override="run_shell", tool_input_guardrails=[gate])
    def shell(command: str) -> str:
        """Run a shell command."""
        RAN.append(command)
        return "ran"

    @function_tool(name_override="write_note", tool_input_guardrails=[gate])
    def note(text: str) -> str:
        """Write a note."""
        RAN.append(text)
        return "noted"

    model = scripted(function_call("run_shell", {"command": "ls"}, call_id="c1"),
                     function_call("write_note", {"text": "hi"}, call_id="c2"),
                     assistant_message("done"))
    result = await run([shell, note], model)
    assert result.final_output == "done" and RAN == ["hi"]
    answers = outputs(model)
    assert answers["c1"].startswith("Denied by toolgate: ToolSafetyViolationError (unsafe_tool)")
    assert answers["c2"] == "noted"
