"""The ordered checks (SPEC §3, seeds 000/001/003): the first failing check decides.

`evaluate()` short-circuits on the first failure; with `explain=True` it runs every check
and reports each as pass, fail or skip, but the decision is still the first failure.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.policy.denies import DENY_CODES, LAYER_CHECKS
from app.policy.model import (
    LAYERS,
    CheckResult,
    Context,
    Deny,
    Layer,
    Tool,
    Verdict,
)
from app.policy.paths import find_escape
from app.policy.profiles import SafetyProfile

SKIP = "skip"
FAIL = "fail"

# A check returns a Deny, or ("pass" | "skip", reason, *arguments) written as literals, so
# that Python builds the tuple once, at compile time. A reason with arguments is a
# str.format template filled in only when the checks are explained (as logging formats a
# message only when it is emitted): evaluate() without explain never reads a pass reason,
# and formatting two of them cost each decision more than the three cheapest checks.
Outcome = tuple[str, ...] | Deny
Check = Callable[[Tool, Context, SafetyProfile | None], Outcome]


def deny(code: str, message: str, **details: Any) -> Deny:
    """A deny whose class, hierarchy and check all come from the deny table
    (app/policy/denies.py): the only way the core, or anything else, makes one."""
    spec = DENY_CODES[code]
    return Deny(spec.error, spec.hierarchy, code, spec.check or "", message, details)


NO_PROFILE = ("skip", "no safety profile: profile checks do not apply (seed 000)")


def check_read_only(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if ctx.plan_read_only and tool.writes:
        return deny(
            "read_only",
            f"Tool '{tool.name}' has writes=True but plan '{ctx.plan_id}' is read-only",
        )
    if not ctx.plan_read_only:
        return "pass", "plan is not read-only"
    return "pass", "tool does not write"


def check_checkpoint(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    required = ctx.require_checkpoints or (profile is not None and profile.require_checkpoints)
    if not required:
        return "pass", "checkpoints are not required"
    if tool.checkpointable:
        return "pass", "tool is checkpointable"
    source = "context.require_checkpoints" if ctx.require_checkpoints else "the safety profile"
    return deny(
        "checkpoint_required",
        f"Tool '{tool.name}' is not checkpointable but checkpoints are required by {source} "
        f"(plan '{ctx.plan_id}')",
        required_by="context" if ctx.require_checkpoints else "profile",
    )


def check_unsafe(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if profile is None:
        return NO_PROFILE
    if not tool.unsafe:
        return "pass", "tool is not marked unsafe"
    if profile.allow_unsafe_tools:
        return "pass", "the safety profile allows unsafe tools"
    return deny(
        "unsafe_tool",
        f"Tool '{tool.name}' is marked unsafe and the safety profile does not allow unsafe "
        f"tools (plan '{ctx.plan_id}')",
    )


def check_skill_category(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if profile is None:
        return NO_PROFILE
    allowed = profile.allowed_skill_categories
    if not allowed:
        return "pass", "allowed_skill_categories is empty: every category is allowed"
    if tool.skill_category is None:
        return deny(
            "skill_category_missing",
            f"Tool '{tool.name}' has no skill category (metadata 'tool_skill_category' is "
            f"missing) but the safety profile allows only {list(allowed)} (plan '{ctx.plan_id}')",
            allowed_skill_categories=list(allowed),
        )
    if tool.skill_category not in allowed:
        return deny(
            "skill_category_not_allowed",
            f"Tool '{tool.name}' has skill category '{tool.skill_category}', which is not in "
            f"the allowed categories {list(allowed)} (plan '{ctx.plan_id}')",
            skill_category=tool.skill_category,
            allowed_skill_categories=list(allowed),
        )
    return "pass", "skill category '{}' is allowed", tool.skill_category


def check_sandbox(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if profile is None:
        return NO_PROFILE
    if not profile.require_sandbox:
        return "pass", "the safety profile does not require a sandbox"
    if not tool.writes:
        return "pass", "tool does not write"
    if ctx.sandbox_id:
        return "pass", "a sandbox_id is set"
    return deny(
        "sandbox_required",
        f"Tool '{tool.name}' has writes=True and needs a sandbox, but no sandbox_id is set "
        f"(plan '{ctx.plan_id}')",
    )


def check_human_approval(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if profile is None:
        return NO_PROFILE
    if not (profile.require_human_approval or tool.requires_approval):
        return "pass", "neither the safety profile nor the registry requires human approval"
    if ctx.approval is not None:  # server mode: the agent's own flag is not evidence
        if ctx.approval == "granted":
            return "pass", "a granted approval held by the service matches this request"
        return deny(
            "human_approval_required",
            f"Tool '{tool.name}' requires human approval: a person must grant this exact "
            f"request (plan '{ctx.plan_id}')",
        )
    if ctx.metadata.get("human_approved") is True:
        return "pass", "metadata.human_approved is true"
    return deny(
        "human_approval_required",
        f"Tool '{tool.name}' requires human approval, but metadata 'human_approved' is not "
        f"true (plan '{ctx.plan_id}')",
    )


def check_cost(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if profile is None:
        return NO_PROFILE
    per_plan, total = profile.max_cost_per_plan, profile.max_total_cost
    if per_plan is not None and ctx.accumulated_cost >= per_plan:
        return deny(
            "plan_cost_limit_exceeded",
            f"Tool '{tool.name}' blocked: accumulated cost {ctx.accumulated_cost} meets or "
            f"exceeds max_cost_per_plan {per_plan} (plan '{ctx.plan_id}')",
            accumulated_cost=ctx.accumulated_cost, max_cost_per_plan=per_plan,
        )
    if total is not None and ctx.total_accumulated_cost >= total:
        return deny(
            "total_cost_limit_exceeded",
            f"Tool '{tool.name}' blocked: total accumulated cost {ctx.total_accumulated_cost} "
            f"meets or exceeds max_total_cost {total} (plan '{ctx.plan_id}')",
            total_accumulated_cost=ctx.total_accumulated_cost, max_total_cost=total,
        )
    if per_plan is None and total is None:
        return "pass", "no cost limits are set"
    return "pass", "accumulated costs are below their limits"


def check_retry(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if profile is None:
        return NO_PROFILE
    limit = profile.max_retries_per_step
    if ctx.step_retry_count > limit:
        return deny(
            "retry_limit_exceeded",
            f"Tool '{tool.name}' blocked: step retry count {ctx.step_retry_count} exceeds "
            f"max_retries_per_step {limit} (plan '{ctx.plan_id}')",
            step_retry_count=ctx.step_retry_count, max_retries_per_step=limit,
        )
    return "pass", "step retry count {} is within {}", ctx.step_retry_count, limit


def check_confirmation(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if not tool.destructive:
        return "pass", "tool is not destructive"
    if ctx.dry_run:
        return "pass", "destructive tool runs as a dry run"
    if ctx.confirmed:
        return "pass", "destructive tool is confirmed"
    return deny(
        "confirmation_required",
        f"Tool '{tool.name}' is destructive and may run only with dry_run=true or "
        f"confirmed=true; neither is set (plan '{ctx.plan_id}')",
        ways=["dry_run", "confirmed"],
    )


def check_sandbox_paths(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if not tool.path_args:
        return "pass", "tool has no sandbox-sensitive path arguments"
    escape = find_escape(
        tool.args, tool.path_args, root=ctx.sandbox_root, variables=ctx.variables
    )
    if escape is None:
        return "pass", "every path argument stays inside the sandbox root"
    argument, reason = escape
    return deny(
        "sandbox_path_escape",
        f"Tool '{tool.name}' argument '{argument}' {reason} (plan '{ctx.plan_id}')",
        argument=argument,
    )


def check_write_guard(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if ctx.plan_read_only and tool.writes:
        return deny(
            "write_denied",
            f"Write operation denied: tool '{tool.name}' cannot write in read-only context "
            f"(plan={ctx.plan_id})",
            error_type="PERMISSION_DENIED",
        )
    return "pass", "tool does not write" if ctx.plan_read_only else "context is not read-only"


def check_changeset(tool: Tool, ctx: Context, profile: SafetyProfile | None) -> Outcome:
    if ctx.plan_read_only and tool.writes:
        return deny(
            "changeset_read_only",
            f"Cannot wrap write-capable tool '{tool.name}' in read-only ChangeSetCapture "
            f"(plan={ctx.plan_id})",
        )
    return "pass", "tool spec may be wrapped"


# Each check's function, by the name the deny table (app/policy/denies.py) gives it. The
# table, not this module, says which checks a layer runs and in which order.
FUNCTIONS: dict[str, Check] = {
    "read_only": check_read_only,
    "checkpoint": check_checkpoint,
    "unsafe": check_unsafe,
    "skill_category": check_skill_category,
    "sandbox": check_sandbox,
    "human_approval": check_human_approval,
    "cost": check_cost,
    "retry": check_retry,
    "confirmation": check_confirmation,
    "sandbox_paths": check_sandbox_paths,
    "write_guard": check_write_guard,
    "changeset": check_changeset,
}

CHECKS_BY_LAYER: dict[Layer, tuple[tuple[str, Check], ...]] = {
    LAYERS[layer]: tuple((spec.name, FUNCTIONS[spec.name]) for spec in specs)
    for layer, specs in LAYER_CHECKS.items()
}


# Each layer's checks without their names: what evaluate() runs when it need not explain.
_FUNCTIONS = {layer: tuple(check for _, check in checks)
              for layer, checks in CHECKS_BY_LAYER.items()}

ALLOWED = Verdict(True, None)  # frozen: one for every allow without explain


def evaluate(
    tool: Tool,
    ctx: Context,
    profile: SafetyProfile | None,
    *,
    layer: Layer = Layer.RUNTIME,
    explain: bool = False,
) -> Verdict:
    if not explain:
        for check in _FUNCTIONS[layer]:
            outcome = check(tool, ctx, profile)
            if outcome.__class__ is Deny:
                return Verdict(False, outcome)
        return ALLOWED
    checks = CHECKS_BY_LAYER[layer]

    first: Deny | None = None
    report: list[CheckResult] = []
    for name, check in checks:
        outcome = check(tool, ctx, profile)
        if type(outcome) is Deny:
            first = first or outcome
            report.append(CheckResult(name, FAIL, outcome.message))
        else:
            report.append(CheckResult(name, outcome[0], _reason(outcome)))
    return Verdict(first is None, first, tuple(report))


def _reason(outcome: tuple[str, ...]) -> str:
    return outcome[1].format(*outcome[2:]) if len(outcome) > 2 else outcome[1]


def unregistered(name: str, ctx: Context, *, writes: bool, explain: bool = False) -> Verdict:
    """A project that requires registered tools refuses one the registry does not know.
    Check 1 still comes first: a read-only plan refuses a tool that says it writes."""
    tool = Tool(name=name, writes=writes, checkpointable=False, unsafe=False)
    read_only = check_read_only(tool, ctx, None)
    refusal = read_only if type(read_only) is Deny else deny(
        "tool_not_activated",
        f"Tool '{name}' is not in the tool registry and this project only allows registered "
        f"tools (plan '{ctx.plan_id}')",
        tool=name,
    )
    checks = None
    if explain:
        first = (CheckResult("read_only", FAIL, refusal.message) if refusal is read_only
                 else CheckResult("read_only", read_only[0], _reason(read_only)))  # type: ignore[index]
        checks = (first, CheckResult("registry", SKIP if refusal is read_only else FAIL,
                                     "not reached" if refusal is read_only else refusal.message))
    return Verdict(False, refusal, checks)


def check_plan_transition(plan_id: str, *, read_only: bool, transition: str) -> Deny | None:
    """Seed 001 layer 4: a read-only plan refuses every state transition (execute,
    lifecycle-apply) before anything changes."""
    if read_only:
        return deny("plan_read_only", f"Plan '{plan_id}' is read-only: '{transition}' is refused",
                    plan_id=plan_id, transition=transition)
    return None
