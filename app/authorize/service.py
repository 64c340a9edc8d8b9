"""One authorize decision: gather the plan's lock and the registry's word, run the core,
and build the log record. This is the hot path: on a known plan it reads nothing from the
database (the lock is cached; the registry is cached with a bounded staleness)."""

from __future__ import annotations

from dataclasses import replace
from time import perf_counter, time_ns
from typing import Any

from app.approvals.binding import binding, digests, with_approval
from app.approvals.service import ApprovalService
from app.auth.keys import Principal
from app.auth.scope import require_plan, stateless_forbidden
from app.authorize.record import record_detail
from app.authorize.rules import (
    applied,
    asks,
    outcome_of,
    rules_detail,
    shell_detail,
    with_rules,
)
from app.authorize.schemas import AuthorizeIn
from app.authorize.wire import AuthorizeWire
from app.edge.errors import Unavailable
from app.kit.caller import Caller, new_decision_id
from app.ledger.service import Known, Ledger, Reservation, needs_ledger
from app.log.records import mask
from app.plans.service import PlanCache, PlanLock
from app.policy.checks import evaluate, unregistered
from app.policy.model import LAYERS, Context, Tool, Verdict
from app.registry.service import RegistryCache, Shadow

NOBODY = Caller()  # a decision with no X-Request-ID and no key (tests, POST /v1/test)
INLINE = {"provenance": "inline", "name": None, "version": None, "is_default": False}


class Authorizer:
    """The authorize service: the steps after authentication that both the FastAPI route
    and the hot path (app/authorize/hotpath.py) run, with the caches they read. main.py
    builds it from each feature's state."""

    __slots__ = ("sessions", "plans", "registry", "masked", "approvals", "ledger")

    def __init__(self, *, sessions: Any, plans: PlanCache, registry: RegistryCache,
                 masked: frozenset[str], approvals: ApprovalService | None = None,
                 ledger: Ledger | None = None) -> None:
        self.sessions = sessions
        self.plans = plans
        self.registry = registry
        self.masked = masked
        self.approvals = approvals
        self.ledger = ledger

    def metered(self, lock: PlanLock | None, request: AuthorizeIn | AuthorizeWire) -> bool:
        """Whether checks 7/8 of this decision ask the ledger (SPEC §11): the plan has a
        cost limit, or the request names a step. Only those leave the memory-only path."""
        return (lock is not None and self.ledger is not None
                and (needs_ledger(lock.safety, request.context.step_id) or (
                    # A shadow with a cost limit reads the ledger too (SPEC §17), no hold.
                    (shadow := self.registry.shadows.get(lock.project)) is not None
                    and needs_ledger(shadow.safety, None))))

    def held(self, lock: PlanLock | None, request: AuthorizeIn | AuthorizeWire) -> bool:
        """Whether check 6 of this call asks the service's approvals (SPEC §10): its plan's
        profile, or the tool's registry entry (SPEC §17), requires human approval and its
        project's approval_mode is server. Only those decisions leave the memory-only
        path. An ask rule (SPEC §18) that matches the call counts as such a requirement."""
        if lock is None or self.approvals is None:
            return False
        registry = self.registry
        if lock.safety.require_human_approval or registry.requires_approval(request.tool.name):
            return registry.project(lock.project).approval_mode == "server"
        return (not registry.rules.empty
                and registry.project(lock.project).approval_mode == "server"
                and asks(registry.rules, request, registry.get(request.tool.name), lock))

    def _in_memory(self, request: AuthorizeIn | AuthorizeWire,
                   principal: Principal) -> tuple[bool, PlanLock | None]:
        """(True, the plan's lock or None when stateless) when the lock and the registry
        are in memory, the scope check passed (it raises as in `decide`); (False, None)
        when they must be read first."""
        lock = None if request.plan_id is None else self.plans.get(request.plan_id)
        if (lock is None and request.plan_id is not None) or not self.registry.fresh(
                self.sessions):
            return False, None
        check_scope(request, principal, lock)
        return True, lock

    def from_memory(self, request: AuthorizeIn | AuthorizeWire, principal: Principal,
                    caller: Caller) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The decision and its record when the plan's lock and the registry are in memory
        and the decision asks no approval, takes no hold and reads the ledger without
        awaiting if at all (SQLite; the scope check included, which raises as in `decide`);
        None otherwise. Awaits nothing."""
        ready, lock = self._in_memory(request, principal)
        if not ready or self.held(lock, request):
            return None
        known = None
        if self.metered(lock, request):
            assert lock is not None and self.ledger is not None
            if request.context.estimated_cost and needs_ledger(
                    lock.safety, request.context.step_id):  # an allow takes a hold: a write
                return None
            known = self.ledger.known_now(plan_id=lock.plan_id, project=lock.project,
                                          step_id=request.context.step_id)
            if known is None:
                return None
        return decide_with(request, lock, registry=self.registry, masked=self.masked,
                           caller=caller, known=known)

    async def decide(self, request: AuthorizeIn | AuthorizeWire, principal: Principal,
                     caller: Caller) -> tuple[dict[str, Any], dict[str, Any]]:
        """Scope check, then the decision: (response body, log record)."""
        ready, lock = self._in_memory(request, principal)
        started = perf_counter()
        if not ready:
            await check_authorize(request, principal, plans=self.plans,
                                  sessions=self.sessions)
            started = perf_counter()
            if request.plan_id is not None:
                lock = await self.plans.fetch(self.sessions, request.plan_id)
            await self.registry.ensure_fresh(self.sessions)
        if self.metered(lock, request):
            assert lock is not None
            return await self.decide_metered(request, lock, principal, caller=caller,
                                             started=started)
        if self.held(lock, request):
            assert lock is not None and self.approvals is not None
            decided = await decide_held(request, lock, principal, approvals=self.approvals,
                                        registry=self.registry, masked=self.masked,
                                        caller=caller, started=started)
            assert decided is not None  # None only when a reservation's hold is refused
            return decided
        return decide_with(request, lock, registry=self.registry, masked=self.masked,
                           caller=caller, started=started)

    async def decide_metered(self, request: AuthorizeIn | AuthorizeWire, lock: PlanLock,
                             principal: Principal, *, caller: Caller, started: float
                             ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Checks 7 and 8 on the larger of what the agent submits and what the ledger
        knows (SPEC §11). An allowed call with an estimated_cost then takes its hold, a
        conditional update made before the decision is recorded (and, for a call allowed
        by an approval, before the approval's use is taken); if spend and holds reached a
        limit meanwhile (another call, on any replica), it is decided again on the new
        totals, which now deny it."""
        assert self.ledger is not None
        ctx = request.context
        profile = lock.safety
        reservation = None
        if ctx.estimated_cost and needs_ledger(profile, ctx.step_id):  # not for a shadow's read
            reservation = Reservation(self.ledger, lock.plan_id, lock.project,
                                      ctx.estimated_cost, profile.max_cost_per_plan,
                                      profile.max_total_cost)
        for _ in range(5):
            known = await self.ledger.known(plan_id=lock.plan_id, project=lock.project,
                                            step_id=ctx.step_id)
            if self.held(lock, request):
                assert self.approvals is not None
                decided = await decide_held(
                    request, lock, principal, approvals=self.approvals,
                    registry=self.registry, masked=self.masked, caller=caller,
                    started=started, known=known, reservation=reservation)
                if decided is not None:
                    return decided
                continue  # the hold was refused: decide again on the new totals
            response, record = decide_with(request, lock, registry=self.registry,
                                           masked=self.masked, caller=caller,
                                           started=started, known=known)
            if (reservation is None or not response["allowed"]
                    or await reservation.take(response["decision_id"])):
                return response, record
        raise Unavailable("the plan's ledger changed under every attempt to hold this "
                          "call's estimated cost; ask again", code="ledger_busy")


