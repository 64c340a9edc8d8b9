"""Qwen Code's hooks (SPEC §20): Claude Code's protocol with Qwen Code's own tool names.

Qwen Code (`@qwen-code/qwen-code`, 0.24; its docs/features/hooks.md) sends `session_id`,
`transcript_path`, `cwd`, `hook_event_name` (`PreToolUse`, `PostToolUse`,
`PostToolUseFailure`), `permission_mode`, `tool_name` (`write_file`, `edit`,
`run_shell_command`, ... and `mcp__S__T` for MCP tools), `tool_input`, `tool_use_id`,
`tool_call_id`, and after the call `tool_response` or `error`. It reads Claude Code's
answer: `hookSpecificOutput.permissionDecision` `allow` (run it without Qwen Code's own
approval prompt), `deny`, `ask` (headless: deny); a command hook's exit code 2 blocks with
stderr as the reason; any other exit code, an HTTP hook's non-2xx answer, a refused
connection or a timeout is a non-blocking error: Qwen Code's approval mode then decides.

So the body goes to the route as it is, from a command hook (`toolgate hook qwen-code`) or
from Qwen Code's HTTP hook (`POST /v1/hooks/claude-code?agent=qwen-code`), and the answer
is Claude Code's (app/hooks/claude.py `command_output`). Only the tools differ: the mapping
is examples/qwen-code.yaml.
"""

from __future__ import annotations

from typing import Any


def to_claude(body: Any) -> Any:
    """Qwen Code's body is already the route's."""
    return body
