"""The coding agents toolgate's hooks serve (SPEC §20), as data: each agent's name (the
`detail.agent` of its decisions, the verb of `toolgate hook <agent>`), how its hook body
becomes the Claude Code hook body the route answers, and how a verdict becomes what the
agent reads on stdout. Adding an agent is one entry here (and its module beside this one).

The exit code is not the agent's to choose: 0 on a well-formed allow (or ask, or a
PostToolUse's `{}`), 2 on everything else (app/hooks/command.py); every agent here reads 2
as "blocked".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from app.hooks import claude, codex, copilot, gemini, qwen
from app.hooks.command import Verdict

DEFAULT = "claude-code"


@dataclass(frozen=True, slots=True)
class Agent:
    name: str
    help: str
    # The agent's parsed hook body -> Claude Code's (anything else is passed on as it is,
    # for the route to refuse, naming what is wrong).
    to_claude: Callable[[Any], Any]
    # The verdict -> the JSON the agent reads on stdout (None: print nothing).
    output: Callable[[Verdict], dict[str, Any] | None]
    # False: the agent cannot ask its user from a hook (Codex CLI reads deny only), so
    # toolgate's `ask` is a block (app/cli/hook.py).
    asks: bool = True


def _same(body: Any) -> Any:
    return body


AGENTS: dict[str, Agent] = {a.name: a for a in (
    Agent("claude-code", "Claude Code's PreToolUse/PostToolUse command hook.", _same,
          claude.command_output),
    Agent("gemini-cli", "Gemini CLI's BeforeTool/AfterTool command hook.", gemini.to_claude,
          gemini.command_output),
    Agent("codex", "Codex CLI's PreToolUse/PostToolUse command hook (hooks.json).",
          codex.to_claude, codex.command_output, asks=False),
    Agent("qwen-code", "Qwen Code's PreToolUse/PostToolUse command hook.", qwen.to_claude,
          claude.command_output),
    Agent("copilot-cli", "GitHub Copilot CLI's preToolUse/postToolUse command hook.",
          copilot.to_claude, copilot.command_output),
)}

# The names a hook route accepts in ?agent= (an agent with HTTP hooks of its own may be
# added here without a command form).
NAMES = frozenset(AGENTS)
