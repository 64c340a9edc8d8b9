"""A rule body (SPEC §18) checked and compiled once, when it is stored: every pattern, glob
and CEL program ready, so evaluating it per call compiles nothing. A body that does not
compile raises RuleError naming the field."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from app.policy.rules.cel import Expression, compile_expression
from app.policy.rules.domains import DomainPattern, domain_pattern
from app.policy.rules.model import EFFECTS, MODES, RuleError
from app.policy.rules.pathmatch import PathSet, path_pattern, path_set
from app.policy.rules.patterns import (
    ArgCondition,
    CommandSet,
    NamePattern,
    arg_condition,
    command_pattern,
    command_set,
    name_pattern,
)

RULE_FIELDS = ("project", "tools", "when", "effect", "capability", "message", "mode")
WHEN_FIELDS = ("command", "paths", "domains", "args", "expr")
CAPABILITY_FIELDS = ("writes", "read_only", "checkpointable", "unsafe", "safety_category",
                     "skill_category")
SAFETY_CATEGORIES = ("safe", "destructive")
MAX_PATTERN_CHARS = 1000
MAX_PATTERNS = 1000  # per list
MAX_MESSAGE_CHARS = 2000


@dataclass(frozen=True, slots=True)
class CompiledRule:
    rule_id: str
    version: int
    project: str | None
    effect: str
    mode: str
    message: str | None
    capability: dict[str, Any] | None
    body: dict[str, Any]  # normalised: every field present, `when` with the given keys
    tools: tuple[NamePattern, ...]
    command: CommandSet | None
    paths: PathSet | None
    domains: tuple[DomainPattern, ...] | None
    args: tuple[ArgCondition, ...] | None
    expr: Expression | None

    @property
    def needs_shell(self) -> bool:
        return self.command is not None or self.paths is not None or self.domains is not None


def _strings(value: Any, field: str, *, compile_one: Any) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value:
        raise RuleError(field, "must be a non-empty list of strings")
    if len(value) > MAX_PATTERNS:
        raise RuleError(field, f"at most {MAX_PATTERNS} patterns")
    out = []
    for i, item in enumerate(value):
        where = f"{field}.{i}"
        if not isinstance(item, str) or not item.strip():
            raise RuleError(where, "must be a non-empty string")
        if len(item) > MAX_PATTERN_CHARS:
            raise RuleError(where, f"a pattern has at most {MAX_PATTERN_CHARS} characters")
        if "\x00" in item or "\x01" in item or "\x02" in item:
            raise RuleError(where, "holds a control character")
        try:
            out.append(compile_one(item))
        except ValueError as e:
            raise RuleError(where, str(e)) from None
    return tuple(out)


def _args(value: Any) -> tuple[ArgCondition, ...]:
    if not isinstance(value, dict) or not value:
        raise RuleError("when.args", "must be a non-empty object of argument values")
    out = []
    # In name order: `matched` names the first, and a store may reorder an object's keys.
    for name, expected in sorted(value.items()):
        where = f"when.args.{name}"
        if not name:
            raise RuleError(where, "an argument name is a non-empty string")
        if isinstance(expected, float) and not math.isfinite(expected):
            raise RuleError(where, "must be finite")
        if not isinstance(expected, str | int | float | bool) or expected is None:
            raise RuleError(where, "must be a string, a number or a boolean")
        if isinstance(expected, str) and len(expected) > MAX_PATTERN_CHARS:
            raise RuleError(where, f"a pattern has at most {MAX_PATTERN_CHARS} characters")
        out.append(arg_condition(name, expected))
    return tuple(out)


def _capability(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        raise RuleError("capability", "must be a non-empty object")
    for key, item in value.items():
        where = f"capability.{key}"
        if key not in CAPABILITY_FIELDS:
            raise RuleError(where, "unknown field")
        if key == "safety_category":
            if item not in SAFETY_CATEGORIES:
                raise RuleError(where, "must be 'safe' or 'destructive'")
        elif key == "skill_category":
            if not isinstance(item, str) or not item or len(item) > 200:
                raise RuleError(where, "must be a non-empty string (at most 200 characters)")
        elif not isinstance(item, bool):
            raise RuleError(where, "must be a boolean")
    return dict(value)


def compile_rule(rule_id: str, body: Any, *, version: int = 1) -> CompiledRule:
    """Check and compile one rule body; RuleError naming the first bad field."""
    if not isinstance(body, dict):
        raise RuleError("body", "a rule is an object")
    for key in body:
        if key not in RULE_FIELDS:
            raise RuleError(str(key), "unknown field")
    project = body.get("project")
    if project is not None and (not isinstance(project, str) or not project):
        raise RuleError("project", "must be null or a non-empty string")
    if "tools" not in body:
        raise RuleError("tools", "is required")
    tools = _strings(body["tools"], "tools", compile_one=name_pattern)
    effect = body.get("effect")
    if effect not in EFFECTS:
        raise RuleError("effect", "must be 'deny', 'ask' or 'classify'")
    mode = body.get("mode", "enforce")
    if mode not in MODES:
        raise RuleError("mode", "must be 'enforce' or 'shadow'")
    message = body.get("message")
    if message is not None and (not isinstance(message, str) or len(message) > MAX_MESSAGE_CHARS):
        raise RuleError("message", f"must be null or a string of at most {MAX_MESSAGE_CHARS} "
                        "characters")
    capability = body.get("capability")
    if capability is not None:
        if effect != "classify":
            raise RuleError("capability", "only a classify rule has a capability")
        capability = _capability(capability)
    elif effect == "classify":
        raise RuleError("capability", "a classify rule says what the call is")
    when = body.get("when") or {}
    if not isinstance(when, dict):
        raise RuleError("when", "must be an object")
    for key in when:
        if key not in WHEN_FIELDS:
            raise RuleError(f"when.{key}", "unknown field")
    command = paths = domains = args = expr = None
    if "command" in when:
        command = command_set(
            _strings(when["command"], "when.command", compile_one=command_pattern))
    if "paths" in when:
        paths = path_set(_strings(when["paths"], "when.paths", compile_one=path_pattern))
    if "domains" in when:
        domains = _strings(when["domains"], "when.domains", compile_one=domain_pattern)
    if "args" in when:
        args = _args(when["args"])
    if "expr" in when:
        source = when["expr"]
        if not isinstance(source, str) or not source.strip():
            raise RuleError("when.expr", "must be a non-empty string")
        if len(source) > MAX_PATTERN_CHARS:
            raise RuleError("when.expr", f"at most {MAX_PATTERN_CHARS} characters")
        try:
            expr = compile_expression(source)
        except ValueError as e:
            raise RuleError("when.expr", str(e)) from None
    normal = {"project": project, "tools": list(body["tools"]), "when": dict(when),
              "effect": effect, "capability": capability, "message": message, "mode": mode}
    return CompiledRule(rule_id, version, project, effect, mode, message, capability, normal,
                        tools, command, paths, domains, args, expr)
