"""The rule set: empty costs nothing, projects see global rules and their own, the first
enforce-mode rule of each effect by rule_id decides, shadow rules are only recorded."""

from __future__ import annotations

from app.policy.rules import (
    EMPTY_RULESET,
    NO_OUTCOME,
    RuleCall,
    build_ruleset,
    compile_rule,
    evaluate_rules,
)

BASH = {"tools": ["Bash"], "when": {"command": ["rm *"]}}


def bash(line: str, project: str | None = None) -> RuleCall:
    return RuleCall("Bash", {"command": line}, shell_arg="command",
                    plan={"id": "p", "project": project, "action": None})


def test_no_rules_no_outcome() -> None:
    assert evaluate_rules(EMPTY_RULESET, bash("rm x")) is NO_OUTCOME
    assert evaluate_rules(build_ruleset([]), bash("rm x")) is NO_OUTCOME


def test_project_rules_apply_to_their_project_only() -> None:
    rules = build_ruleset([compile_rule("p-only", {**BASH, "effect": "deny", "project": "p"})])
    assert evaluate_rules(rules, bash("rm x", "p")).deny is not None
    assert evaluate_rules(rules, bash("rm x", "q")) is NO_OUTCOME
    assert evaluate_rules(rules, bash("rm x")) is NO_OUTCOME


def test_first_by_rule_id_decides_and_every_match_is_recorded() -> None:
    rules = build_ruleset([
        compile_rule("b", {**BASH, "effect": "deny", "message": "b"}, version=2),
        compile_rule("a", {**BASH, "effect": "deny", "mode": "shadow"}),
        compile_rule("c", {**BASH, "effect": "deny"}),
        compile_rule("d", {**BASH, "effect": "ask"}),
    ])
    outcome = evaluate_rules(rules, bash("ls; rm -rf /"))
    assert outcome.deny is not None and outcome.deny.rule_id == "b"
    assert outcome.deny.as_detail() == {"id": "b", "version": 2, "matched": "rm -rf /"}
    assert outcome.deny.message == "b"
    assert [m.rule_id for m in outcome.matches] == ["a", "b", "c", "d"]
    assert outcome.matches[0].as_record() == {"id": "a", "version": 1, "effect": "deny",
                                              "mode": "shadow", "matched": "rm -rf /"}
    assert outcome.ask is not None and outcome.ask.rule_id == "d"


def test_classify_gives_its_capability() -> None:
    rules = build_ruleset([compile_rule("r", {
        "tools": ["Bash"], "when": {"command": ["ls:*"]}, "effect": "classify",
        "capability": {"writes": False, "unsafe": False}})])
    outcome = evaluate_rules(rules, bash("ls -la"))
    assert outcome.capability == {"writes": False, "unsafe": False}
    assert evaluate_rules(rules, bash("ls && touch x")).capability is None


def test_a_rule_without_conditions_matches_every_call_of_its_tools() -> None:
    rules = build_ruleset([compile_rule("r", {"tools": ["mcp.*"], "effect": "ask"})])
    outcome = evaluate_rules(rules, RuleCall("mcp.delete", {}))
    assert outcome.ask is not None and outcome.ask.matched == "mcp.delete"
    assert evaluate_rules(rules, RuleCall("Bash", {})) is NO_OUTCOME


def test_a_remembered_outcome_is_only_reused_for_the_same_call() -> None:
    rules = build_ruleset([compile_rule("secrets", {"tools": ["Bash"], "effect": "deny",
                                                     "when": {"paths": ["/app/.env"]}})])

    def at(root: str):
        return evaluate_rules(rules, RuleCall("Bash", {"command": "cat .env"},
                                              shell_arg="command", sandbox_root=root))

    assert at("/srv/app").deny is None
    assert at("/repo").deny is None
    assert evaluate_rules(rules, RuleCall("Bash", {"command": "cat app/.env"},
                                          shell_arg="command", sandbox_root="/repo")).deny
    assert at("/srv/app").deny is None  # remembered, and still right
