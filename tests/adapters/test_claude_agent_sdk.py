"""Claude Agent SDK: the real SDK driving the Claude Code CLI its wheel ships, against the
scripted Messages API of messages_api.py on 127.0.0.1, gated by toolgate through the
PreToolUse/PostToolUse hooks or the can_use_tool callback: a Write that runs and is
reported, a Bash denied whose reason reaches the model, and toolgate down: nothing runs."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query
from toolgate_client import Client
from toolgate_client.adapters.claude_agent_sdk import Toolgate, toolgate_name

from tests.adapters.conftest import decisions
from tests.adapters.messages_api import MessagesAPI

pytestmark = pytest.mark.slow  # a served toolgate, the Claude Code CLI


@pytest.fixture(scope="module")
def api() -> Iterator[MessagesAPI]:
    with MessagesAPI() as server:
        yield server


def options(api: MessagesAPI, folder: Path, **extra: Any) -> ClaudeAgentOptions:
    home = folder / "home"
    home.mkdir(exist_ok=True)
    env = {"ANTHROPIC_BASE_URL": api.url, "ANTHROPIC_API_KEY": "sk-ant-scripted",
           "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
           "DISABLE_AUTOUPDATER": "1", "HOME": str(home), "CLAUDE_CONFIG_DIR": str(home)}
    return ClaudeAgentOptions(cwd=str(folder), env=env, setting_sources=[], max_turns=6,
                              tools=["Write", "Bash"], **extra)


async def prompt(text: str) -> AsyncIterator[dict[str, Any]]:
    yield {"type": "user", "message": {"role": "user", "content": text}}


async def run(text: str, opts: ClaudeAgentOptions) -> list[Any]:
    return [m async for m in query(prompt=prompt(text), options=opts)]


def script(api: MessagesAPI, folder: Path) -> tuple[Path, Path]:
    note, pwned = folder / "note.txt", folder / "pwned"
    api.script(("Write", {"file_path": str(note), "content": "hello"}),
               ("Bash", {"command": f"touch {pwned}", "description": "touch"}))
    return note, pwned


def result_text(api: MessagesAPI, turn: int) -> str:
    content = api.results[f"toolu_{turn}"].get("content")
    if isinstance(content, list):
        return " ".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return str(content)


@pytest.mark.parametrize("way", ["hooks", "can_use_tool"])
async def test_a_write_runs_and_is_reported_a_bash_is_denied_and_claude_reads_why(
        api: MessagesAPI, client: Client, plan: str, tmp_path: Path, way: str) -> None:
    note, pwned = script(api, tmp_path)
    gate = Toolgate(client, plan_id=plan)
    if way == "hooks":
        opts = options(api, tmp_path, hooks=gate.hooks())
    else:
        opts = options(api, tmp_path, can_use_tool=gate.can_use_tool,
                       hooks=gate.hooks(decide=False))
    messages = await run("write a note, then touch a file", opts)

    assert isinstance(messages[-1], ResultMessage), messages[-1]
    assert note.read_text() == "hello"
    assert not pwned.exists()  # Bash never ran
    denied = result_text(api, 1)
    assert "Denied by toolgate: ToolSafetyViolationError (unsafe_tool): Tool 'Bash' " in denied
    records = decisions(client, plan)
    assert [(d["tool"], d["allowed"]) for d in records] == [("Write", True), ("Bash", False)]
    assert records[0]["outcome"]["status"] == "succeeded" and records[1]["outcome"] is None
    assert f"[decision {records[1]['decision_id']}]" in denied


async def test_toolgate_down_no_tool_runs(api: MessagesAPI, down: Client,
                                          tmp_path: Path) -> None:
    note, pwned = script(api, tmp_path)
    messages = await run("write a note",
                         options(api, tmp_path, hooks=Toolgate(down, plan_id="p-1").hooks()))
    assert api.served == ["Write"]  # the model asked for the Write; the turn stopped there
    assert not note.exists() and not pwned.exists()
    assert isinstance(messages[-1], ResultMessage), messages[-1]


def test_mcp_tools_have_the_gateways_names() -> None:
    assert toolgate_name("mcp__github__create_issue") == "github.create_issue"
    assert toolgate_name("Bash") == "Bash" and toolgate_name("mcp__x") == "mcp__x"


def test_the_cli_is_the_one_the_wheel_ships() -> None:
    import claude_agent_sdk

    bundled = Path(claude_agent_sdk.__file__).parent / "_bundled" / "claude"
    assert bundled.exists() and os.access(bundled, os.X_OK)


async def test_a_request_toolgate_refuses_is_a_deny_that_stops_the_turn(client: Client,
                                                                        plan: str) -> None:
    # An unregistered tool that does not say what it does: toolgate answers 422, no decision.
    answer = await Toolgate(client, plan_id=plan).pre_tool_use(
        {"hook_event_name": "PreToolUse", "tool_name": "Unknown", "tool_input": {},
         "tool_use_id": "t1"}, "t1", None)  # type: ignore[arg-type]
    assert answer["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert answer["continue_"] is False
