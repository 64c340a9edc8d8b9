"""Claude Code's hook protocol (SPEC §15), as plain data in and out: a hook body becomes a
`HookCall` (or `Undecidable`, naming what is wrong), a decision becomes the hook's answer.
Nothing here reads storage or the network; app/hooks/service.py runs the decision.

Claude Code's input (docs.claude.com, "Hooks reference"): `hook_event_name`, `session_id`,
`cwd`, `tool_name`, `tool_input`, `tool_use_id`, and after the call `tool_response`
(PostToolUse) or `error` (PostToolUseFailure). Its output for PreToolUse:
`{"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision":
"allow"|"deny"|"ask", "permissionDecisionReason": "..."}}`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

PRE = "PreToolUse"
POST = "PostToolUse"
POST_FAILURE = "PostToolUseFailure"
EVENTS = (PRE, POST, POST_FAILURE)

MCP_PREFIX = "mcp__"
# A session id that can be part of a plan id as it is (NAME_PATTERN, with room to spare);
# any other is replaced by its digest, so a plan id is always a valid name.
_PLAIN_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,150}\Z")
# tool_use_id is searched for in the decision log's text (service.py): only plain ids.
TOOL_USE_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}\Z")
MAX_ERROR = 2000  # an outcome's `error` (SPEC §11)


class Undecidable(Exception):
    """A hook body toolgate cannot decide on: answered deny, never an empty allow."""

    def __init__(self, message: str, *, code: str = "invalid_hook_input",
                 event: str | None = None, error: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.event = event
        self.error = error  # a deny's own class (the deny table's), not "could not decide"


@dataclass(frozen=True, slots=True)
class HookCall:
    event: str
    session_id: str
    tool_use_id: str
    cwd: str
    agent_tool: str  # the agent's own name for the tool (`Write`, `mcp__fs__write_file`)
    tool: str        # the name toolgate decides on (`Write`, `fs.write_file`)
    args: dict[str, Any]
    failure: str | None = None  # PostToolUseFailure's error text
    home: str | None = None  # the agent's home, where its transcript_path says (home_of)


def decided_name(agent_tool: str) -> str:
    """`mcp__S__T` is the MCP gateway's `S.T` (SPEC §14): one registry entry, one name in
    stats and replay, whichever way the call came. Every other tool keeps its name.

    S is the text up to the first `__` after `mcp__`, T all the rest, as Claude Code
    itself reads the name (2.1: `split("__")`, the server the first part, the tool the
    others joined again). Claude Code has already turned every
    character of the server's and the tool's names outside [A-Za-z0-9_-] into `_`, which
    cannot be undone: a tool `a.b` of server S is decided as `S.a_b`, and is registered
    under that name (docs/coding-agents.md, "MCP tools")."""
    if agent_tool.startswith(MCP_PREFIX):
        server, sep, tool = agent_tool[len(MCP_PREFIX):].partition("__")
        if sep and server and tool:
            return f"{server}.{tool}"
    return agent_tool


def gateway_of(agent_tool: str, gateways: frozenset[str]) -> str | None:
    """The gateway server a `mcp__S__T` call goes to, when S is one of toolgate's MCP
    gateways (the hook URL's `?gateway=S`): that gateway decides the call itself, before it
    forwards anything, and reports its outcome, so the hook does not decide it a second
    time under another name (SPEC §14, §15)."""
    if agent_tool.startswith(MCP_PREFIX):
        server, sep, _ = agent_tool[len(MCP_PREFIX):].partition("__")
        if sep and server in gateways:
            return server
    return None


def gateway_hint(agent_tool: str) -> str:
    """For an unregistered `mcp__S__T`: how to say that S is toolgate's MCP gateway."""
    if agent_tool.startswith(MCP_PREFIX):
        server, sep, _ = agent_tool[len(MCP_PREFIX):].partition("__")
        if sep and server:
            return (f"; if the MCP server '{server}' is toolgate's MCP gateway, name it on "
                    f"the hook URL, ?gateway={server}, and the gateway decides its calls")
    return ""


def session_plan_id(session_id: str) -> str:
    """The plan of an agent session (`?action=`): one per session_id, the same on every
    replica, so it needs no table of its own."""
    if _PLAIN_SESSION.match(session_id):
        return f"session:{session_id}"
    return "session:sha256-" + hashlib.sha256(session_id.encode()).hexdigest()[:40]


def _text(body: dict[str, Any], field: str, missing: list[str]) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        missing.append(field)
        return ""
    return value


def parse(body: Any) -> HookCall:
    """The hook call in a parsed JSON body; raises Undecidable naming every bad field."""
    if not isinstance(body, dict):
        raise Undecidable("the hook body is not a JSON object")
    event = body.get("hook_event_name")
    if not isinstance(event, str):
        raise Undecidable("hook_event_name is missing (a string: PreToolUse, PostToolUse "
                          "or PostToolUseFailure)")
    if event not in EVENTS:
        raise Undecidable(f"hook event '{event[:100]}' is not one toolgate answers "
                          f"(PreToolUse, PostToolUse, PostToolUseFailure)",
                          code="unknown_hook_event", event=event)
    bad: list[str] = []
    session_id = _text(body, "session_id", bad)
    tool_use_id = _text(body, "tool_use_id", bad)
    if tool_use_id and not TOOL_USE_ID.match(tool_use_id):
        bad.append("tool_use_id")
    cwd = _text(body, "cwd", bad)
    if cwd and not cwd.startswith("/"):
        bad.append("cwd")  # the sandbox root: an absolute path
    agent_tool = _text(body, "tool_name", bad)
    args = body.get("tool_input")
    if not isinstance(args, dict):
        bad.append("tool_input")
    failure = None
    if event == POST_FAILURE:
        error = body.get("error")
        failure = (error.replace("\x00", "") if isinstance(error, str)  # Postgres keeps no NUL
                   else "the tool call failed")[:MAX_ERROR]
    if bad:
        raise Undecidable(f"the {event} hook body lacks valid {', '.join(bad)}",
                          event=event)
    assert isinstance(args, dict)
    return HookCall(event=event, session_id=session_id, tool_use_id=tool_use_id, cwd=cwd,
                    agent_tool=agent_tool, tool=decided_name(agent_tool), args=args,
                    failure=failure, home=home_of(body.get("transcript_path")))


# Where each agent keeps its transcripts, under the user's home: Claude Code
# (~/.claude/projects/...), Gemini CLI (~/.gemini/tmp/...), Qwen Code (~/.qwen/tmp/...),
# Codex CLI (~/.codex/sessions/...), Copilot CLI (~/.copilot/...).
_HOME_MARKERS = ("/.claude/projects/", "/.gemini/tmp/", "/.qwen/", "/.codex/", "/.copilot/")
_PLAIN_HOME = re.compile(r"/[^\x00]{0,4000}\Z")


def home_of(transcript_path: Any) -> str | None:
    """The agent's home directory, read from where the agent keeps the session's transcript
    (its runtime writes that field, not the model): call rules resolve `~` and `$HOME`
    with it (docs/rules.md), and a deny rule on `~/...` can tell nothing without it. None
    when the path is not under one of the agents' own folders; the hook URL's `?home=`
    (the command hooks send their HOME) says it for certain."""
    if not isinstance(transcript_path, str):
        return None
    for marker in _HOME_MARKERS:
        at = transcript_path.find(marker)
        if at > 0 and _PLAIN_HOME.match(home := transcript_path[:at]) and ".." not in home:
            return home
    return None


def authorize_body(call: HookCall, plan_id: str, *, agent: str = "claude-code",
                   root: str | None = None, home: str | None = None) -> dict[str, Any]:
    """The authorize request (SPEC §4) for a PreToolUse: the plan, the tool's arguments as
    the agent sent them, the sandbox root (the session's cwd, or another root the operator
    named, `choose_root`; no sandbox_id: the agent's own sandbox is not toolgate's to
    assert). What the tool does comes from the registry (examples/claude-code.yaml); the
    metadata ties the decision to the call and names the agent."""
    context: dict[str, Any] = {
        "sandbox_root": root or call.cwd,
        "metadata": {"hook": agent, "session_id": call.session_id,
                     "tool_use_id": call.tool_use_id, "agent_tool": call.agent_tool},
    }
    if home := home or call.home:
        context["variables"] = {"HOME": home}
    return {"plan_id": plan_id, "tool": {"name": call.tool, "args": call.args},
            "context": context}


def choose_root(call: HookCall, path_args: tuple[str, ...], roots: tuple[str, ...],
                escapes: Any) -> str:
    """The sandbox root a call is decided under: the session's cwd, unless every path
    argument of the call stays inside one of the other roots the operator named on the
    hook (`--root`, Gemini CLI's --include-directories) and not inside cwd. Only the
    operator's roots can be chosen, and the core still checks the paths against the one
    chosen (`escapes(args, path_args, root)`: app/policy/paths.find_escape)."""
    if not roots or not path_args or escapes(call.args, path_args, call.cwd) is None:
        return call.cwd
    for root in roots:
        if escapes(call.args, path_args, root) is None:
            return root
    return call.cwd


def reason(deny: dict[str, Any], decision_id: str) -> str:
    """`<ErrorClass> (<code>): <message> [decision <id>]`, what the model reads."""
    return f"{deny['error']} ({deny['code']}): {deny['message']} [decision {decision_id}]"


def pre_answer(decision: str, why: str) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": PRE, "permissionDecision": decision,
                                   "permissionDecisionReason": why}}


