"""Codex CLI's PreToolUse/PostToolUse command hooks (SPEC §20), on the route's protocol.

Codex CLI (`@openai/codex`, 0.171; codex-rs/hooks) sends Claude Code's body: `session_id`,
`turn_id`, `transcript_path`, `cwd`, `hook_event_name` (`PreToolUse`, `PostToolUse`),
`model`, `permission_mode`, `tool_name`, `tool_input`, `tool_use_id` (the model's call id)
and after the call `tool_response` (text). Its tool names: `Bash` for its shell tools
(`exec_command`, `shell_command`; `tool_input` is `{"command": ...}`), `apply_patch` (its
file edits, `{"command": "<the patch>"}`), `mcp__S__T` for MCP tools, and every other
function tool under its own name (`view_image`, `write_stdin`, ...).

Codex reads a PreToolUse's answer as deny only: exit code 2 with the reason on stderr (or
`permissionDecision: "deny"` on stdout) blocks the call; an empty answer lets Codex's own
approval policy decide; any other failure (another exit code, a timeout, JSON it cannot
read) lets the call run. So `toolgate hook codex` prints nothing on an allow and exits 2 on
everything else, an `ask` included (Codex cannot ask its user from a hook).

`apply_patch` names its files inside the patch, where no path check can see them: the hook
adds them to the call's arguments as `paths` (a list, the mapping's `path_args`), read from
the patch's `*** Add File:`, `*** Update File:`, `*** Delete File:` and `*** Move to:`
lines, so a patch that touches a file outside the sandbox root is denied like a `Write`.
"""

from __future__ import annotations

import re
from typing import Any

from app.hooks.command import Verdict

APPLY_PATCH = "apply_patch"
PATHS = "paths"  # the argument the hook adds to apply_patch's (examples/codex.yaml)
# The patch grammar's file headers (codex-rs/apply-patch): the path is the rest of the line.
_FILE_LINE = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.*)$",
                        re.MULTILINE)


def patch_paths(patch: str) -> list[str]:
    """Every file a patch adds, changes, deletes or moves to, in order, once each."""
    seen: dict[str, None] = {}
    for match in _FILE_LINE.finditer(patch):
        seen.setdefault(match.group(1).rstrip("\r"), None)
    return list(seen)


def to_claude(body: Any) -> Any:
    """The route's body for a Codex CLI hook body: the same fields, with an apply_patch's
    files named in `paths` (whatever `paths` the call held is replaced: only the patch
    says what it touches). Anything else is passed on as it is, for the route to refuse."""
    if not isinstance(body, dict) or body.get("tool_name") != APPLY_PATCH:
        return body
    args = body.get("tool_input")
    if not isinstance(args, dict):
        return body
    patch = args.get("command", args.get("input"))
    paths = patch_paths(patch) if isinstance(patch, str) else []
    return {**body, "tool_input": {**args, PATHS: paths}}


def command_output(verdict: Verdict) -> dict[str, Any] | None:
    """Nothing on stdout, ever: an allow or a PostToolUse's `{}` is an empty answer, and a
    block is exit code 2 with the reason on stderr (app/cli/hook.py)."""
    return None
