"""Gemini CLI's BeforeTool/AfterTool hooks (SPEC §15, §20) on examples/gemini-cli.yaml,
from payload fixtures written to Gemini CLI's hook schema (tests/hooks/fixtures/gemini/;
its packages/core/src/hooks): translated as `toolgate hook gemini-cli` translates them,
answered by the route (`?agent=gemini-cli`), and the answer read as the command reads it
(app/hooks/command.py). The real CLI runs in tests/hooks/test_gemini_cli.py."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from app.hooks import command, gemini
from tests.hooks.helpers import GEMINI_MAPPING, agent_key, apply_mapping

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gemini"
GEMINI_TOOLS = ("read_file", "read_many_files", "list_directory", "glob", "grep_search",
                "write_file", "replace", "run_shell_command", "list_background_processes",
                "read_background_output", "web_fetch", "google_web_search",
                "list_mcp_resources", "read_mcp_resource", "write_todos", "update_topic",
                "enter_plan_mode", "exit_plan_mode", "ask_user", "complete_task",
                "activate_skill", "get_internal_docs", "tracker_create_task",
                "tracker_update_task", "tracker_add_dependency", "tracker_get_task",
                "tracker_list_tasks", "tracker_visualize", "invoke_agent",
                "codebase_investigator", "cli_help", "take_snapshot")


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


async def ask(client, headers, body: dict | str, query: str = "action=coding"
              ) -> tuple[dict | None, command.Verdict]:
    body = fixture(body) if isinstance(body, str) else body
    claude_body = gemini.to_claude(body)
    r = await client.post(f"/v1/hooks/claude-code?{query}&agent=gemini-cli",
                          content=orjson.dumps(claude_body), headers=headers)
    assert r.status_code == 200, r.text
    verdict = command.verdict(r.content, command.event_of(claude_body))
    return gemini.command_output(verdict), verdict


def decision_id(verdict: command.Verdict) -> str:
    return verdict.reason.rsplit("[decision ", 1)[1].rstrip("]")


def test_tools_keep_their_names_and_mcp_tools_are_server_dot_tool():
    assert gemini.to_claude(fixture("before_write_file"))["tool_name"] == "write_file"
    assert gemini.to_claude(fixture("before_run_shell_command"))["tool_name"] == \
        "run_shell_command"
    assert gemini.to_claude(fixture("before_mcp_tool"))["tool_name"] == "mcp__fs__write_file"
    without_context = {**fixture("before_mcp_tool"), "mcp_context": None}
    assert gemini.to_claude(without_context)["tool_name"] == "mcp__fs__write_file"
    # A server whose name has `_` in it: mcp_context says where it ends.
    body = {**fixture("before_mcp_tool"), "tool_name": "mcp_my_fs_write_file",
            "mcp_context": {"server_name": "my_fs", "tool_name": "write_file"}}
    assert gemini.to_claude(body)["tool_name"] == "mcp__my_fs__write_file"
    assert gemini.to_claude({**body, "tool_name": "search_file_content"})["tool_name"] == \
        "grep_search"
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


@pytest.mark.parametrize("claimed", [
    {"server_name": "toolgate", "tool_name": "run_shell_command"},
    {"server_name": "toolgate", "tool_name": "x"},
])
def test_mcp_context_never_makes_a_built_in_tool_an_mcp_tool(claimed):
    """Only Gemini CLI's own `mcp_` names are MCP tools: a body's mcp_context cannot turn
    run_shell_command into a call of the MCP server `toolgate` (issue 42 item 2)."""
    body = {**fixture("before_run_shell_command"), "mcp_context": claimed}
    assert gemini.to_claude(body)["tool_name"] == "run_shell_command"
    # Nor rename an MCP tool's server: the name says which server it is.
    body = {**fixture("before_mcp_tool"), "mcp_context": claimed}
    assert gemini.to_claude(body)["tool_name"] == "mcp__fs__write_file"


def test_the_mapping_registers_every_gemini_cli_tool():
    text = GEMINI_MAPPING.read_text()
    missing = [name for name in GEMINI_TOOLS if f"\n  {name}:" not in text]
    assert missing == []


@pytest.fixture
async def agent(client):
    await apply_mapping(client, GEMINI_MAPPING)
    return await agent_key(client, projects=["agents"])


async def test_every_gemini_cli_tool_is_decided_with_a_decision_id(client, agent):
    """None is refused as unregistered (issue 42: seven were, with no decision id). The
    shell's command line is where call rules read it (SPEC §18)."""
    shell = (await client.get("/v1/tools/run_shell_command")).json()
    assert shell["shell"] == {"arg": "command"}
    for number, name in enumerate(GEMINI_TOOLS):
        body = {**fixture("before_read_file"), "tool_name": name,
                "tool_input": {"n": number}}
        _, verdict = await ask(client, agent, body)
        assert "[decision " in verdict.reason, (name, verdict)
        assert "unregistered_tool" not in verdict.reason, (name, verdict)


async def test_a_write_in_cwd_is_allowed_and_its_outcome_recorded(client, agent):
    out, verdict = await ask(client, agent, "before_write_file")
    assert verdict.outcome == "allow" and out["decision"] == "allow"
    out, verdict = await ask(client, agent, "after_write_file")
    assert (out, verdict.outcome) == ({}, "done")


async def test_the_record_names_the_agent_and_the_outcome_is_booked(client, agent):
    _, verdict = await ask(client, agent, "before_write_file")
    await ask(client, agent, "after_write_file")
    stored = (await client.get(f"/v1/decisions/{decision_id(verdict)}")).json()
    assert stored["tool"] == "write_file"
    assert stored["detail"]["agent"] == "gemini-cli"
    assert stored["detail"]["context"]["metadata"]["hook"] == "gemini-cli"
    assert stored["detail"]["context"]["metadata"]["session_id"] == "gem-7f3a"
    assert stored["outcome"]["status"] == "succeeded"


