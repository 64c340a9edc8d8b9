"""Gemini CLI's BeforeTool/AfterTool command hooks (SPEC §15), on Claude Code's protocol.

Gemini CLI's hook input (geminicli.com/docs/hooks/reference): `session_id`,
`transcript_path`, `cwd`, `hook_event_name` (`BeforeTool`, `AfterTool`), `timestamp`,
`tool_name`, `tool_input`, `mcp_context` (MCP tools: `server_name`, `tool_name`), and after
the call `tool_response` (`llmContent`, `returnDisplay`, `error`). Its output: `{"decision":
"deny", "reason"}` (or exit code 2 with the reason on stderr) blocks the call.

`to_claude` turns such a body into the Claude Code hook body toolgate's route answers, so
both agents are decided on one mapping: Gemini CLI's built-in tools become the Claude Code
tools of examples/claude-code.yaml that do the same (`write_file` is `Write`), and its MCP
tools (`mcp_S_T`) become `mcp__S__T`, decided as `S.T`. Gemini CLI sends no call id: the
call's own digest (session, tool, arguments) ties an AfterTool to its BeforeTool.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

BEFORE = "BeforeTool"
AFTER = "AfterTool"

# Gemini CLI's built-in tools and the Claude Code tool that does the same. Their path
# arguments have the same names (`file_path`), so the mapping's path_args apply as they are.
TOOLS = {
    "read_file": "Read", "read_many_files": "Read", "write_file": "Write",
    "replace": "Edit", "glob": "Glob", "search_file_content": "Grep",
    "grep_search": "Grep", "list_directory": "LS", "run_shell_command": "Bash",
    "web_fetch": "WebFetch", "google_web_search": "WebSearch",
}


def claude_tool(body: dict[str, Any]) -> Any:
    name = body.get("tool_name")
    if not isinstance(name, str):
        return name  # left for the route to refuse, naming the field
    mcp = body.get("mcp_context")
    if isinstance(mcp, dict) and isinstance(mcp.get("server_name"), str) \
            and isinstance(mcp.get("tool_name"), str):
        return f"mcp__{mcp['server_name']}__{mcp['tool_name']}"
    if name.startswith("mcp_"):
        server, sep, tool = name[4:].partition("_")
        if sep and server and tool:
            return f"mcp__{server}__{tool}"
    return TOOLS.get(name, name)


def call_id(body: dict[str, Any]) -> str:
    """The same for a BeforeTool and the AfterTool of the same call."""
    try:
        text = orjson.dumps([body.get("session_id"), body.get("tool_name"),
                             body.get("tool_input")], option=orjson.OPT_SORT_KEYS)
    except TypeError:
        text = b""
    return "gemini-" + hashlib.sha256(text).hexdigest()[:40]


def to_claude(body: Any) -> Any:
    """The Claude Code hook body for a Gemini CLI hook body (anything else is passed on as
    it is, for the route to refuse)."""
    if not isinstance(body, dict):
        return body
    event = body.get("hook_event_name")
    out = {k: body[k] for k in ("session_id", "transcript_path", "cwd", "tool_input")
           if k in body}
    out["tool_name"] = claude_tool(body)
    out["tool_use_id"] = call_id(body)
    if event == BEFORE:
        out["hook_event_name"] = "PreToolUse"
    elif event == AFTER:
        response = body.get("tool_response")
        error = response.get("error") if isinstance(response, dict) else None
        if error:
            out["hook_event_name"] = "PostToolUseFailure"
            out["error"] = error if isinstance(error, str) else orjson.dumps(error).decode()
        else:
            out["hook_event_name"] = "PostToolUse"
            out["tool_response"] = response
    else:
        out["hook_event_name"] = event  # unknown: the route denies it, naming it
    return out


def from_claude(answer: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """(Gemini CLI's output, the reason when the call is blocked)."""
    specific = answer.get("hookSpecificOutput") or {}
    decision = specific.get("permissionDecision")
    why = specific.get("permissionDecisionReason") or answer.get("reason")
    if decision == "deny" or (decision is None and answer.get("decision") == "block"):
        return {"decision": "deny", "reason": why}, why or "denied by toolgate"
    if decision in ("allow", "ask"):
        return {"decision": decision, "reason": why}, None
    return {}, None