def command_output(verdict: Any) -> dict[str, Any] | None:
    """What `toolgate hook claude-code` prints for a verdict (app/hooks/command.py): the
    answer rebuilt from the verdict alone, never the service's text passed on (no field of
    it but the decision and its reason reaches Claude Code). A block prints nothing: Claude
    Code shows exit code 2's stderr to the model."""
    if verdict.outcome in ("allow", "ask"):
        return pre_answer(verdict.outcome, verdict.reason)
    if verdict.outcome == "done":
        return {}
    return None


def refusal(code: str, message: str, event: str | None,
            error: str | None = None) -> dict[str, Any]:
    """The answer to a body toolgate cannot decide on, or (`error`: a deny table class)
    a call it denies without a decision of the pipeline. A PreToolUse (or a body whose
    event is unknown) is denied; a PostToolUse whose outcome cannot be recorded says so to
    the model (`decision: block`, Claude Code's way of showing a PostToolUse's reason)."""
    why = (f"{error} ({code}): {message}" if error else
           f"ToolgateUnavailableError ({code}): toolgate could not decide: {message}")
    if event in (POST, POST_FAILURE):
        return {"decision": "block", "reason": why}
    answer = pre_answer("deny", why)
    # Claude Code's older top-level form too, which every version reads as a deny.
    answer.update({"decision": "block", "reason": why})
    return answer
