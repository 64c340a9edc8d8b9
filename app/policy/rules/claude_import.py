"""Claude Code's permission rules as toolgate rules (SPEC §18 "Importing Claude Code's
rules"): a pure translation; `toolgate rules import claude-code` stores what it returns.

`permissions.deny` -> deny, `ask` -> ask, `allow` -> classify as a safe call
(`{unsafe: false, safety_category: safe}`). Entries:
- `Tool` -> that tool, every call; `mcp__S__T` -> `S.T`, `mcp__S` and `mcp__S__*` -> `S.*`;
- `Bash(spec)` -> `command: [spec]` (`npm run test:*` is the same prefix form here);
- `Read(p)` -> `paths: [p]` on Read, Grep, Glob and LS (Claude Code's Read rules cover its
  file-reading tools); `Edit(p)` on Edit, MultiEdit, Write and NotebookEdit (likewise);
  `Write(p)` on Write; `NotebookEdit(p)` on NotebookEdit;
- `WebFetch(domain:host)` -> `domains: [host]` on WebFetch.
Anything else (another tool with a specifier, an empty specifier, a rule that does not
compile) is returned as unmappable, with the reason, and yields no rule.
"""

from __future__ import annotations

import re
from typing import Any

from app.policy.rules.compile import compile_rule
from app.policy.rules.model import RuleError

LISTS = (("deny", "deny"), ("ask", "ask"), ("allow", "classify"))
SAFE = {"unsafe": False, "safety_category": "safe"}
READ_TOOLS = ["Read", "Grep", "Glob", "LS"]
EDIT_TOOLS = ["Edit", "MultiEdit", "Write", "NotebookEdit"]
PATH_TOOLS = {"Read": READ_TOOLS, "Edit": EDIT_TOOLS, "Write": ["Write"],
              "MultiEdit": ["MultiEdit"], "NotebookEdit": ["NotebookEdit"]}
_ENTRY = re.compile(r"^([A-Za-z0-9_.*-]+)(?:\((.*)\))?$", re.DOTALL)


def _tool_name(name: str) -> str:
    if name.startswith("mcp__"):
        server, _, tool = name[5:].partition("__")
        return f"{server}.{tool or '*'}"
    return name


def _translate(entry: str) -> tuple[list[str], dict[str, Any]]:
    """(tools, when); ValueError with the reason when the entry cannot be mapped."""
    m = _ENTRY.match(entry.strip())
    if not m:
        raise ValueError("not a Claude Code permission rule (Tool or Tool(specifier))")
    name, spec = m.group(1), m.group(2)
    if spec is None:
        if name.startswith("mcp__") and not name[5:].partition("__")[0]:
            raise ValueError("an MCP rule names its server")
        return [_tool_name(name)], {}
    if not spec.strip():
        raise ValueError("an empty specifier")
    if name == "Bash":
        return ["Bash"], {"command": [spec]}
    if name in PATH_TOOLS:
        return list(PATH_TOOLS[name]), {"paths": [spec]}
    if name == "WebFetch":
        if not spec.startswith("domain:") or not spec[7:]:
            raise ValueError("only WebFetch(domain:HOST) is mapped")
        return ["WebFetch"], {"domains": [spec[7:]]}
    raise ValueError(f"a specifier on {name} has no toolgate condition")


def import_claude_code(settings: Any, *, project: str | None = None
                       ) -> tuple[dict[str, dict[str, Any]], list[dict[str, str]]]:
    """(rules as {rule_id: body} in the file's order, unmappable entries as
    {"list", "entry", "reason"}).

    Rule ids are `claude-code-<list>-NNN` in the order of the settings' lists, so a rule
    set's order (by rule_id) follows the file's order within each list."""
    rules: dict[str, dict[str, Any]] = {}
    skipped: list[dict[str, str]] = []
    permissions = settings.get("permissions") if isinstance(settings, dict) else None
    if not isinstance(permissions, dict):
        return rules, [{"list": "permissions", "entry": "",
                        "reason": "no permissions object in the settings"}]
    for key, effect in LISTS:
        entries = permissions.get(key, [])
        if not isinstance(entries, list):
            skipped.append({"list": key, "entry": "", "reason": "not a list"})
            continue
        for i, entry in enumerate(entries):
            if not isinstance(entry, str):
                skipped.append({"list": key, "entry": repr(entry), "reason": "not a string"})
                continue
            try:
                tools, when = _translate(entry)
            except ValueError as e:
                skipped.append({"list": key, "entry": entry, "reason": str(e)})
                continue
            rule_id = f"claude-code-{key}-{i + 1:03d}"
            body: dict[str, Any] = {"project": project, "tools": tools, "effect": effect,
                                    "message": f"Claude Code settings: {key} {entry}"}
            if when:
                body["when"] = when
            if effect == "classify":
                body["capability"] = dict(SAFE)
            try:
                compile_rule(rule_id, body)
            except RuleError as e:
                skipped.append({"list": key, "entry": entry,
                                "reason": f"{e.field}: {e.message}"})
                continue
            rules[rule_id] = body
    return rules, skipped
