"""LangChain / LangGraph: tools guarded with one call, in a real LangGraph agent whose model
is LangChain's fake chat model playing a script of tool calls."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode, create_react_agent
from toolgate_client import Client, ToolgateUnavailableError, ToolSafetyViolationError
from toolgate_client.adapters.langchain import GuardedTool, guard

from tests.adapters.conftest import decisions

pytestmark = [pytest.mark.slow,  # a served toolgate
              # langchain.agents.create_agent is in the `langchain` package, not installed here
              pytest.mark.filterwarnings("ignore:create_react_agent has been moved")]


class ScriptedChat(GenericFakeChatModel):
    """The fake chat model, able to bind tools, keeping what it was shown each turn."""

    seen: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def script(*turns: AIMessage | str) -> ScriptedChat:
    return ScriptedChat(messages=iter(turns), seen=[])


RAN: list[str] = []


@tool
def write_note(text: str) -> str:
    """Write a note."""
    RAN.append(f"write_note:{text}")
    return f"wrote {len(text)} characters"


@tool
def run_shell(command: str) -> str:
    """Run a shell command."""
    RAN.append(f"run_shell:{command}")
    return "ran"


@pytest.fixture(autouse=True)
def _forget() -> None:
    RAN.clear()


def tool_messages(model: ScriptedChat) -> list[ToolMessage]:
    return [m for m in model.seen[-1] if isinstance(m, ToolMessage)]


@pytest.mark.parametrize("wrap", ["tools", "tool_node"])
def test_an_allowed_call_runs_and_is_reported_a_denied_one_reaches_the_model_as_an_error(
        client: Client, plan: str, wrap: str) -> None:
    model = script(call("write_note", {"text": "hello"}, "c1"),
                   call("run_shell", {"command": "rm -rf /"}, "c2"), "done")
    if wrap == "tools":
        tools: Any = guard([write_note, run_shell], client, plan_id=plan)
        assert all(isinstance(t, GuardedTool) for t in tools)
        assert [t.name for t in tools] == ["write_note", "run_shell"]
        assert tools[0].tool_call_schema.model_json_schema() == \
            write_note.tool_call_schema.model_json_schema()
    else:
        tools = guard(ToolNode([write_note, run_shell]), client, plan_id=plan)
        assert isinstance(tools, ToolNode)
    agent = create_react_agent(model, tools)
    result = agent.invoke({"messages": [("user", "note hello, then wipe the disk")]})

    assert result["messages"][-1].content == "done"
    assert RAN == ["write_note:hello"]  # run_shell never ran
    allowed, denied = tool_messages(model)
    assert (allowed.content, allowed.status) == ("wrote 5 characters", "success")
    assert denied.status == "error" and denied.tool_call_id == "c2"
    assert denied.content.startswith(
        "Denied by toolgate: ToolSafetyViolationError (unsafe_tool): Tool 'run_shell' ")
    records = decisions(client, plan)
    assert [(d["tool"], d["allowed"]) for d in records] == [("write_note", True),
                                                            ("run_shell", False)]
    assert records[0]["outcome"]["status"] == "succeeded"
    assert records[1]["outcome"] is None
    assert f"[decision {records[1]['decision_id']}]" in denied.content


async def test_the_async_path_asks_and_reports_too(client: Client, plan: str) -> None:
    model = script(call("write_note", {"text": "async"}, "c1"), "done")
    agent = create_react_agent(model, guard([write_note], client, plan_id=plan))
    result = await agent.ainvoke({"messages": [("user", "note")]})
    assert result["messages"][-1].content == "done" and RAN == ["write_note:async"]
    [record] = decisions(client, plan)
    assert record["outcome"]["status"] == "succeeded"


def test_on_deny_raise_raises_the_deny_class(client: Client, plan: str) -> None:
    model = script(call("run_shell", {"command": "ls"}, "c1"), "done")
    agent = create_react_agent(model, guard([run_shell], client, plan_id=plan,
                                            on_deny="raise"))
    with pytest.raises(ToolSafetyViolationError) as caught:
        agent.invoke({"messages": [("user", "ls")]})
    assert caught.value.code == "unsafe_tool" and RAN == []


def test_a_failing_tool_is_reported_execution_failed(client: Client, plan: str) -> None:
    @tool
    def write_note(text: str) -> str:  # noqa: F811 - the registered name, failing
        """Write a note."""
        raise OSError("disk full")

    node = ToolNode([write_note], handle_tool_errors=True)
    model = script(call("write_note", {"text": "x"}, "c1"), "done")
    agent = create_react_agent(model, guard(node, client, plan_id=plan))
    agent.invoke({"messages": [("user", "note")]})
    [message] = tool_messages(model)
    assert message.status == "error" and "disk full" in message.content
    [record] = decisions(client, plan)
    assert record["outcome"]["status"] == "execution_failed"
    assert "disk full" in record["outcome"]["error"]


def test_toolgate_down_no_tool_runs(down: Client) -> None:
    model = script(call("write_note", {"text": "hello"}, "c1"), "done")
    agent = create_react_agent(model, guard([write_note], down, plan_id="p-1"))
    with pytest.raises(ToolgateUnavailableError):
        agent.invoke({"messages": [("user", "note hello")]})
    assert RAN == []


def test_a_tool_invoked_directly_gets_the_deny_as_its_answer(client: Client, plan: str) -> None:
    guarded = guard(run_shell, client, plan_id=plan)
    answer = guarded.invoke({"command": "ls"})
    assert answer.startswith("Denied by toolgate: ToolSafetyViolationError (unsafe_tool)")
    assert RAN == []
