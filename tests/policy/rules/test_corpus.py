"""The call-rule corpus (tests/cases/shell) run through the core: each case's rule set,
compiled, evaluated on its call, gives the expected verdict and the rule that decides."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest

from app.policy.rules import RuleCall, RuleOutcome, build_ruleset, compile_rule, evaluate_rules
from app.policy.rules.evaluate import RuleSet
from tests.rulecases import load_rule_cases

CASES = load_rule_cases()


@cache
def _ruleset(rules_json: str) -> RuleSet:
    import json

    rules = json.loads(rules_json)
    return build_ruleset(compile_rule(rule_id, body) for rule_id, body in rules.items())


def rule_call(call: dict[str, Any]) -> RuleCall:
    return RuleCall(
        tool_name=call["tool"], args=call["args"], shell_arg=call.get("shell_arg"),
        path_args=tuple(call.get("path_args", ())), url_args=tuple(call.get("url_args", ())),
        sandbox_root=call.get("sandbox_root"), home=call.get("home"),
        capability=call.get("capability", {}), plan=call.get("plan", {}),
        context=call.get("context", {}))


def verdict(outcome: RuleOutcome) -> tuple[str, Any]:
    for name in ("deny", "ask", "classify"):
        match = getattr(outcome, name)
        if match is not None:
            return name, match
    return "none", None


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) >= 150


@pytest.mark.parametrize(("case_id", "case"), CASES, ids=[c[0] for c in CASES])
def test_case(case_id: str, case: dict[str, Any]) -> None:
    import json

    ruleset = _ruleset(json.dumps(case["rules"], sort_keys=True))
    outcome = evaluate_rules(ruleset, rule_call(case["call"]))
    expect = case["expect"]
    got, match = verdict(outcome)
    summary = [(m.rule_id, m.matched) for m in outcome.matches]
    assert got == expect["verdict"], summary
    if match is not None:
        assert match.rule_id == expect["rule"], summary
        if "matched" in expect:
            assert match.matched == expect["matched"], summary
    if "matches" in expect:
        assert [m.rule_id for m in outcome.matches] == expect["matches"], summary
