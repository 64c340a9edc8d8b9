"""Call rules in a decision (SPEC §18): the request as the core's RuleCall, and what the
rule set's outcome does to the call before check 1. No I/O: decide_with runs it, and only
when some rule exists (`registry.rules.empty` is the one test a decision pays otherwise).

- deny: the decision is `rule_denied` (check `rules`), before any other check;
- ask: check 6 applies as if the profile required human approval;
- classify: the call's capability for checks 1-10 is the rule's (the fields it gives).
Every rule that matched, shadow rules included, is named in the record (`detail.rules`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.policy.checks import check_human_approval, deny
from app.policy.model import CheckResult, Context, Deny, RegisteredTool, Tool, Verdict
from app.policy.profiles import SafetyProfile
from app.policy.rules import RuleCall, RuleMatch, RuleOutcome, RuleSet, evaluate_rules
from app.policy.tool import MissingCapability

# Check 6 for an ask rule on a decision with no profile (which skips checks 3-8): the
# rule asks all the same, so check 6 runs alone against this profile.
_ASKING = SafetyProfile(require_human_approval=True)


def _context_json(ctx: Any) -> dict[str, Any]:
    """The request's context as the agent sent it (CEL's `context`)."""
    return {"plan_id": ctx.plan_id, "sandbox_id": ctx.sandbox_id,
            "sandbox_root": ctx.sandbox_root, "variables": ctx.variables,
            "plan_read_only": ctx.plan_read_only,
            "require_checkpoints": ctx.require_checkpoints, "metadata": ctx.metadata,
            "accumulated_cost": ctx.accumulated_cost,
            "total_accumulated_cost": ctx.total_accumulated_cost,
            "step_retry_count": ctx.step_retry_count, "dry_run": ctx.dry_run,
            "confirmed": ctx.confirmed, "step_id": ctx.step_id,
            "estimated_cost": ctx.estimated_cost}


def rule_call(request: Any, tool: Tool, registered: RegisteredTool | None, *,
              plan_id: str | None, project: str | None, action_id: str | None) -> RuleCall:
    ctx = request.context
    home = ctx.variables.get("HOME")
    cap = request.tool.capability
    read_only = registered.read_only if registered is not None else bool(
        cap is not None and cap.read_only)
    return RuleCall(
        tool_name=tool.name, args=tool.args,
        shell_arg=registered.shell_arg if registered is not None else None,
        path_args=tool.path_args,
        url_args=registered.url_args if registered is not None else (),
        sandbox_root=ctx.sandbox_root, home=home if isinstance(home, str) and home else None,
        capability={"writes": tool.writes, "read_only": read_only and not tool.writes,
                    "checkpointable": tool.checkpointable, "unsafe": tool.unsafe,
                    "safety_category": "destructive" if tool.destructive else "safe",
                    "skill_category": tool.skill_category},
        plan={"id": plan_id, "project": project, "action": action_id},
        context=_context_json(ctx))


def outcome_of(ruleset: RuleSet, request: Any, tool: Tool, registered: RegisteredTool | None,
               *, plan_id: str | None, project: str | None,
               action_id: str | None) -> RuleOutcome:
    return evaluate_rules(ruleset, rule_call(request, tool, registered, plan_id=plan_id,
                                             project=project, action_id=action_id))


def classified(tool: Tool, capability: dict[str, Any]) -> Tool:
    """The tool as a classify rule says the call is; the fields it leaves out stay."""
    changes: dict[str, Any] = {}
    if capability.get("read_only") is True:
        changes["writes"] = False
    for field in ("writes", "checkpointable", "unsafe", "skill_category"):
        if field in capability and capability[field] is not None:
            changes[field] = capability[field]
    if capability.get("safety_category") is not None:
        changes["destructive"] = capability["safety_category"] == "destructive"
    return replace(tool, **changes) if changes else tool


def rule_deny(match: RuleMatch, tool: str, plan_id: str | None) -> Deny:
    said = match.message or f"the call matches ({match.matched})"
    return deny("rule_denied",
                f"Tool '{tool}' denied by rule '{match.rule_id}': {said} (plan '{plan_id}')",
                rule=match.as_detail())


def asked(verdict_deny: Deny | None, match: RuleMatch) -> Deny | None:
    """Check 6's deny for a call an ask rule matched: names the rule and its message."""
    if verdict_deny is None or verdict_deny.code != "human_approval_required":
        return verdict_deny
    said = f" (rule '{match.rule_id}'" + (f": {match.message})" if match.message else ")")
    return replace(verdict_deny, message=verdict_deny.message + said,
                   details={**verdict_deny.details, "rule": match.as_detail()})