async def decide_held(request: AuthorizeIn | AuthorizeWire, lock: PlanLock,
                      principal: Principal, *, approvals: ApprovalService,
                      registry: RegistryCache, masked: frozenset[str], caller: Caller,
                      started: float, known: Known | None = None,
                      reservation: Reservation | None = None
                      ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A decision whose check 6 asks the service's approvals (SPEC §10). Decided first
    as if no approval existed: only when check 6 is the check that fails does it look for a
    grant bound to this exact request. A grant makes check 6 pass; its use is taken (a
    conditional update) only when the whole decision is then an allow, before the decision
    is recorded (if recording fails: 503 and the use is forfeited). Otherwise the deny
    names the binding's pending approval, created once, or its rejection.
    `reservation`: an allow first holds its estimate (before any use is taken); None is
    returned when that hold is refused, for the caller to decide again."""
    response, record = decide_with(request, lock, registry=registry, masked=masked,
                                   caller=caller, started=started, known=known)
    if response["allowed"]:
        if reservation is not None and not await reservation.take(response["decision_id"]):
            return None
        return response, record
    if record["code"] != "human_approval_required":
        return response, record
    tool = request.core_tool(registry.get(request.tool.name))
    context = request.core_context(plan_id=lock.plan_id, stored_read_only=lock.read_only)
    bound = binding(tool, context, request.tool.safety_category)
    request_sha256, args_sha256 = digests(bound)
    if request_sha256 is None:  # RFC 8785 cannot hold it: no approval can ever match
        return with_approval(response, record, {"state": "unbindable"})
    grants = await approvals.usable_grants(lock.plan_id, request_sha256)
    # As if granted: only a call that a grant would let through asks a person (SPEC §17).
    granted, granted_record = decide_with(request, lock, registry=registry, masked=masked,
                                          caller=caller, started=started,
                                          approval="granted", known=known)
    if not grants and not granted["allowed"]:
        return with_approval(response, record, {"state": "not_requested",
                                                "would_fail": granted_record["code"]})
    if grants:
        if not granted["allowed"]:
            return granted, granted_record  # a later check fails: no use is taken
        decision_id = granted["decision_id"]
        if reservation is not None and not await reservation.take(decision_id):
            return None  # the budget went meanwhile: no use is taken either
        used = await approvals.use(grants, decision_id=decision_id, caller=caller)
        if used is not None:
            granted_record["detail"]["approval"] = {"approval_id": used.approval_id,
                                                    "uses_left": used.uses_left}
            return granted, granted_record
        if reservation is not None:
            await reservation.release(decision_id)  # the grant went to another call
    shown = {**bound, "args": mask(bound["args"], masked),
             "variables": mask(bound["variables"], masked)}
    details = await approvals.pending_for(
        project=lock.project, plan_id=lock.plan_id, action_id=lock.action_id,
        tool=tool.name, request=shown, request_sha256=request_sha256,
        args_sha256=args_sha256, caller=caller,
        principal_name=principal.principal_name or principal.key_id)
    return with_approval(response, record, details)


async def decide(
    request: AuthorizeIn | AuthorizeWire,
    *,
    sessions: Any,
    cache: PlanCache,
    registry: RegistryCache,
    masked: frozenset[str] = frozenset(),
    caller: Caller = NOBODY,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Returns (response body, log record). Raises NotFound / MissingCapability for input
    the caller must fix; those are never decisions."""
    started = perf_counter()
    lock = None
    if request.plan_id is not None:
        lock = await cache.fetch(sessions, request.plan_id)
    await registry.ensure_fresh(sessions)
    return decide_with(request, lock, registry=registry, masked=masked, caller=caller,
                       started=started)


def decide_with(
    request: AuthorizeIn | AuthorizeWire,
    lock: PlanLock | None,
    *,
    registry: RegistryCache,
    masked: frozenset[str] = frozenset(),
    caller: Caller = NOBODY,
    started: float | None = None,
    approval: str | None = None,
    known: Known | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """decide() once the plan's lock is at hand (None: a stateless request) and the
    registry is fresh: no I/O, nothing awaited (the hot path calls it directly).
    `approval="granted"`: a grant held by the service matches (decide_held found it); in
    a project with approval_mode server nothing else passes check 6. `known`: what the
    ledger knows (Authorizer.decide_metered); checks 7/8 run on the larger of it and the
    submitted values."""
    if started is None:
        started = perf_counter()
    project = action_id = None
    if lock is not None:
        profile = lock.safety
        summary: dict[str, Any] | None = lock.summary
        label: str | None = lock.plan_id
        stored_read_only = lock.read_only
        project, action_id = lock.project, lock.action_id
    else:
        profile = request.safety_profile
        summary = INLINE if profile is not None else None
        label = request.context.plan_id
        stored_read_only = False

    registered = registry.get(request.tool.name)
    context = request.core_context(plan_id=label, stored_read_only=stored_read_only)
    effective: dict[str, Any] | None = None
    # The skill and changeset layers answer only their write guard, registry or not.
    refused = (registered is None and request.layer == "runtime"
               and registry.deny_unregistered(project))
    if refused:
        cap = request.tool.capability
        writes = bool(cap is not None and cap.writes)
        tool = Tool(name=request.tool.name, writes=writes, checkpointable=False, unsafe=False)
    else:
        tool = request.core_tool(registered)
    outcome = unruled = None
    if not registry.rules.empty:  # call rules (SPEC §18), before check 1
        unruled = tool
        outcome = outcome_of(registry.rules, request, tool, registered, plan_id=label,
                             project=project, action_id=action_id)
        tool = applied(outcome, tool)
    if (lock is not None and profile is not None
            and (profile.require_human_approval or tool.requires_approval)
            and registry.project(project).approval_mode == "server"):
        context.approval = approval or "absent"  # the agent's own flag is not evidence
        effective = {"approval": context.approval}
    if known is not None:
        context.accumulated_cost = max(context.accumulated_cost, known.plan)
        context.total_accumulated_cost = max(context.total_accumulated_cost, known.project)
        if known.step_failures is not None:
            context.step_retry_count = max(context.step_retry_count, known.step_failures)
        # Read for a shadow only: no hold, the answer cannot change; replay rebuilds it.
        if profile is not None and needs_ledger(profile, request.context.step_id):
            effective = {**(effective or {}), "accumulated_cost": context.accumulated_cost,
                         "total_accumulated_cost": context.total_accumulated_cost,
                         "step_retry_count": context.step_retry_count}
    if refused:
        verdict = unregistered(request.tool.name, context, writes=tool.writes,
                               explain=request.explain)
    else:
        verdict = evaluate(tool, context, profile, layer=LAYERS[request.layer],
                           explain=request.explain)
    if outcome is not None:
        verdict = with_rules(verdict, outcome, tool, context, profile, label)
    deny = verdict.deny
    decision_id = new_decision_id()
    response = {
        "decision_id": decision_id,
        "allowed": verdict.allowed,
        "deny": deny.as_dict() if deny is not None else None,
        "plan_id": label,
        "profile": summary,
        "checks": [c.as_dict() for c in verdict.checks] if verdict.checks is not None else None,
    }
    # Spelled out rather than new_record(...): this runs for every decision, and the dict
    # literal costs a tenth of the keyword call. A field missing here fails the writer's
    # insert (it writes every column), an extra one fails verification of the stored row.
    record = {
        "decision_id": decision_id, "kind": "authorize",
        "created_at": time_ns(),  # the writer turns it into the ISO text it hashes
        "project": project, "plan_id": label, "action_id": action_id, "tool": tool.name,
        "allowed": verdict.allowed,
        "code": deny.code if deny else None, "error": deny.error if deny else None,
        "check": deny.check if deny else None,
        "provenance": summary["provenance"] if summary else None,
        "profile_name": summary["name"] if summary else None,
        "profile_version": summary["version"] if summary else None,
        # Whole microseconds, in ms: round(x, 3) formats and parses a decimal string.
        "latency_ms": round((perf_counter() - started) * 1_000_000) / 1000,
        "request_id": caller.request_id, "key_id": caller.key_id,
        "detail": record_detail(request, tool, context_masked=masked, deny=deny,
                          stateless=request.plan_id is None),
    }
    if effective is not None:
        # What the service, not the agent, gave the core: replay (SPEC §12) reads these
        # over the recorded context. Keys: approval; the ledger adds its known values.
        record["detail"]["effective"] = effective
    if stored_read_only and not request.context.plan_read_only:
        record["detail"].setdefault("effective", {})["plan_read_only"] = True
    if outcome is not None:
        rules_detail(record["detail"], outcome, unruled)
    if registered is not None and (registered.shell_arg is not None or registered.url_args):
        shell_detail(record["detail"], registered)
    if project is not None and (facts := registry.facts.get(project)) is not None:
        record["detail"]["settings"] = facts  # replay needs them too (shared, never mutated)
    if registry.shadows:  # empty unless some project has a shadow_profile: one test
        shadow = registry.shadows.get(project)  # type: ignore[arg-type]
        if shadow is not None:
            record["detail"]["shadow"] = _shadow(
                shadow, tool, context, verdict, request.layer,
                refused=refused or (outcome is not None and outcome.deny is not None))
    return response, record


def _shadow(shadow: Shadow, tool: Tool, context: Context, verdict: Verdict, layer: str, *,
            refused: bool) -> dict[str, Any]:
    """The decision again under the project's shadow profile (SPEC §12): the same tool
    and context (the ledger's and the approvals' values included), another profile. Pure:
    nothing is read or awaited. A tool refused as unregistered, or by a deny rule, is
    refused under any profile. In server mode check 6 passes only on a grant: for a plan
    whose own profile needs none, no grant was looked up, so the shadow counts it absent."""
    if not refused:
        if context.approval is None and shadow.server_approvals:
            context = replace(context, approval="absent")
        verdict = evaluate(tool, context, shadow.safety, layer=LAYERS[layer])
    deny = verdict.deny
    return {"profile": shadow.name, "version": shadow.version, "allowed": verdict.allowed,
            "code": deny.code if deny is not None else None}


async def check_authorize(request: Any, principal: Principal, *, plans: PlanCache,
                          sessions: Any) -> None:
    """Before a decision: a request without plan_id needs a key that may send one (SPEC §9:
    admin keys and keys created stateless), and a plan must be in the key's projects."""
    lock: PlanLock | None = None
    if request.plan_id is not None and principal.scoped:
        lock = await plans.fetch(sessions, request.plan_id)
    check_scope(request, principal, lock)


def check_scope(request: Any, principal: Principal, lock: PlanLock | None) -> None:
    """check_authorize with the plan's lock at hand (needed only for a scoped key). Every
    way of serving authorize runs it (the FastAPI routes, the hot path, the uvicorn
    plug-in, all through Authorizer.from_memory or check_authorize)."""
    if request.plan_id is None:
        # A stateless request runs on the caller's own profile, or none (checks 3-8
        # skipped): a way around every plan's profile and project setting. One attribute
        # test: the key cache decided it when it read the key.
        if not principal.stateless:
            raise stateless_forbidden()
    elif principal.scoped:
        assert lock is not None, "a scoped key's plan check needs the plan's lock"
        require_plan(principal, request.plan_id, lock.project)
