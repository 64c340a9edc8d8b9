"""Gemini CLI's BeforeTool/AfterTool hooks (SPEC §15) on the Claude Code mapping, from
payload fixtures written to Gemini CLI's documented hook schema (tests/hooks/fixtures/
gemini/; geminicli.com/docs/hooks/reference): translated as `toolgate hook gemini-cli`
translates them, answered by the route, and the answer turned back into Gemini CLI's."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from app.hooks import gemini
from tests.hooks.helpers import agent_key, apply_mapping

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gemini"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


async def ask(client, headers, name: str) -> tuple[dict, str | None]:
    body = orjson.dumps(gemini.to_claude(fixture(name)))
    r = await client.post("/v1/hooks/claude-code?action=coding", content=body,
                          headers=headers)
    assert r.status_code == 200, r.text
    return gemini.from_claude(r.json())


def test_tools_map_to_the_claude_code_mapping():
    assert gemini.to_claude(fixture("before_write_file"))["tool_name"] == "Write"
    assert gemini.to_claude(fixture("before_run_shell_command"))["tool_name"] == "Bash"
    assert gemini.to_claude(fixture("before_mcp_tool"))["tool_name"] == "mcp__fs__write_file"
    without_context = {**fixture("before_mcp_tool"), "mcp_context": None}
    assert gemini.to_claude(without_context)["tool_name"] == "mcp__fs__write_file"
    # A BeforeTool and its AfterTool are one call: the same id, another for other arguments.
    before, after = (gemini.to_claude(fixture(n)) for n in ("before_write_file",
                                                            "after_write_file"))
    assert before["tool_use_id"] == after["tool_use_id"]
    assert after["hook_event_name"] == "PostToolUse"
    assert before["tool_use_id"] != gemini.to_claude(fixture("before_write_outside"))[
        "tool_use_id"]
    failed = gemini.to_claude(fixture("after_read_file_error"))
    assert failed["hook_event_name"] == "PostToolUseFailure"
    assert failed["error"].startswith("File not found")


@pytest.fixture
async def agent(client):
    await apply_mapping(client)
    return await agent_key(client, projects=["agents"])


async def test_a_write_in_cwd_is_allowed_and_its_outcome_recorded(client, agent):
    out, blocked = await ask(client, agent, "before_write_file")
    assert blocked is None and out["decision"] == "allow"
    decision_id = out["reason"].rsplit("[decision ", 1)[1].rstrip("]")
    out, blocked = await ask(client, agent, "after_write_file")
    assert (out, blocked) == ({}, None)
    stored = (await client.get(f"/v1/decisions/{decision_id}")).json()
    assert stored["tool"] == "Write"
    assert stored["detail"]["context"]["metadata"]["session_id"] == "gem-7f3a"
    assert stored["outcome"]["status"] == "succeeded"


async def test_a_failed_call_is_recorded_as_execution_failed(client, agent):
    out, _ = await ask(client, agent, "before_read_file")
    decision_id = out["reason"].rsplit("[decision ", 1)[1].rstrip("]")
    assert await ask(client, agent, "after_read_file_error") == ({}, None)
    outcome = (await client.get(f"/v1/decisions/{decision_id}")).json()["outcome"]
    assert outcome["status"] == "execution_failed"
    assert outcome["error"].startswith("File not found")


async def test_denies_are_gemini_cli_denies(client, agent):
    for name, code in [
            ("before_write_outside", "ToolSandboxEscapeError (sandbox_path_escape)"),
            ("before_run_shell_command", "ToolSafetyViolationError (unsafe_tool)"),
            ("before_mcp_tool", "unregistered_tool")]:  # fs.write_file is not registered
        out, blocked = await ask(client, agent, name)
        assert out["decision"] == "deny" and code in out["reason"], out
        assert blocked == out["reason"]


async def test_an_unknown_event_is_a_deny(client, agent):
    body = {**fixture("before_write_file"), "hook_event_name": "BeforeModel"}
    r = await client.post("/v1/hooks/claude-code?action=coding",
                          content=orjson.dumps(gemini.to_claude(body)), headers=agent)
    out, blocked = gemini.from_claude(r.json())
    assert r.status_code == 200 and out["decision"] == "deny"
    assert "unknown_hook_event" in blocked
