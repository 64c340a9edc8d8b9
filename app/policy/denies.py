"""The error hierarchy and deny codes as data: one table, one source of truth.

The table drives the checks' results, `GET /v1/errors`, the docs' deny-code table and the
client's exception-class test. Adding a code means adding a row here, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ErrorClass:
    name: str
    parent: str | None
    codes: tuple[str, ...]
    description: str


ERROR_CLASSES: tuple[ErrorClass, ...] = (
    ErrorClass("ToolRuntimeError", None, (), "Base of every tool-runtime deny."),
    ErrorClass("ToolAccessDeniedError", "ToolRuntimeError", ("read_only", "rule_denied"),
               "A tool with writes=True in a read-only plan, or a call a deny rule matches."),
    ErrorClass("ToolCheckpointRequiredError", "ToolRuntimeError", ("checkpoint_required",),
               "Checkpoints are required and the tool is not checkpointable."),
    ErrorClass("ToolSafetyViolationError", "ToolRuntimeError",
               ("unsafe_tool", "skill_category_missing", "skill_category_not_allowed"),
               "An unsafe tool, or a skill category outside the allow-list."),
    ErrorClass("ToolSandboxRequiredError", "ToolRuntimeError", ("sandbox_required",),
               "A writing tool needs a sandbox and none is set."),
    ErrorClass("ToolHumanApprovalRequiredError", "ToolRuntimeError",
               ("human_approval_required",), "Human approval is required and not recorded."),
    ErrorClass("ToolCostLimitExceededError", "ToolRuntimeError",
               ("plan_cost_limit_exceeded", "total_cost_limit_exceeded"),
               "Accumulated cost meets or exceeds a limit."),
    ErrorClass("ToolRetryLimitExceededError", "ToolRuntimeError", ("retry_limit_exceeded",),
               "The step was retried more often than allowed."),
    ErrorClass("ToolConfirmationRequiredError", "ToolRuntimeError", ("confirmation_required",),
               "A destructive tool needs dry_run or confirmed."),
    ErrorClass("ToolSandboxEscapeError", "ToolRuntimeError", ("sandbox_path_escape",),
               "A path argument escapes the sandbox root."),
    ErrorClass("ToolNotActivatedError", "ToolRuntimeError",
               ("tool_not_activated", "unregistered_tool"),
               "The tool is not activated (e.g. not in the registry when that is required); "
               "unregistered_tool: a coding agent's hook named a tool the registry does not "
               "know, and nothing says what it does."),
    ErrorClass("ToolActivationError", "ToolRuntimeError", ("activation_failed",),
               "Tool activation failed."),
    ErrorClass("ToolExecutionError", "ToolRuntimeError", ("execution_failed",),
               "Tool execution failed."),
    ErrorClass("ToolDeactivationError", "ToolRuntimeError", ("deactivation_failed",),
               "Tool deactivation failed."),
    ErrorClass("SkillExecutionError", None, ("write_denied",),
               "Skill write guard (error_type PERMISSION_DENIED) in a read-only context."),
    ErrorClass("ReadOnlyViolationError", None, ("changeset_read_only",),
               "A write-capable tool spec cannot be wrapped in a read-only change set."),
    ErrorClass("PlanReadOnlyError", None, ("plan_read_only",),
               "A plan transition was refused because the plan is read-only."),
    ErrorClass("UnsafeRequestRejectedError", None, ("unsafe_phrase",),
               "A request matched a skill's unsafe phrase before any model ran."),
)

CLASSES_BY_NAME: dict[str, ErrorClass] = {c.name: c for c in ERROR_CLASSES}


def hierarchy(name: str) -> tuple[str, ...]:
    """The chain from the root down to `name`, e.g. (root, ..., name)."""
    chain: list[str] = []
    current: str | None = name
    while current is not None:
        chain.append(current)
        current = CLASSES_BY_NAME[current].parent
    return tuple(reversed(chain))


@dataclass(frozen=True, slots=True)
class CheckSpec:
    """A check: its name (in every decision's `deny.check` and `checks`) and the codes it
    may produce."""

    name: str
    codes: tuple[str, ...]


# The checks of each layer, in the order they run: the first failing check decides (SPEC
# §3). app/policy/checks.py runs exactly these, in this order (it maps each name to its
# function); nothing else decides.
LAYER_CHECKS: dict[str, tuple[CheckSpec, ...]] = {
    "runtime": (
        CheckSpec("read_only", ("read_only",)),
        CheckSpec("checkpoint", ("checkpoint_required",)),
        CheckSpec("unsafe", ("unsafe_tool",)),
        CheckSpec("skill_category", ("skill_category_missing", "skill_category_not_allowed")),
        CheckSpec("sandbox", ("sandbox_required",)),
        CheckSpec("human_approval", ("human_approval_required",)),
        CheckSpec("cost", ("plan_cost_limit_exceeded", "total_cost_limit_exceeded")),
        CheckSpec("retry", ("retry_limit_exceeded",)),
        CheckSpec("confirmation", ("confirmation_required",)),
        CheckSpec("sandbox_paths", ("sandbox_path_escape",)),
    ),
    "skill": (CheckSpec("write_guard", ("write_denied",)),),
    "changeset": (CheckSpec("changeset", ("changeset_read_only",)),),
}

# Checks that are not a step of a layer's sequence, each decided by one core function:
# `registry` replaces the runtime checks after `read_only` for a tool the registry does
# not know in a project that requires registration (checks.unregistered), and answers a
# hook's call of a tool the registry does not know (unregistered_tool, app/hooks); the plan
# transition guard (checks.check_plan_transition, seed 001 layer 4) and the pre-model
# phrase screen (screening.screen_deny, seed 003) answer routes of their own.
OTHER_CHECKS: tuple[CheckSpec, ...] = (
    # Call rules (SPEC §18): evaluated before check 1, by app/policy/rules.
    CheckSpec("rules", ("rule_denied",)),
    CheckSpec("registry", ("tool_not_activated", "unregistered_tool")),
    CheckSpec("plan_transition", ("plan_read_only",)),
    CheckSpec("screen", ("unsafe_phrase",)),
)

# code -> the check that produces it; the codes of classes no check produces (activation,
# execution, deactivation: reported by agents, SPEC §11) have none.
CODE_CHECKS: dict[str, str] = {
    code: spec.name
    for specs in (*LAYER_CHECKS.values(), OTHER_CHECKS)
    for spec in specs
    for code in spec.codes
}


@dataclass(frozen=True, slots=True)
class DenyCode:
    code: str
    error: str
    hierarchy: tuple[str, ...]
    check: str | None


DENY_CODES: dict[str, DenyCode] = {
    code: DenyCode(code, cls.name, hierarchy(cls.name), CODE_CHECKS.get(code))
    for cls in ERROR_CLASSES
    for code in cls.codes
}


def markdown_table() -> str:
    """The deny-code table of docs/deny-codes.md (a test keeps the doc in sync)."""
    lines = ["| code | error class | parent | check |", "|---|---|---|---|"]
    for cls in ERROR_CLASSES:
        for code in cls.codes:
            check = CODE_CHECKS.get(code)
            parent = f"`{cls.parent}`" if cls.parent else "—"
            lines.append(f"| `{code}` | `{cls.name}` | {parent}"
                         f" | {f'`{check}`' if check else '—'} |")
    return "\n".join(lines)


def errors_document() -> dict:
    """The body of `GET /v1/errors`."""
    return {
        "errors": [
            {
                "error": cls.name,
                "parent": cls.parent,
                "hierarchy": list(hierarchy(cls.name)),
                "codes": list(cls.codes),
                "description": cls.description,
            }
            for cls in ERROR_CLASSES
        ]
    }
