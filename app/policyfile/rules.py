"""The policy file's `rules:` section (SPEC §18): each rule's normal form is the body the
core's compile_rule normalises, the same the service stores and answers, so a file and an
export compare equal; a rule that does not compile is a problem at its field's line."""

from __future__ import annotations

from typing import Any

from app.policy.rules import RuleError, compile_rule
from app.policyfile.yamlfile import Path, Problem, dotted
from app.rules.schemas import RuleIn

# A GET answer's fields that are the rule's (the others are the service's).
RULE_FIELDS = ("project", "tools", "when", "effect", "capability", "message", "mode")


def rule_form(m: RuleIn) -> dict[str, Any]:
    """The stored body (RuleError when the rule does not compile). The file names the
    rule by its key; its id does not change what it compiles to."""
    return dict(compile_rule("policy-file", m.model_dump(exclude_none=True)).body)


def rule_problem(name: str, exc: RuleError, lines: dict[Path, int]) -> Problem:
    path: Path = ("rules", name, *(int(p) if p.isdigit() else p
                                   for p in exc.field.split(".") if p))
    probe = path
    while probe and probe not in lines:
        probe = probe[:-1]
    return Problem(lines.get(probe), dotted(path), exc.message)
