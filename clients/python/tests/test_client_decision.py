"""Decision parsing (strict where safety depends on it)."""

from __future__ import annotations

import pytest

from _toolgate_client_testkit import allow_payload, deny_payload
from toolgate_client import (
    Decision,
    Deny,
    ToolRuntimeError,
    ToolSafetyViolationError,
    ToolSandboxRequiredError,
)
from toolgate_client.models import DecisionParseError


def test_parse_allowed() -> None:
    payload = allow_payload(checks=[{"check": "read_only", "outcome": "pass", "reason": "ok"}])
    decision = Decision.from_dict(payload, request_id="rid")
    assert decision.allowed is True
    assert decision.deny is None
    assert decision.decision_id == payload["decision_id"]
    assert decision.plan_id == "p-1"
    assert decision.profile == payload["profile"]
    assert decision.checks == payload["checks"]
    assert decision.raw is payload
    assert decision.request_id == "rid"
    assert decision.exception() is None
    assert decision.raise_for_deny() is decision


def test_parse_deny_spec_example() -> None:
    payload = {
        "decision_id": "0193a0c4-...",
        "allowed": False,
        "deny": {
            "error": "ToolSandboxRequiredError",
            "hierarchy": ["ToolRuntimeError", "ToolSandboxRequiredError"],
            "code": "sandbox_required",
            "check": "sandbox",
            "message": "Tool 'fs.write' has writes=True and needs a sandbox, but no "
            "sandbox_id is set (plan 'p-1')",
            "details": {},
        },
        "plan_id": "p-1",
        "profile": {"provenance": "project", "name": "strict", "version": 3, "is_default": False},
        "checks": None,
    }
    decision = Decision.from_dict(payload)
    assert decision.allowed is False
    assert decision.deny == Deny(
        error="ToolSandboxRequiredError",
        hierarchy=["ToolRuntimeError", "ToolSandboxRequiredError"],
        code="sandbox_required",
        check="sandbox",
        message=payload["deny"]["message"],
        details={},
    )
    assert decision.deny.exception_class is ToolSandboxRequiredError
    with pytest.raises(ToolSandboxRequiredError) as info:
        decision.raise_for_deny()
    assert info.value.decision is decision
    assert info.value.decision_id == "0193a0c4-..."
    assert info.value.message == payload["deny"]["message"]


def test_stateless_decision_without_profile_or_plan() -> None:
    decision = Decision.from_dict(allow_payload(plan_id=None, profile=None))
    assert decision.plan_id is None and decision.profile is None


def test_deny_defaults_for_optional_fields() -> None:
    decision = Decision.from_dict(
        {"decision_id": "d", "allowed": False, "deny": {"error": "ToolAccessDeniedError"}}
    )
    assert decision.deny.hierarchy == ["ToolAccessDeniedError"]
    assert decision.deny.details == {}
    assert decision.deny.code is None
    assert decision.deny.message == ""


@pytest.mark.parametrize(
    "payload",
    [
        None,
        [],
        "allowed",
        {},
        {"decision_id": "d"},
        allow_payload(allowed="true"),
        allow_payload(allowed=1),
        allow_payload(allowed=None),
        allow_payload(deny={"error": "ToolAccessDeniedError"}),  # allowed with a reason
        deny_payload() | {"deny": None},  # denied without a reason
        deny_payload() | {"deny": "ToolSandboxRequiredError"},
        deny_payload() | {"deny": {"error": ""}},
        deny_payload() | {"deny": {"error": 7}},
        deny_payload() | {"deny": {"error": "ToolAccessDeniedError", "hierarchy": "x"}},
        deny_payload() | {"deny": {"error": "ToolAccessDeniedError", "details": []}},
        allow_payload(profile="strict"),
        allow_payload(checks={}),
        allow_payload(decision_id=12),
    ],
)
def test_malformed_decisions_are_rejected(payload: object) -> None:
    with pytest.raises(DecisionParseError):
        Decision.from_dict(payload)


def test_unknown_class_resolution() -> None:
    exact_unknown = Decision.from_dict(
        deny_payload(
            "ToolQuantumError", "quantum", hierarchy=["ToolRuntimeError", "ToolQuantumError"]
        )
    )
    assert exact_unknown.deny.exception_class is ToolRuntimeError
    nested = Decision.from_dict(
        deny_payload(
            "ToolNewSafetyError",
            "new_safety",
            hierarchy=["ToolRuntimeError", "ToolSafetyViolationError", "ToolNewSafetyError"],
        )
    )
    assert nested.deny.exception_class is ToolSafetyViolationError
    top_level = Decision.from_dict(
        deny_payload("BrandNewError", "new", hierarchy=["BrandNewError"])
    )
    assert top_level.deny.exception_class is ToolRuntimeError


def test_manually_built_inconsistent_decision_fails_closed() -> None:
    with pytest.raises(ToolRuntimeError):
        Decision(decision_id="d", allowed=False, deny=None).raise_for_deny()
    deny = Deny(
        "ToolAccessDeniedError",
        ["ToolRuntimeError", "ToolAccessDeniedError"],
        "read_only",
        "read_only",
        "m",
    )
    with pytest.raises(ToolRuntimeError):
        Decision(decision_id="d", allowed=True, deny=deny).raise_for_deny()
