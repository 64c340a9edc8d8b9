"""A hook call answered (SPEC §15): hook body -> authorize request -> the pipeline of
POST /v1/authorize-tool (app/authorize/pipeline.py `decide`, `finish`), then the decision
log -> the hook's answer; PostToolUse -> the outcome (§11) of the decision made for that
tool_use_id.

This is glue only: the decision, its record, plan use and outcome reports are the
authorize, plans and ledger features' own functions.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import orjson
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.auth.keys import Principal
from app.authorize.pipeline import NeedsIO, Pipeline
from app.authorize.wire import decode_authorize
from app.edge.errors import InvalidInput, ToolgateError
from app.edge.handlers import validation_details
from app.edge.jsonkeys import refuse_duplicates
from app.hooks import claude
from app.hooks.agents import DEFAULT, NAMES
from app.hooks.claude import PRE, HookCall, Undecidable
from app.hooks.repository import decision_for
from app.kit.caller import Caller
from app.kit.canonical import canonical_sha256
from app.kit.schemas import NAME_PATTERN
from app.ledger import book
from app.ledger.schemas import OutcomeIn
from app.ledger.service import Ledger
from app.log.audit import record_decisions
from app.plans.schemas import PlanIn
from app.plans.use import plan_use
from app.policy.denies import DENY_CODES
from app.policy.paths import PathEscape, check_root, find_escape
from app.policy.tool import MissingCapability
from app.store.engine import WRITE_OPTION, read_only

log = logging.getLogger("toolgate")
_NAME = re.compile(NAME_PATTERN)
MAX_ROOTS = 32


def _escapes(args: dict[str, Any], path_args: tuple[str, ...], root: str) -> Any:
    return find_escape(args, path_args, root=root, variables={})


def hook_setup(raw: bytes, agent: str | None, roots: list[str], home: str | None = None
               ) -> tuple[str, tuple[str, ...], str | None]:
    """The hook URL's `?agent=` (default claude-code), `?root=` and `?home=` values,
    checked: the agent one toolgate knows (app/hooks/agents.py), each root (and the home)
    an absolute directory path the sandbox check can use."""
    agent = DEFAULT if agent is None else agent
    if agent not in NAMES:
        raise Undecidable(f"agent '{agent[:100]}' is not one toolgate knows "
                          f"({', '.join(sorted(NAMES))})", code="invalid_hook_url",
                          event=peek_event(raw))
    if len(roots) > MAX_ROOTS:
        raise Undecidable(f"the hook URL names more than {MAX_ROOTS} roots",
                          code="invalid_hook_url", event=peek_event(raw))
    for name, path in [*(("root", r) for r in roots), *([("home", home)] if home else [])]:
        try:
            check_root(path)
        except PathEscape as exc:
            raise Undecidable(f"{name} '{path[:200]}': {exc}", code="invalid_hook_url",
                              event=peek_event(raw)) from None
    return agent, tuple(roots), home


class Hooks:
    """What main.py's lifespan builds for the hook route, from the features' own state."""

    __slots__ = ("pipeline", "decision_log", "sessions", "ledger", "allow_inline_profiles")

    def __init__(self, *, pipeline: Pipeline, decision_log: Any,
                 sessions: async_sessionmaker[AsyncSession], ledger: Ledger,
                 allow_inline_profiles: bool) -> None:
        self.pipeline = pipeline  # the one decision entry point (key, rate, role, decide)
        self.decision_log = decision_log
        self.sessions = sessions
        self.ledger = ledger
        self.allow_inline_profiles = allow_inline_profiles

    async def answer(self, raw: bytes, *, plan_id: str | None, action: str | None,
                     principal: Principal, caller: Caller, page: str,
                     gateways: frozenset[str] = frozenset(), agent: str | None = None,
                     roots: list[str] | tuple[str, ...] = (),
                     home: str | None = None) -> dict[str, Any]:
        """The hook's answer to one body. Raises Undecidable or a ToolgateError for a call
        it cannot decide on (the route answers those with a deny, app/hooks/routes.py)."""
        agent, roots, home = hook_setup(raw, agent, list(roots), home)
        if (plan_id is None) == (action is None):
            raise Undecidable("the hook URL needs exactly one of ?plan_id= or ?action=",
                              code="invalid_hook_url", event=peek_event(raw))
        given = plan_id if plan_id is not None else action
        assert given is not None
        if not _NAME.match(given):
            what = "plan_id" if plan_id is not None else "action"
            raise Undecidable(f"'{given[:200]}' is not a valid {what} name",
                              code="invalid_hook_url", event=peek_event(raw))
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise Undecidable(f"the hook body is not JSON: {exc}", code="invalid_json") from None
        try:  # {"command": "rm -rf /", "command": "ls"}: no guessing which one runs
            refuse_duplicates(raw, body)
        except InvalidInput as exc:
            raise Undecidable(f"the hook body is refused: {exc.message}",
                              code="duplicate_key") from None
        call = claude.parse(body)
        gateway = claude.gateway_of(call.agent_tool, gateways)
        if gateway is not None:
            if call.event != PRE:
                return {}  # the gateway reports the outcome itself
            return claude.pre_answer("allow", f"toolgate's MCP gateway '{gateway}' decides "
                                              "this call before it forwards it")
        plan = plan_id if plan_id is not None else claude.session_plan_id(call.session_id)
        if call.event == PRE:
            if action is not None:
                await self._session_plan(plan, action, principal=principal, caller=caller)
            return await self._decide(call, plan, principal=principal, caller=caller,
                                      page=page, agent=agent, roots=roots, home=home)
        return await self._outcome(call, plan, principal=principal, caller=caller)

    async def _session_plan(self, plan_id: str, action: str, *, principal: Principal,
                            caller: Caller) -> None:
        """The session's plan, created from `action` by its first call (plan use: the same
        request again is idempotent, on any replica). Its lock in memory: nothing read."""
        lock = self.pipeline.authorizer.plans.get(plan_id)
        if lock is not None:
            if lock.action_id != action:
                raise Undecidable(f"this session's plan '{plan_id}' was made from action "
                                  f"'{lock.action_id}', not '{action}'", code="plan_conflict")
            return
        async with self.sessions() as session, session.begin():
            await session.connection(execution_options={WRITE_OPTION: True})
            await plan_use(session, PlanIn(action_id=action, plan_id=plan_id),
                           principal=principal, caller=caller,
                           allow_inline_profiles=self.allow_inline_profiles)

    async def _decide(self, call: HookCall, plan_id: str, *, principal: Principal,
                      caller: Caller, page: str, agent: str,
                      roots: tuple[str, ...], home: str | None) -> dict[str, Any]:
        root = None
        if roots:  # the registry's path_args say which arguments are paths (a stale
            # entry can only choose among the operator's roots; the core checks the paths)
            registry = self.pipeline.authorizer.registry
            if not registry.fresh(self.sessions):
                await registry.ensure_fresh(self.sessions)
            registered = registry.get(call.tool)
            root = claude.choose_root(call, registered.path_args if registered else (),
                                      roots, _escapes)
        try:
            request = decode_authorize(claude.authorize_body(call, plan_id, agent=agent,
                                                             root=root, home=home))
        except ValidationError as invalid:
            fields = ", ".join(f"{d['field']} ({d['message']})"
                               for d in validation_details(invalid.errors()))
            raise Undecidable(f"the tool call is not a valid authorize request: {fields}",
                              code="invalid_input", event=PRE) from None
        try:
            decided = self.pipeline.decide(request, principal, caller)
            if type(decided) is NeedsIO:
                decided = await self.pipeline.finish(decided)
        except MissingCapability:  # a deny of its own, never "could not decide"
            raise Undecidable(_unregistered(call, agent), code=UNREGISTERED, event=PRE,
                              error=DENY_CODES[UNREGISTERED].error) from None
        response = decided.answer
        decided.record["detail"]["agent"] = agent  # SPEC §20: each agent named
        await record_decisions(self.decision_log, [decided.record])
        decision_id = response["decision_id"]
        deny = response["deny"]
        if deny is None:
            return claude.pre_answer("allow", f"allowed by toolgate [decision {decision_id}]")
        why = claude.reason(deny, decision_id)
        if deny["code"] != "human_approval_required":
            return claude.pre_answer("deny", why)
        approval = deny["details"].get("approval")
        if approval is None:  # client_flag mode: Claude Code asks its user
            return claude.pre_answer("ask", why)
        if approval.get("approval_id"):
            why += (f"; a person can grant it at {page}/ui/#/approvals/"
                    f"{approval['approval_id']}, then retry the same call")
        return claude.pre_answer("deny", why)

    async def _outcome(self, call: HookCall, plan_id: str, *, principal: Principal,
                       caller: Caller) -> dict[str, Any]:
        async with read_only(self.sessions) as session:
            found = await decision_for(session, plan_id=plan_id, tool_use_id=call.tool_use_id,
                                       tool=call.tool)
        if found is None:
            raise Undecidable(f"no decision of plan '{plan_id}' was made for tool_use_id "
                              f"'{call.tool_use_id}' ({call.agent_tool}): it ran without "
                              "toolgate's allow", code="no_decision", event=call.event)
        if not found.allowed:
            if found.code == "human_approval_required":
                return {}  # `ask`: Claude Code's user allowed it; nothing of toolgate's did
            raise Undecidable(f"decision {found.decision_id} denied tool_use_id "
                              f"'{call.tool_use_id}', yet it ran", code="ran_after_deny",
                              event=call.event)
        failed = call.failure is not None
        body = OutcomeIn(status="execution_failed" if failed else "succeeded",
                         error=call.failure, args_sha256=canonical_sha256(call.args))
        # Booked like POST /v1/decisions/{id}/outcome (app/ledger/book.py): it reads the
        # decision again, inside the report's own transaction.
        await book.report(self.ledger.book, found.decision_id, body, principal, caller)
        return {}


def peek_event(raw: bytes) -> str | None:
    """The body's hook_event_name when it has one (how to word a refusal), else None."""
    try:
        event = orjson.loads(raw).get("hook_event_name")
    except (orjson.JSONDecodeError, AttributeError):
        return None
    return event if isinstance(event, str) else None