def ask_without_profile(tool: Tool, ctx: Context) -> Deny | None:
    outcome = check_human_approval(tool, ctx, _ASKING)
    return outcome if outcome.__class__ is Deny else None  # type: ignore[return-value]


def rules_check(outcome: RuleOutcome) -> CheckResult:
    """The `rules` line of `explain`, first in the list."""
    if outcome.deny is not None:
        return CheckResult("rules", "fail", f"rule '{outcome.deny.rule_id}' denies the call "
                                            f"({outcome.deny.matched})")
    parts = [f"rule '{m.rule_id}' {m.effect}" + (" (shadow)" if m.mode == "shadow" else "")
             + f" ({m.matched})" for m in outcome.matches]
    return CheckResult("rules", "pass", "; ".join(parts) if parts else "no rule matches")


def with_rules(verdict: Verdict, outcome: RuleOutcome, tool: Tool, ctx: Context,
               profile: SafetyProfile | None, plan_id: str | None) -> Verdict:
    """The verdict of checks 1-10 (run on the classified tool, with check 6 applying when
    an ask rule matched), with the rules' word: a deny rule decides first; an ask rule's
    check-6 deny names the rule; `explain` lists `rules` first."""
    checks = None if verdict.checks is None else (rules_check(outcome), *verdict.checks)
    if outcome.deny is not None:
        return Verdict(False, rule_deny(outcome.deny, tool.name, plan_id), checks)
    first = verdict.deny
    if outcome.ask is not None:
        if first is None and profile is None:
            first = ask_without_profile(tool, ctx)
        first = asked(first, outcome.ask)
    if first is verdict.deny and checks is None:
        return verdict
    return Verdict(first is None, first, checks)


def asks(ruleset: RuleSet, request: Any, registered: RegisteredTool | None,
         lock: Any) -> bool:
    """Whether an ask rule (and no deny rule) matches the call: check 6 then asks the
    service's approvals in a server-mode project (Authorizer.held)."""
    try:
        tool = request.core_tool(registered)
    except MissingCapability:
        return False  # decide_with answers 422 for it
    outcome = outcome_of(ruleset, request, tool, registered, plan_id=lock.plan_id,
                         project=lock.project, action_id=lock.action_id)
    return outcome.deny is None and outcome.ask is not None


def applied(outcome: RuleOutcome, tool: Tool) -> Tool:
    """The tool checks 1-10 run on: as a classify rule says the call is, and needing human
    approval when an ask rule matched. A deny rule decides before any of that."""
    if outcome.deny is not None:
        return tool
    if outcome.classify is not None and outcome.capability:
        tool = classified(tool, dict(outcome.capability))
    if outcome.ask is not None and not tool.requires_approval:
        tool = replace(tool, requires_approval=True)
    return tool


_TOOL_FIELDS = ("writes", "checkpointable", "unsafe", "destructive", "skill_category",
                "requires_approval")


def rules_detail(detail: dict[str, Any], outcome: RuleOutcome, unruled: Tool | None
                 ) -> None:
    """What the record keeps of the rules (only for decisions made with rules defined):
    every rule that matched, and what replay (SPEC §12) needs to evaluate candidate rules
    on this call: the tool as it was before a classify or ask rule changed it
    (`detail.tool` is what checks 1-10 saw)."""
    if outcome.matches:
        detail["rules"] = [match.as_record() for match in outcome.matches]
    recorded = detail["tool"]
    if unruled is not None and any(
            getattr(unruled, name) != recorded.get(name, False) for name in _TOOL_FIELDS):
        detail["before_rules"] = {name: getattr(unruled, name) for name in _TOOL_FIELDS}


def shell_detail(detail: dict[str, Any], registered: RegisteredTool) -> None:
    """A shell tool's command-line argument and a tool's URL arguments, in every record of
    theirs (rules or not): replay evaluates candidate rules on them (SPEC §12, §18)."""
    if registered.shell_arg is not None:
        detail["tool"]["shell_arg"] = registered.shell_arg
    if registered.url_args:
        detail["tool"]["url_args"] = list(registered.url_args)
