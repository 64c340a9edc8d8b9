"""One stored authorize decision, re-evaluated from its recorded inputs under a candidate
(SPEC §12). Pure: plain values in, a verdict out; no database, no HTTP.

What a record holds (app/authorize/service.py `_detail`): the layer, the effective tool
(the registry's word merged with the request's, with the registered tool's path_args), the
request's own capability and categories (`request`), the context as the agent sent it,
`effective` (what the service gave the core over that context: a server-mode approval, a
plan's stored read_only, the ledger's values), `settings` (the project settings the
decision depended on beyond its profile), `masked` (the keys whose values were not stored)
and, for a stateless request, its own safety_profile. A plan-bound decision's profile is its
plan's locked profile, read from the plan (locks never change)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from app.policy.checks import evaluate, unregistered
from app.policy.denies import LAYER_CHECKS
from app.policy.model import LAYERS, Capability, Context, Layer, RegisteredTool, Tool
from app.policy.profiles import SafetyProfile
from app.policy.rules import RuleSet
from app.policy.tool import MissingCapability, effective_tool
from app.replay import rules as replay_rules

ALLOW = "allow"
# The verdict of a call the candidate would refuse before any check: an unregistered tool
# whose request did not say what it does is a 422 (invalid_input), never a decision.
INVALID = "invalid_input"
MASKED, LEGACY, LEDGER = "masked", "legacy", "ledger"
# The runtime checks after the skill-category check: their denies come after its own.
_AFTER_SKILL = frozenset(spec.name for spec in LAYER_CHECKS["runtime"][
    [spec.name for spec in LAYER_CHECKS["runtime"]].index("skill_category") + 1:])


def verdict(allowed: bool | None, code: str | None) -> str:
    return ALLOW if allowed else (code or "unknown")


@dataclass(frozen=True, slots=True)
class Candidate:
    """`profile` replaces every decision's profile whole (decisions that had none keep
    none); `tools` replaces the registry entries it names (None: removed). Anything not
    named is taken as recorded."""

    profile: SafetyProfile | None = None
    tools: dict[str, RegisteredTool | None] = field(default_factory=dict)
    # Call rules that replace every decision's (None: each decision's as recorded).
    rules: RuleSet | None = None


class Unreplayable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # MASKED or LEGACY


def plan_bound(action_id: str | None) -> bool:
    """Whether a record is a plan's decision (its profile is the plan's lock): every plan
    has an action; a stateless request has none."""
    return action_id is not None


def reads_spend(profile: SafetyProfile | None) -> bool:
    """Whether checks 7/8 under `profile` read what the plan and project spent."""
    return profile is not None and (profile.max_cost_per_plan is not None
                                    or profile.max_total_cost is not None)


def replay(detail: dict[str, Any], *, tool_name: str, plan_id: str | None,
           action_id: str | None, plan_profile: SafetyProfile | None,
           candidate: Candidate, spend: tuple[float, float] | None = None,
           project: str | None = None) -> str:
    """The verdict ("allow" or a deny code) of one recorded decision under `candidate`.
    `plan_profile`: the plan's locked profile (plan-bound decisions, when the candidate
    brings none). `spend`: the plan's and its project's spent + held as of the decision,
    rebuilt from the log (app/replay/spend.py; None: not known), for a record whose own
    decision did not read the ledger. Raises Unreplayable(MASKED) when a check would read
    a value the record masked, Unreplayable(LEDGER) when it would read a spend that is not
    known, Unreplayable(LEGACY) when the record lacks what replay needs."""
    request = detail.get("request")
    recorded = detail.get("tool")
    if request is None or not isinstance(recorded, dict) or "path_args" not in recorded:
        raise Unreplayable(LEGACY)
    layer = LAYERS[detail["layer"]]
    settings = detail.get("settings") or {}
    masked = detail.get("masked") or {}
    bound = plan_bound(action_id)
    if bound:
        profile = candidate.profile or plan_profile
    else:
        own = detail.get("safety_profile")
        profile = None if own is None else (candidate.profile or _profile(own))
    context = _context(detail, plan_id=plan_id, bound=bound,
                       server=settings.get("approval_mode") == "server")
    if bound and reads_spend(candidate.profile) and "accumulated_cost" not in (
            detail.get("effective") or {}):
        # The decision did not read the ledger (its plan had no cost limit); the
        # candidate's limit would: the spend as of its time, rebuilt from the log. (Under
        # its own profile a decision is replayed as recorded: the candidate is all that
        # changes.)
        if spend is None:
            raise Unreplayable(LEDGER)
        context.accumulated_cost = max(context.accumulated_cost, spend[0])
        context.total_accumulated_cost = max(context.total_accumulated_cost, spend[1])
    deny_unregistered = layer is Layer.RUNTIME and bool(settings.get("deny_unregistered_tools"))
    capability = request.get("capability")
    if tool_name in candidate.tools:
        registered = candidate.tools[tool_name]
        if registered is None and deny_unregistered:
            return _refused(tool_name, context, capability)
        if (registered is None or registered.skill_category is None) \
                and not request.get("skill_category") \
                and "tool_skill_category" in masked.get("metadata", ()):
            raise Unreplayable(MASKED)  # the category would come from masked metadata
        try:
            tool = effective_tool(
                name=tool_name,
                capability=Capability(**capability) if capability is not None else None,
                destructive=request.get("safety_category") == "destructive",
                skill_category=request.get("skill_category"), args=recorded["args"],
                metadata=context.metadata, registered=registered, layer=layer,
                path_args=request.get("path_args") or ())
        except MissingCapability:
            return INVALID
    else:
        if not recorded["registered"] and deny_unregistered:
            return _refused(tool_name, context, capability)
        tool = Tool(tool_name, recorded["writes"], recorded["checkpointable"],
                    recorded["unsafe"], recorded["destructive"], recorded["skill_category"],
                    recorded["args"], tuple(recorded["path_args"]), recorded["registered"],
                    bool(recorded.get("requires_approval")))
    if candidate.rules is None:
        if replay_rules.denied_as_recorded(detail):
            return "rule_denied"
        asked = replay_rules.asked_as_recorded(detail)
        if tool_name in candidate.tools:
            tool = replay_rules.as_recorded(tool, detail)
    else:
        if masked.get("args") or "HOME" in masked.get("variables", ()):
            raise Unreplayable(MASKED)  # rules read the arguments and HOME
        if tool_name not in candidate.tools:
            tool = replay_rules.unruled(tool, detail)
            shell_arg, url_args = recorded.get("shell_arg"), tuple(recorded.get("url_args", ()))
            read_only = bool((capability or {}).get("read_only"))
        else:
            entry = candidate.tools[tool_name]
            shell_arg = entry.shell_arg if entry is not None else None
            url_args = entry.url_args if entry is not None else ()
            read_only = entry.read_only if entry is not None else False
        ruled = replay_rules.outcome(candidate.rules, tool, detail, plan_id=plan_id,
                                     project=project, action_id=action_id,
                                     shell_arg=shell_arg, url_args=url_args,
                                     read_only=read_only)
        if ruled.deny is not None:
            return "rule_denied"
        tool = replay_rules.applied(ruled, tool)
        asked = ruled.ask is not None
    _check_masked(masked, tool, context, profile)
    if profile is None or not profile.allowed_skill_categories:
        result = evaluate(tool, context, profile, layer=layer)
        if result.allowed and asked and profile is None and layer is Layer.RUNTIME:
            # An ask rule asks on a decision without a profile too (app/authorize/rules.py).
            asking = replay_rules.ask_without_profile(tool, context)
            return ALLOW if asking is None else asking.code
        return verdict(result.allowed, result.deny.code if result.deny else None)
    # The skill-category check costs as much as the list is long (a membership test and a
    # message that names every category): it runs here on a set, the other checks on the
    # profile without the list, so a record costs the same whatever the list's size.
    stripped, allowed = prepared(profile)
    result = evaluate(tool, context, stripped, layer=layer)
    if layer is Layer.RUNTIME and (result.deny is None or result.deny.check in _AFTER_SKILL):
        if tool.skill_category is None:
            return "skill_category_missing"
        if tool.skill_category not in allowed:
            return "skill_category_not_allowed"
    return verdict(result.allowed, result.deny.code if result.deny else None)


# Profiles split for replay, by identity (a candidate's, plans' locks, stateless ones).
_PREPARED: dict[int, tuple[SafetyProfile, SafetyProfile, frozenset[str]]] = {}


def prepared(profile: SafetyProfile) -> tuple[SafetyProfile, frozenset[str]]:
    """`profile` without its allowed_skill_categories, and those as a set."""
    hit = _PREPARED.get(id(profile))
    if hit is None or hit[0] is not profile:
        if len(_PREPARED) >= 4096:
            _PREPARED.clear()
        hit = _PREPARED[id(profile)] = (
            profile, profile.model_copy(update={"allowed_skill_categories": []}),
            frozenset(profile.allowed_skill_categories))
    return hit[1], hit[2]


_PROFILES: dict[bytes, SafetyProfile] = {}  # stateless requests' own profiles, by their text


def _profile(own: dict[str, Any]) -> SafetyProfile:
    """A stateless request's recorded profile; the same few come back again and again."""
    key = orjson.dumps(own, option=orjson.OPT_SORT_KEYS)
    profile = _PROFILES.get(key)
    if profile is None:
        if len(_PROFILES) >= 1024:
            _PROFILES.clear()
        profile = _PROFILES[key] = SafetyProfile.model_validate(own)
    return profile


