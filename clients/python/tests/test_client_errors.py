"""The exception hierarchy mirrors SPEC §3 exactly."""

from __future__ import annotations

import ast
import pathlib
import pickle
import subprocess
import sys

import pytest

import toolgate_client
from toolgate_client import (
    CODES,
    PARENTS,
    SkillExecutionError,
    ToolgateDeny,
    ToolgateError,
    ToolgateRequestError,
    ToolgateUnavailableError,
    ToolRuntimeError,
    ToolSandboxRequiredError,
    error_class_for,
    hierarchy_of,
)
from toolgate_client import errors as errors_module

# SPEC §3 "The error hierarchy and deny codes", written out independently of the package.
SPEC_TABLE: dict[str, tuple[str | None, tuple[str, ...]]] = {
    "ToolRuntimeError": (None, ()),
    # rule_denied: a call rule's deny (SPEC §18)
    "ToolAccessDeniedError": ("ToolRuntimeError", ("read_only", "rule_denied")),
    "ToolCheckpointRequiredError": ("ToolRuntimeError", ("checkpoint_required",)),
    "ToolSafetyViolationError": (
        "ToolRuntimeError",
        ("unsafe_tool", "skill_category_missing", "skill_category_not_allowed"),
    ),
    "ToolSandboxRequiredError": ("ToolRuntimeError", ("sandbox_required",)),
    "ToolHumanApprovalRequiredError": ("ToolRuntimeError", ("human_approval_required",)),
    "ToolCostLimitExceededError": (
        "ToolRuntimeError",
        ("plan_cost_limit_exceeded", "total_cost_limit_exceeded"),
    ),
    "ToolRetryLimitExceededError": ("ToolRuntimeError", ("retry_limit_exceeded",)),
    "ToolConfirmationRequiredError": ("ToolRuntimeError", ("confirmation_required",)),
    "ToolSandboxEscapeError": ("ToolRuntimeError", ("sandbox_path_escape",)),
    # unregistered_tool: toolgate's own, a hook's call of an unknown tool (issue 45 item 3)
    "ToolNotActivatedError": ("ToolRuntimeError", ("tool_not_activated", "unregistered_tool")),
    "ToolActivationError": ("ToolRuntimeError", ("activation_failed",)),
    "ToolExecutionError": ("ToolRuntimeError", ("execution_failed",)),
    "ToolDeactivationError": ("ToolRuntimeError", ("deactivation_failed",)),
    "SkillExecutionError": (None, ("write_denied",)),
    "ReadOnlyViolationError": (None, ("changeset_read_only",)),
    "PlanReadOnlyError": (None, ("plan_read_only",)),
    "UnsafeRequestRejectedError": (None, ("unsafe_phrase",)),
}


def test_codes_table_matches_spec() -> None:
    assert CODES == {name: codes for name, (_, codes) in SPEC_TABLE.items()}
    assert PARENTS == {name: parent for name, (parent, _) in SPEC_TABLE.items()}


@pytest.mark.parametrize("name", sorted(SPEC_TABLE))
def test_every_class_is_exported_with_its_parent(name: str) -> None:
    cls = getattr(toolgate_client, name)
    assert cls is getattr(errors_module, name)
    assert cls.__name__ == name
    assert error_class_for(name) is cls
    parent, _codes = SPEC_TABLE[name]
    if parent is None:
        assert cls.__bases__ == (ToolgateDeny,)
    else:
        assert cls.__bases__ == (getattr(toolgate_client, parent),)
    assert issubclass(cls, ToolgateDeny)
    assert issubclass(cls, Exception)
    assert not issubclass(cls, ToolgateError)
    assert not issubclass(ToolgateUnavailableError, cls)
    assert not issubclass(ToolgateRequestError, cls)


@pytest.mark.parametrize("name", sorted(SPEC_TABLE))
def test_every_class_carries_the_attributes(name: str) -> None:
    cls = error_class_for(name)
    exc = cls("msg", code="c", decision_id="d-1", details={"k": 1}, check="chk")
    assert (exc.code, exc.message, exc.decision_id, exc.details, exc.check) == (
        "c",
        "msg",
        "d-1",
        {"k": 1},
        "chk",
    )
    assert str(exc) == "msg"
    default = cls()
    expected_codes = SPEC_TABLE[name][1]
    assert default.code == (expected_codes[0] if expected_codes else None)
    assert default.details == {}
    assert default.decision_id is None
    assert default.hierarchy == hierarchy_of(name)


def test_hierarchy_of() -> None:
    assert hierarchy_of("ToolCostLimitExceededError") == [
        "ToolRuntimeError",
        "ToolCostLimitExceededError",
    ]
    assert hierarchy_of("ToolRuntimeError") == ["ToolRuntimeError"]
    assert hierarchy_of("PlanReadOnlyError") == ["PlanReadOnlyError"]
    assert hierarchy_of("SomethingNew") == ["SomethingNew"]


def test_error_class_for_unknown_is_none() -> None:
    assert error_class_for("ToolQuantumError") is None
    assert error_class_for("ToolgateDeny") is None
    assert error_class_for("ToolgateUnavailableError") is None
    assert error_class_for(None) is None  # type: ignore[arg-type]


def test_skill_execution_error_type() -> None:
    assert SkillExecutionError("x").error_type == "PERMISSION_DENIED"
    assert SkillExecutionError("x", details={"error_type": "OTHER"}).error_type == "OTHER"
    assert SkillExecutionError("x", error_type="EXPLICIT").error_type == "EXPLICIT"


def test_non_deny_errors() -> None:
    assert issubclass(ToolgateUnavailableError, ToolgateError)
    assert issubclass(ToolgateRequestError, ToolgateError)
    assert not issubclass(ToolgateUnavailableError, ToolgateDeny)
    assert not issubclass(ToolgateRequestError, ToolgateDeny)
    assert not issubclass(ToolgateUnavailableError, ToolgateRequestError)
    err = ToolgateRequestError("bad", status=422, code="invalid_input", details={"f": 1})
    assert (err.status, err.code, err.message, err.details) == (
        422,
        "invalid_input",
        "bad",
        {"f": 1},
    )


@pytest.mark.parametrize(
    "exc",
    [
        ToolSandboxRequiredError(
            "m", code="sandbox_required", decision_id="d", details={"a": 1}, check="sandbox"
        ),
        SkillExecutionError("m", details={"error_type": "PERMISSION_DENIED"}),
        ToolRuntimeError("m", code="x", error="ToolQuantumError"),
        ToolgateUnavailableError("down", status=503, code="unavailable", request_id="r"),
        ToolgateRequestError("bad", status=422, code="invalid_input", details={"f": 1}),
    ],
)
def test_exceptions_pickle(exc: Exception) -> None:
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is type(exc)
    assert str(back) == str(exc)
    for attr in ("code", "message", "decision_id", "details", "status"):
        assert getattr(back, attr) == getattr(exc, attr)
    if isinstance(exc, ToolgateDeny):
        assert back.check == exc.check
        assert back.error == exc.error
    if isinstance(exc, SkillExecutionError):
        assert back.error_type == exc.error_type


def test_package_never_imports_the_service() -> None:
    src = pathlib.Path(toolgate_client.__file__).parent
    for path in src.rglob("*.py"):
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                assert name.split(".")[0] != "app", f"{path} imports {name}"
    code = (
        "import sys, toolgate_client; "
        "bad = [m for m in sys.modules if m == 'app' or m.startswith('app.')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(src.parent))
