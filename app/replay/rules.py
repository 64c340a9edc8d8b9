"""Call rules in replay (SPEC §12, §18). Pure.

A record made with rules defined holds every rule that matched (`detail.rules`), the tool
as checks 1-10 saw it (`detail.tool`: classified, needing approval after an ask rule) and,
when a rule changed it, the tool before (`detail.before_rules`). So:
- without candidate rules, the recorded rules decide as they did: a recorded enforce deny
  stays `rule_denied`; a candidate registry entry gets the recorded rules' changes again;
- with candidate rules, the tool before any rule is evaluated under them, as decide_with
  does (app/authorize/rules.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.authorize.rules import applied, ask_without_profile
from app.policy.model import Tool
from app.policy.rules import RuleCall, RuleOutcome, RuleSet, evaluate_rules

FIELDS = ("writes", "checkpointable", "unsafe", "destructive", "skill_category",
          "requires_approval")


def denied_as_recorded(detail: dict[str, Any]) -> bool:
    return any(r.get("effect") == "deny" and r.get("mode") == "enforce"
               for r in detail.get("rules") or ())


def asked_as_recorded(detail: dict[str, Any]) -> bool:
    return any(r.get("effect") == "ask" and r.get("mode") == "enforce"
               for r in detail.get("rules") or ())


def unruled(tool: Tool, detail: dict[str, Any]) -> Tool:
    """The recorded tool as it was before any rule changed it."""
    before = detail.get("before_rules")
    return replace(tool, **{k: before[k] for k in FIELDS if k in before}) if before else tool


def as_recorded(tool: Tool, detail: dict[str, Any]) -> Tool:
    """A candidate registry entry's tool with the recorded rules' changes made again."""
    before = detail.get("before_rules")
    if not before:
        return tool
    recorded = detail["tool"]
    return replace(tool, **{k: recorded.get(k, False) for k in FIELDS
                            if recorded.get(k, False) != before.get(k)})


def outcome(ruleset: RuleSet, tool: Tool, detail: dict[str, Any], *, plan_id: str | None,
            project: str | None, action_id: str | None, shell_arg: str | None,
            url_args: tuple[str, ...], read_only: bool) -> RuleOutcome:
    context = detail["context"]
    home = (context.get("variables") or {}).get("HOME")
    return evaluate_rules(ruleset, RuleCall(
        tool_name=tool.name, args=tool.args, shell_arg=shell_arg, path_args=tool.path_args,
        url_args=url_args, sandbox_root=context.get("sandbox_root"),
        home=home if isinstance(home, str) and home else None,
        capability={"writes": tool.writes, "read_only": read_only and not tool.writes,
                    "checkpointable": tool.checkpointable, "unsafe": tool.unsafe,
                    "safety_category": "destructive" if tool.destructive else "safe",
                    "skill_category": tool.skill_category},
        plan={"id": plan_id, "project": project, "action": action_id}, context=context))


__all__ = ["applied", "ask_without_profile", "as_recorded", "asked_as_recorded",
           "denied_as_recorded", "outcome", "unruled"]
