"""Run every decision case in tests/cases/*.json through the pure core (no HTTP, no storage).

Each case is a stateless /v1/authorize-tool body: validated by the wire schema, turned into
the core's Tool and Context exactly as the service does for a request without plan_id, and
decided by app.policy.checks.evaluate. The same files drive the HTTP runner.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root, for `tests.*`

from app.authorize.schemas import AuthorizeIn  # noqa: E402
from app.policy.checks import CHECKS_BY_LAYER, evaluate  # noqa: E402
from app.policy.denies import CLASSES_BY_NAME, DENY_CODES, hierarchy  # noqa: E402
from app.policy.model import Layer, Verdict  # noqa: E402
from app.policy.tool import MissingCapability  # noqa: E402
from tests.casefiles import load_cases  # noqa: E402

DECISION_CASES = load_cases("decision")
INVALID_CASES = load_cases("invalid")


def decide(request: dict, *, explain: bool) -> tuple[AuthorizeIn, Verdict]:
    req = AuthorizeIn.model_validate(request)
    tool = req.core_tool(None)
    ctx = req.core_context(plan_id=req.context.plan_id, stored_read_only=False)
    return req, evaluate(tool, ctx, req.safety_profile, layer=Layer(req.layer), explain=explain)


def assert_verdict(case: dict, req: AuthorizeIn, verdict: Verdict) -> None:
    expect = case["expect"]
    assert verdict.allowed is expect["allowed"]
    if expect["allowed"]:
        assert verdict.deny is None
        return
    deny = verdict.deny
    assert deny is not None
    assert (deny.code, deny.error, deny.check) == (expect["code"], expect["error"], expect["check"])
    if "message" in expect:
        assert deny.message == expect["message"]
    for key, value in expect.get("details", {}).items():
        assert deny.details.get(key) == value, f"details[{key!r}]"
    # One class per deny, its code listed under it, the chain from the root down.
    assert DENY_CODES[deny.code].error == deny.error
    assert deny.code in CLASSES_BY_NAME[deny.error].codes
    assert deny.hierarchy == hierarchy(deny.error)
    if CLASSES_BY_NAME[deny.error].parent is None:
        assert deny.hierarchy == (deny.error,)
    else:
        assert deny.hierarchy[0] == "ToolRuntimeError"
    # Messages always name the tool and the plan (or None), seed 001.
    assert req.tool.name in deny.message
    assert str(req.context.plan_id) in deny.message


@pytest.mark.parametrize(("case_id", "case"), DECISION_CASES, ids=[i for i, _ in DECISION_CASES])
def test_decision(case_id: str, case: dict) -> None:
    req, verdict = decide(case["request"], explain=False)
    assert verdict.checks is None
    assert_verdict(case, req, verdict)


@pytest.mark.parametrize(("case_id", "case"), DECISION_CASES, ids=[i for i, _ in DECISION_CASES])
def test_decision_explained(case_id: str, case: dict) -> None:
    req, plain = decide(case["request"], explain=False)
    _, explained = decide(case["request"], explain=True)
    assert explained.allowed is plain.allowed
    assert explained.deny == plain.deny
    assert_verdict(case, req, explained)

    checks = explained.checks
    assert checks is not None
    expected_names = [name for name, _ in CHECKS_BY_LAYER[Layer(req.layer)]]
    assert [c.check for c in checks] == expected_names
    assert all(c.outcome in ("pass", "fail", "skip") for c in checks)
    assert all(c.reason for c in checks)
    fails = [c for c in checks if c.outcome == "fail"]
    if plain.allowed:
        assert fails == []
    else:
        first = fails[0]
        assert first.check == plain.deny.check
        assert first.reason == plain.deny.message
    if req.safety_profile is None and req.layer == "runtime":
        profile_checks = ("unsafe", "skill_category", "sandbox", "human_approval", "cost", "retry")
        assert {c.check: c.outcome for c in checks if c.check in profile_checks} == dict.fromkeys(
            profile_checks, "skip"
        )
    for name, outcome in case["expect"].get("outcomes", {}).items():
        got = {c.check: c.outcome for c in checks}
        assert name in got, f"no check {name!r} in layer {req.layer}"
        assert got[name] == outcome, f"check {name!r}"


def test_every_runtime_code_is_covered() -> None:
    """Every deny code a stateless decision can produce appears in some case (SPEC §3 table)."""
    codes = {case["expect"]["code"] for _, case in DECISION_CASES} - {None}
    reachable = {
        "read_only", "checkpoint_required", "unsafe_tool", "skill_category_missing",
        "skill_category_not_allowed", "sandbox_required", "human_approval_required",
        "plan_cost_limit_exceeded", "total_cost_limit_exceeded", "retry_limit_exceeded",
        "confirmation_required", "write_denied", "changeset_read_only",
    }
    assert reachable <= codes, sorted(reachable - codes)
    assert codes <= set(DENY_CODES)


def test_every_check_decides_some_case() -> None:
    checks = {case["expect"]["check"] for _, case in DECISION_CASES} - {None}
    runtime = {name for name, _ in CHECKS_BY_LAYER[Layer.RUNTIME]} - {"sandbox_paths"}
    assert runtime | {"write_guard", "changeset"} <= checks


def test_there_are_enough_cases() -> None:
    assert len(DECISION_CASES) >= 120
    assert len(INVALID_CASES) >= 30


def _locations(error: ValidationError) -> list[tuple[str, str]]:
    return [(".".join(str(p) for p in e["loc"]), e["msg"]) for e in error.errors()]


@pytest.mark.parametrize(("case_id", "case"), INVALID_CASES, ids=[i for i, _ in INVALID_CASES])
def test_invalid(case_id: str, case: dict) -> None:
    field = case["expect"]["field"]
    try:
        req = AuthorizeIn.model_validate(case["request"])
    except ValidationError as error:
        locations = _locations(error)
        named = any(loc == field or loc.startswith(field + ".") for loc, _ in locations)
        # A model-level rule (safety_profile together with plan_id) has an empty location;
        # then the message must name the field.
        named = named or any(loc == "" and field in msg for loc, msg in locations)
        assert named, f"{field!r} not among {locations}"
        return
    with pytest.raises(MissingCapability) as missing:
        req.core_tool(None)
    assert field in missing.value.fields


def test_explained_pass_reasons_name_the_values_checked() -> None:
    """Two pass reasons are templates filled in only when explained: the report still shows
    the request's own values, and a value with braces in it is shown, not interpreted."""
    request = {
        "tool": {"name": "fs.write", "skill_category": "{0}{files}",
                 "capability": {"writes": False, "checkpointable": True, "unsafe": False}},
        "context": {"step_retry_count": 2},
        "safety_profile": {"allowed_skill_categories": ["{0}{files}"],
                           "max_retries_per_step": 5},
    }
    _, verdict = decide(request, explain=True)
    assert verdict.allowed
    reasons = {c.check: c.reason for c in verdict.checks or ()}
    assert reasons["skill_category"] == "skill category '{0}{files}' is allowed"
    assert reasons["retry"] == "step retry count 2 is within 5"
