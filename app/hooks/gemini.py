"""Gemini CLI's BeforeTool/AfterTool command hooks (SPEC §15, §20), on the route's protocol.

Gemini CLI's hook input (its packages/core/src/hooks, 0.61): `session_id`,
`transcript_path`, `cwd`, `hook_event_name` (`BeforeTool`, `AfterTool`), `timestamp`,
`tool_name`, `tool_input`, `mcp_context` (MCP tools: `server_name`, `tool_name`, the
server's command or URL), `original_request_name`, and after the call `tool_response`
(`llmContent`, `returnDisplay`, `error`). Its output: `{"decision": "deny", "reason"}` (or
exit code 2 with the reason on stderr) blocks the call; `"ask"` makes Gemini CLI ask its
user even in yolo mode; a hook that fails otherwise, or times out, lets the call run.

`to_claude` turns such a body into the Claude Code hook body the route answers. Gemini
CLI's built-in tools keep their own names (`write_file`, `run_shell_command`), registered
by examples/gemini-cli.yaml with their own path arguments; its MCP tools (`mcp_S_T`)
become `mcp__S__T`, decided as `S.T` like Claude Code's. Gemini CLI sends no call id: the
call's own digest (session, tool, arguments) ties an AfterTool to its BeforeTool.
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from app.hooks.command import Verdict

BEFORE = "BeforeTool"
AFTER = "AfterTool"
MCP_PREFIX = "mcp_"  # Gemini CLI's MCP_TOOL_PREFIX
# Gemini CLI's TOOL_LEGACY_ALIASES: an old name it still accepts, decided as the new one.
ALIASES = {"search_file_content": "grep_search"}


def claude_tool(body: dict[str, Any]) -> Any:
    """The name the route decides on. Only a tool that Gemini CLI itself names `mcp_...`
    is an MCP tool: `mcp_context` says where its server name ends (a server `my_fs` makes
    `mcp_my_fs_write`), never that a built-in tool is an MCP server's, so no body field
    can make `run_shell_command` a call of toolgate's MCP gateway (SPEC §20)."""
    name = body.get("tool_name")
    if not isinstance(name, str):
        return name  # left for the route to refuse, naming the field
    if not name.startswith(MCP_PREFIX):
        return ALIASES.get(name, name)
    rest = name[len(MCP_PREFIX):]
    mcp = body.get("mcp_context")
    server = mcp.get("server_name") if isinstance(mcp, dict) else None
    if isinstance(server, str) and server and rest.startswith(server + "_") \
            and len(rest) > len(server) + 1:
        return f"mcp__{server}__{rest[len(server) + 1:]}"
    server, sep, tool = rest.partition("_")  # Gemini CLI's parseMcpToolName
    if sep and server and tool:
        return f"mcp__{server}__{tool}"
    return name  # `mcp_x`: no server in it; decided (and refused) under its own name


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


def command_output(verdict: Verdict) -> dict[str, Any] | None:
    """What `toolgate hook gemini-cli` prints: Gemini CLI reads stdout's JSON first, on
    exit code 2 too, so a block prints a deny (never nothing an allow could be read from)."""
    if verdict.outcome in ("allow", "ask"):
        return {"decision": verdict.outcome, "reason": verdict.reason}
    if verdict.outcome == "done":
        return {}
    return {"decision": "deny", "reason": verdict.reason}