UNREGISTERED = "unregistered_tool"


def _unregistered(call: HookCall, agent: str) -> str:
    """Why a call of a tool the registry does not know is denied, and the file that
    registers it: the agent's mapping file for its own tools, the operator's policy file for
    an MCP server's (`S.T`)."""
    if "." in call.tool:  # an MCP tool, named S.T
        where = (f"register '{call.tool}' in your policy file's tools: section and run "
                 f"`toolgate apply FILE` (docs/registry.md); examples/{agent}.yaml "
                 f"registers {agent}'s own tools only")
    else:
        where = (f"apply examples/{agent}.yaml (`toolgate apply examples/{agent}.yaml`), "
                 f"which registers {agent}'s own tools, or register '{call.tool}' in your "
                 "policy file")
    return (f"tool '{call.tool}' is not in toolgate's registry, so it is denied: toolgate "
            f"does not guess what a tool does; {where}{claude.gateway_hint(call.agent_tool)}")


def refused(exc: Exception, event: str | None) -> dict[str, Any]:
    """The deny for a hook call that could not be decided: never an empty allow."""
    if isinstance(exc, Undecidable):
        return claude.refusal(exc.code, exc.message, exc.event or event, exc.error)
    if isinstance(exc, ToolgateError):
        return claude.refusal(exc.code, exc.message, event)
    log.exception("hook call not decided")
    return claude.refusal("internal", "an internal error; see toolgate's log", event)