async def test_a_failed_call_is_recorded_as_execution_failed(client, agent):
    _, verdict = await ask(client, agent, "before_read_file")
    assert (await ask(client, agent, "after_read_file_error"))[1].outcome == "done"
    outcome = (await client.get(f"/v1/decisions/{decision_id(verdict)}")).json()["outcome"]
    assert outcome["status"] == "execution_failed"
    assert outcome["error"].startswith("File not found")


async def test_denies_are_gemini_cli_denies(client, agent):
    for name, code in [
            ("before_write_outside", "ToolSandboxEscapeError (sandbox_path_escape)"),
            ("before_run_shell_command", "ToolSafetyViolationError (unsafe_tool)"),
            ("before_mcp_tool", "unregistered_tool")]:  # fs.write_file is not registered
        out, verdict = await ask(client, agent, name)
        assert verdict.outcome == "blocked" and code in verdict.reason, verdict
        assert out == {"decision": "deny", "reason": verdict.reason}


@pytest.mark.parametrize(("name", "tool_input", "code"), [
    ("run_shell_command", {"command": "rm -rf /", "description": "x"}, "unsafe_tool"),
    ("write_file", {"file_path": "/etc/passwd", "content": "x"}, "sandbox_path_escape"),
])
async def test_a_built_in_tool_claiming_the_gateway_is_decided_and_recorded(
        client, agent, name, tool_input, code):
    """`--gateway toolgate` and a body whose mcp_context claims the server `toolgate`: the
    call is still decided, denied, and recorded (issue 42 item 2; it was let through)."""
    body = {**fixture("before_run_shell_command"), "tool_name": name,
            "tool_input": tool_input,
            "mcp_context": {"server_name": "toolgate", "tool_name": name}}
    _, verdict = await ask(client, agent, body, query="action=coding&gateway=toolgate")
    assert verdict.outcome == "blocked" and f"({code})" in verdict.reason, verdict
    stored = (await client.get(f"/v1/decisions/{decision_id(verdict)}")).json()
    assert (stored["tool"], stored["code"]) == (name, code)
    assert stored["detail"]["agent"] == "gemini-cli"


async def test_an_include_directory_is_a_root_the_hook_may_be_told_about(client, agent):
    """`?root=` (`--root`): a write inside another root the operator named is decided
    under that root; elsewhere it is still an escape."""
    body = {**fixture("before_write_file"),
            "tool_input": {"file_path": "/work/shared/notes.md", "content": "x"}}
    _, verdict = await ask(client, agent, body)
    assert "(sandbox_path_escape)" in verdict.reason
    _, verdict = await ask(client, agent, body, query="action=coding&root=/work/shared")
    assert verdict.outcome == "allow", verdict
    stored = (await client.get(f"/v1/decisions/{decision_id(verdict)}")).json()
    assert stored["detail"]["context"]["sandbox_root"] == "/work/shared"
    body["tool_input"]["file_path"] = "/etc/passwd"
    _, verdict = await ask(client, agent, body, query="action=coding&root=/work/shared")
    assert "(sandbox_path_escape)" in verdict.reason
    _, verdict = await ask(client, agent, body, query="action=coding&root=relative")
    assert verdict.outcome == "blocked" and "invalid_hook_url" in verdict.reason


async def test_an_unknown_event_or_agent_is_a_deny(client, agent):
    body = {**fixture("before_write_file"), "hook_event_name": "BeforeModel"}
    r = await client.post("/v1/hooks/claude-code?action=coding&agent=gemini-cli",
                          content=orjson.dumps(gemini.to_claude(body)), headers=agent)
    assert r.status_code == 200 and "unknown_hook_event" in r.text
    assert command.verdict(r.content, None).outcome == "blocked"
    r = await client.post("/v1/hooks/claude-code?action=coding&agent=vim",
                          content=orjson.dumps(gemini.to_claude(fixture("before_write_file"))),
                          headers=agent)
    verdict = command.verdict(r.content, "PreToolUse")
    assert verdict.outcome == "blocked" and "invalid_hook_url" in verdict.reason


async def test_decisions_are_listed_by_agent(client, agent):
    """GET /v1/decisions?agent= (SPEC §20): the hook decisions of that agent only; an
    argument named `agent` is not the agent."""
    await apply_mapping(client)  # Claude Code's tools too
    _, by_gemini = await ask(client, agent, "before_write_file")
    claude_body = {"session_id": "c-1", "cwd": "/work/repo", "hook_event_name": "PreToolUse",
                   "transcript_path": "/home/dev/.claude/projects/-work-repo/c-1.jsonl",
                   "tool_name": "Write", "tool_use_id": "toolu_agent",
                   "tool_input": {"file_path": "/work/repo/a", "content": "x",
                                  "agent": "gemini-cli"}}
    r = await client.post("/v1/hooks/claude-code?action=coding", json=claude_body,
                          headers=agent)
    by_claude = command.verdict(r.content, "PreToolUse")
    assert by_claude.outcome == "allow", by_claude

    async def listed(name: str) -> list[str]:
        r = await client.get("/v1/decisions", params={"agent": name})
        assert r.status_code == 200, r.text
        return [d["decision_id"] for d in r.json()["items"]]

    assert await listed("gemini-cli") == [decision_id(by_gemini)]
    assert await listed("claude-code") == [decision_id(by_claude)]
    assert await listed("codex") == []
    r = await client.get("/v1/decisions", params={"agent": "Gemini CLI"})
    assert r.status_code == 422 and "agent" in r.text
