"""A rule that does not compile names the field (the API answers 422 with it)."""

from __future__ import annotations

from typing import Any

import pytest

from app.policy.rules import RuleError, compile_rule

OK: dict[str, Any] = {"tools": ["Bash"], "when": {"command": ["rm *"]}, "effect": "deny"}


@pytest.mark.parametrize(("body", "field"), [
    ({**OK, "colour": "red"}, "colour"),
    ({"when": {"command": ["rm *"]}, "effect": "deny"}, "tools"),
    ({**OK, "tools": []}, "tools"),
    ({**OK, "tools": ["Bash", 3]}, "tools.1"),
    ({**OK, "tools": ["x" * 1001]}, "tools.0"),
    ({**OK, "effect": "allow"}, "effect"),
    ({**OK, "mode": "audit"}, "mode"),
    ({**OK, "project": 5}, "project"),
    ({**OK, "message": 5}, "message"),
    ({**OK, "when": {"command": ["ls", "   "]}}, "when.command.1"),
    ({**OK, "when": {"command": ["rm " + "x" * 1000]}}, "when.command.0"),
    ({**OK, "when": {"commands": ["rm *"]}}, "when.commands"),
    ({**OK, "when": {"paths": "x"}}, "when.paths"),
    ({**OK, "when": {"domains": ["a*b.example"]}}, "when.domains.0"),
    ({**OK, "when": {"domains": ["xn--a.example", "bad..host\u0000"]}}, "when.domains.1"),
    # A port is no part of a host: `evil.example:8080` would never match, so a deny on it
    # would silently deny nothing.
    ({**OK, "when": {"domains": ["github.com", "evil.example:8080"]}}, "when.domains.1"),
    ({**OK, "when": {"args": {"branch": None}}}, "when.args.branch"),
    ({**OK, "when": {"args": {"n": float("inf")}}}, "when.args.n"),
    ({**OK, "when": {"expr": "size("}}, "when.expr"),
    ({**OK, "when": {"expr": "1 + 'a' == 2"}}, "when.expr"),
    ({**OK, "when": {"expr": "foo.bar == 1"}}, "when.expr"),
    ({**OK, "when": {"expr": "tool.name + 'x'"}}, "when.expr"),
    ({**OK, "when": {"expr": "1 + 2"}}, "when.expr"),
    ({**OK, "capability": {"writes": False}}, "capability"),
    ({**OK, "effect": "classify"}, "capability"),
    ({**OK, "effect": "classify", "capability": {"writes": 1}}, "capability.writes"),
    ({**OK, "effect": "classify", "capability": {"color": True}}, "capability.color"),
    ({**OK, "effect": "classify", "capability": {"safety_category": "x"}},
     "capability.safety_category"),
])
def test_a_bad_rule_names_its_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(RuleError) as caught:
        compile_rule("r", body)
    assert caught.value.field == field


def test_a_good_rule_is_normalised() -> None:
    rule = compile_rule("r", {**OK, "when": {**OK["when"], "expr": "tool.name == 'Bash'"}},
                        version=3)
    assert rule.version == 3 and rule.mode == "enforce" and rule.project is None
    assert rule.body == {"project": None, "tools": ["Bash"],
                         "when": {"command": ["rm *"], "expr": "tool.name == 'Bash'"},
                         "effect": "deny", "capability": None, "message": None,
                         "mode": "enforce"}
    # What compile_rule returns compiles to itself (export round-trips).
    assert compile_rule("r", rule.body).body == rule.body