def _refused(name: str, context: Context, capability: dict[str, Any] | None) -> str:
    writes = bool(capability is not None and capability.get("writes"))
    result = unregistered(name, context, writes=writes)
    return verdict(result.allowed, result.deny.code if result.deny else None)


def _context(detail: dict[str, Any], *, plan_id: str | None, bound: bool,
             server: bool) -> Context:
    c = detail["context"]
    effective = detail.get("effective") or {}
    approval = effective.get("approval")
    if approval is None and server and bound:
        # Server mode, and no approval was looked up (the plan's profile needed none):
        # none is taken as granted, as the service would not count the agent's flag.
        approval = "absent"
    if effective:
        return Context(
            plan_id, c["sandbox_id"] or None, c["sandbox_root"], c["variables"],
            bool(c["plan_read_only"] or effective.get("plan_read_only")),
            c["require_checkpoints"], c["metadata"],
            effective.get("accumulated_cost", c["accumulated_cost"]),
            effective.get("total_accumulated_cost", c["total_accumulated_cost"]),
            effective.get("step_retry_count", c["step_retry_count"]),
            c["dry_run"], c["confirmed"], approval)
    # Positional, in Context's field order (as core_context does): once per record.
    return Context(plan_id, c["sandbox_id"] or None, c["sandbox_root"], c["variables"],
                   c["plan_read_only"], c["require_checkpoints"], c["metadata"],
                   c["accumulated_cost"], c["total_accumulated_cost"],
                   c["step_retry_count"], c["dry_run"], c["confirmed"], approval)


def _check_masked(masked: dict[str, list[str]], tool: Tool, context: Context,
                  profile: SafetyProfile | None) -> None:
    """A check that would read a masked value makes the decision unreplayable: the path
    check reads the path arguments and the variables they name; check 6 (client flag
    mode) reads metadata.human_approved."""
    if not masked:
        return
    if tool.path_args and (set(masked.get("args", ())) & set(tool.path_args)
                           or masked.get("variables")):
        raise Unreplayable(MASKED)
    if ("human_approved" in masked.get("metadata", ()) and context.approval is None
            and profile is not None
            and (profile.require_human_approval or tool.requires_approval)):
        raise Unreplayable(MASKED)
