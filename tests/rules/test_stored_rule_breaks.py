"""A stored rule that no longer compiles (a release reading rules more strictly) fails
closed: a deny or ask rule stands in as a deny of every call of its tools; a classify rule
is left out (that only takes back a loosening)."""

from __future__ import annotations

from types import SimpleNamespace

from app.policy.rules import RuleCall, build_ruleset, evaluate_rules
from app.rules.service import RuleBook


def _row(body: dict, rule_id: str = "r1") -> SimpleNamespace:
    return SimpleNamespace(rule_id=rule_id, version=3, body=body)


def _outcome(rule, tool: str = "Bash", command: str = "ls"):
    ruleset = build_ruleset([rule])
    return evaluate_rules(ruleset, RuleCall(tool_name=tool, args={"command": command},
                                            shell_arg="command", sandbox_root="/w"))


def test_a_deny_rule_that_no_longer_compiles_denies_every_call_of_its_tools() -> None:
    broken = {"tools": ["Bash"], "effect": "deny", "when": {"colour": ["red"]}}
    rule = RuleBook._compile_stored(_row(broken))
    assert rule is not None and rule.version == 3
    outcome = _outcome(rule)
    assert outcome.deny is not None and outcome.deny.rule_id == "r1"
    assert "no longer compiles" in (outcome.deny.message or "")
    assert _outcome(rule, tool="Read").deny is None  # only its own tools


def test_an_ask_rule_whose_tools_no_longer_compile_denies_every_tool() -> None:
    rule = RuleBook._compile_stored(_row({"tools": [], "effect": "ask"}))
    assert rule is not None
    assert _outcome(rule, tool="Read").deny is not None


def test_a_classify_rule_that_no_longer_compiles_is_left_out() -> None:
    broken = {"tools": ["Bash"], "effect": "classify", "when": {"colour": ["red"]},
              "capability": {"unsafe": False}}
    assert RuleBook._compile_stored(_row(broken)) is None


def test_a_rule_that_compiles_is_itself() -> None:
    rule = RuleBook._compile_stored(_row({"tools": ["Bash"], "effect": "deny",
                                          "when": {"command": ["rm *"]}}))
    assert rule is not None
    assert _outcome(rule, command="ls").deny is None
    assert _outcome(rule, command="rm -rf x").deny is not None
