"""One `tools/call` through the gateway (SPEC §14): decide, then forward exactly what was
decided on, then report the outcome. Any failure to decide fails closed: nothing is
forwarded without an allow that toolgate answered (and so recorded)."""

from __future__ import annotations

import asyncio
import copy
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
import rfc8785
from toolgate_client import AsyncClient, ToolgateError
from toolgate_client.guard import outcome_body

from app.gateway import mapping
from app.gateway.config import GatewayConfig
from app.gateway.pins import Pins, PinsUnavailable
from app.gateway.sessions import ClientLink, Via, on_session
from app.gateway.upstream import Upstream, UpstreamUnavailable

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

log = logging.getLogger("toolgate.gateway")

META = "toolgate/decision"
UNAVAILABLE = "ToolgateUnavailableError"
REGISTRY_SECONDS = 10.0  # how long the list of registered tools is trusted
REPORT_BATCH = 100  # outcomes in one POST /v1/outcomes (its limit, SPEC §11)

# Asks the client's user to confirm a destructive call: True only on accept + confirm.
Confirm = Callable[[str, dict[str, Any]], Awaitable[bool]]


class NoDecision(Exception):
    """No decision could be had (unreachable, 5xx, timeout, 4xx, malformed answer)."""


def error_result(text: str, meta: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True,
                                _meta={META: meta} if meta is not None else None)


def args_sha256(args: dict[str, Any]) -> str | None:
    try:
        return hashlib.sha256(rfc8785.dumps(args)).hexdigest()
    except Exception:  # an integer beyond 2^53 and the like: no digest to compare
        return None


class Gate:
    def __init__(self, config: GatewayConfig, toolgate: AsyncClient,
                 upstreams: dict[str, Upstream]) -> None:
        self.config = config
        self.toolgate = toolgate
        self.upstreams = upstreams
        self.plan_id: str | None = config.plan.plan_id
        self._plan_lock = anyio.Lock()
        self._registered: set[str] = set()
        self._registry_at = -1e9
        self._reports: set[asyncio.Task[None]] = set()
        self._queue: list[dict[str, Any]] = []  # outcomes booked, not yet sent
        self._sender: asyncio.Task[None] | None = None
        self._first_tried = False
        self.pins = Pins(config, toolgate)  # SPEC §19: tool definitions against their pins
        self.tasks: TaskGroup | None = None  # run.py: where client sessions' tasks run

    async def first_attempts(self, timeout: float) -> None:
        """Once, at most `timeout`: until every upstream was tried once (connected or
        failed), so a client's first tools/list is the upstreams' and not an empty one.
        The listener answers `initialize` before that: a client that gives up on a slow
        handshake (Claude Code waits ~8 s) is not kept waiting by a slow upstream."""
        if self._first_tried:
            return
        with anyio.move_on_after(timeout):
            for upstream in self.upstreams.values():
                await upstream.wait_first_attempt(timeout)
        self._first_tried = True

    # -- the plan and the registry ---------------------------------------------------------

    async def ensure_plan(self) -> str:
        if self.plan_id is not None:
            return self.plan_id
        async with self._plan_lock:
            if self.plan_id is None:
                assert self.config.plan.action is not None
                try:
                    plan = await self.toolgate.create_plan(self.config.plan.action)
                except ToolgateError as exc:
                    raise NoDecision(f"cannot create the gateway's plan: {exc}") from exc
                if not isinstance(plan.get("plan_id"), str):
                    raise NoDecision("toolgate's plan answer has no plan_id")
                self.plan_id = plan["plan_id"]
                log.info("gateway: plan %s (action %s)", self.plan_id, self.config.plan.action)
        return self.plan_id

    async def _refresh_registry(self, force: bool = False) -> None:
        if not force and time.monotonic() - self._registry_at < REGISTRY_SECONDS:
            return
        names: set[str] = set()
        try:
            answer = await self.toolgate.request("GET", "/v1/tools")
            for item in answer.get("items", []) if isinstance(answer, dict) else []:
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    names.add(item["name"])
        except ToolgateError as exc:
            # Unknown registry: every tool is sent with its claim, which can only tighten
            # a registered tool (SPEC §3); the decision itself still fails closed.
            log.debug("gateway: registry not read: %s", exc)
            return
        self._registered = names
        self._registry_at = time.monotonic()

    # -- tools/list ------------------------------------------------------------------------

    def tools_of(self, server: str, link: ClientLink | None = None) -> dict[str, types.Tool]:
        """What `server` lists: on the client's own session when it was listed there,
        else on the gateway's shared one."""
        if link is not None and server in link.tools:
            return link.tools[server]
        return self.upstreams[server].tools

    def list_tools(self, link: ClientLink | None = None) -> list[types.Tool]:
        """The union in a fixed order (servers as configured, each server's own order);
        a server that is down is left out."""
        tools: list[types.Tool] = []
        for server, upstream in self.upstreams.items():
            if not upstream.up:
                continue
            for tool in self.tools_of(server, link).values():
                if not self.pins.listed(server, tool):
                    continue  # its definition is not the pinned one (pins.py)
                tools.append(tool.model_copy(update={"name": mapping.gateway_name(server,
                                                                                  tool.name)}))
        return tools

    async def check_pins(self, link: ClientLink | None = None) -> None:
        """Before a tools/list answer: every listed tool against its pin (pins.py)."""
        await self.pins.check({server: self.tools_of(server, link)
                               for server, upstream in self.upstreams.items() if upstream.up})

    async def _pin_refusal(self, server: str, tool: types.Tool,
                           args: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded deny of a call of a tool that does not match its pin, or None."""
        plan_id = await self.ensure_plan()
        try:
            return await self.pins.refusal(server, tool, plan_id=plan_id, args=args)
        except PinsUnavailable as exc:
            raise NoDecision(str(exc)) from exc

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The listed input schema of SERVER.TOOL (None: unknown, nothing to check)."""
        split = mapping.split_name(name)
        upstream = self.upstreams.get(split[0]) if split is not None else None
        tool = upstream.tools.get(split[1]) if upstream is not None and split else None
        return tool.input_schema if tool is not None and upstream.up else None

    # -- tools/call ------------------------------------------------------------------------

    async def _decide(self, body: dict[str, Any]) -> dict[str, Any]:
        # One total deadline over the whole decision, retries included (SPEC §19): the
        # client's timeout bounds each attempt, and a client of the gateway waits for one.
        limit = self.config.toolgate.timeout_seconds
        try:
            with anyio.fail_after(limit):
                decision = await self.toolgate.authorize_tool(**_client_args(body))
        except ToolgateError as exc:
            raise NoDecision(str(exc)) from exc
        except TimeoutError as exc:
            raise NoDecision(f"no decision from toolgate within {limit} s") from exc
        except Exception as exc:  # anything else: still no decision
            raise NoDecision(f"{type(exc).__name__}: {exc}") from exc
        # The client parses strictly (no duplicate key, `allowed` a JSON boolean); held here
        # again because forwarding depends on it.
        raw = decision.raw if isinstance(getattr(decision, "raw", None), dict) else None
        if raw is None or not isinstance(decision.decision_id, str) or not decision.decision_id:
            raise NoDecision("toolgate's answer has no decision id")
        if raw.get("allowed") is not decision.allowed or not isinstance(decision.allowed, bool):
            raise NoDecision("toolgate's answer has no boolean `allowed`")
        if decision.allowed is not True and not isinstance(raw.get("deny"), dict):
            raise NoDecision("toolgate's deny has no reason")
        return raw

    async def authorize(self, name: str, server: str, tool: str, args: dict[str, Any], *,
                        confirmed: bool = False,
                        metadata: dict[str, Any] | None = None,
                        claim: mapping.Claim | None = None,
                        path_args: list[str] | None = None,
                        link: ClientLink | None = None) -> dict[str, Any]:
        upstream = self.upstreams[server]
        plan_id = await self.ensure_plan()
        await self._refresh_registry()
        if claim is None:
            claim = mapping.claim(upstream.config, tool,
                                  _annotations(self.tools_of(server, link).get(tool)))

        def body(registered: bool) -> dict[str, Any]:
            return mapping.authorize_body(plan_id=plan_id, name=name, server=upstream.config,
                                          tool=tool, args=args,
                                          claim_=None if registered else claim,
                                          confirmed=confirmed, metadata=metadata,
                                          path_args=path_args)

        registered = name in self._registered
        try:
            return await self._decide(body(registered))
        except NoDecision:
            if not registered:
                raise
        # It was registered when last read and may no longer be: read again, ask once more.
        await self._refresh_registry(force=True)
        return await self._decide(body(name in self._registered))

    async def call(self, name: str, arguments: dict[str, Any] | None,
                   confirm: Confirm | None,
                   confirmation_of: str | None = None,
                   via: Via | None = None) -> types.CallToolResult:
        """`confirm` asks the user inline (a handshake-era client); `confirmation_of` is
        the decision a confirmation already given answers (a 2026-07-28 client's retry)."""
        split = mapping.split_name(name)
        if split is None or split[0] not in self.upstreams:
            return error_result(f"unknown tool {name!r}: tools are named SERVER.TOOL")
        server, tool = split
        upstream = self.upstreams[server]
        link = via.link if via is not None else None
        if link is not None and tool not in self.tools_of(server, link) and upstream.up:
            await link.list_tools()  # called before this client listed: list now
        if tool not in self.tools_of(server, link):
            return error_result(f"unknown tool {name!r}: server {server!r} has not listed it"
                                + ("" if upstream.up else f" (it is down: {upstream.reason})"))
        # One copy, authorized and forwarded: nothing the client holds can change it between.
        args = copy.deepcopy(dict(arguments or {}))
        try:
            refusal = await self._pin_refusal(server, self.tools_of(server, link)[tool], args)
            if refusal is not None:
                return self.deny_result(refusal)
            if confirmation_of is not None:
                decision = await self.authorize(
                    name, server, tool, args, confirmed=True, link=link,
                    metadata={"server": server, "tool": tool, "confirmed_by": "elicitation",
                              "confirmation_of": confirmation_of})
            else:
                decision = await self.authorize(name, server, tool, args, link=link,
                                                metadata={"server": server, "tool": tool})
            decision = await self._confirm_or_wait(decision, name, server, tool, args, confirm,
                                                   link)
        except NoDecision as exc:
            log.warning("gateway: %s denied, no decision: %s", name, exc)
            return error_result(f"{UNAVAILABLE}: no decision could be obtained from toolgate, "
                                f"so the call was not made: {exc}",
                                {"decision_id": None, "allowed": False,
                                 "deny": {"error": UNAVAILABLE, "message": str(exc)}})
        if decision.get("allowed") is not True:
            return self.deny_result(decision)
        return await self.forward(decision, upstream, tool, args, via or Via())

    def deny_result(self, decision: dict[str, Any]) -> types.CallToolResult:
        deny = decision["deny"]
        text = mapping.deny_text(deny, decision["decision_id"])
        meta: dict[str, Any] = {"decision_id": decision["decision_id"], "allowed": False,
                                "deny": deny}
        approval = mapping.pending_approval(deny)
        if approval is not None:
            page = self.toolgate.base_url + mapping.UI_APPROVAL.format(approval["approval_id"])
            text += (f" Approval {approval['approval_id']} is {approval.get('state')}: "
                     f"decide it at {page}")
            meta["approval"] = {"approval_id": approval["approval_id"],
                                "state": approval.get("state"), "url": page}
        return error_result(text, meta)

    async def _confirm_or_wait(self, decision: dict[str, Any], name: str, server: str,
                               tool: str, args: dict[str, Any],
                               confirm: Confirm | None,
                               link: ClientLink | None = None) -> dict[str, Any]:
        deny = decision.get("deny") or {}
        if decision.get("allowed") is True:
            return decision
        if deny.get("code") == "confirmation_required" and confirm is not None:
            if not await confirm(name, args):
                return decision
            return await self.authorize(
                name, server, tool, args, confirmed=True, link=link,
                metadata={"server": server, "tool": tool, "confirmed_by": "elicitation",
                          "confirmation_of": decision["decision_id"]})
        if deny.get("code") == "human_approval_required" and self.config.approvals.wait_seconds:
            approval = mapping.pending_approval(deny)
            if approval is not None and approval.get("state") == "pending":
                await self._wait_decided(approval["approval_id"])
                # Asked again whatever came of it: a grant is used by this decision, and
                # otherwise the deny shows the approval as it is now (rejected, expired).
                return await self.authorize(name, server, tool, args, link=link,
                                            metadata={"server": server, "tool": tool,
                                                      "approval": approval["approval_id"]})
        return decision

    async def _wait_decided(self, approval_id: str) -> bool:
        deadline = time.monotonic() + self.config.approvals.wait_seconds
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                approval = await self.toolgate.get_approval(
                    approval_id, wait=max(1, min(60, int(remaining))))
            except ToolgateError as exc:
                raise NoDecision(f"waiting on approval {approval_id}: {exc}") from exc
            state = approval.get("state")
            if state != "pending":
                return state == "granted"
        return False

    async def forward(self, decision: dict[str, Any], upstream: Upstream, tool: str,
                      args: dict[str, Any], via: Via) -> types.CallToolResult:
        decision_id = decision["decision_id"]
        meta = {"decision_id": decision_id, "allowed": True}
        error: str | None = None
        try:
            result = await on_session(
                upstream, via, lambda client: upstream.call(tool, args, via=client,
                                                            progress=via.progress))
        except UpstreamUnavailable as exc:
            error = str(exc)
            result = error_result(f"ToolExecutionError (execution_failed): {error} "
                                  f"[decision {decision_id}]", meta)
        except BaseException:
            # Cancelled by the client (notifications/cancelled) or the client went away
            # (SPEC §19): the allow still gets its outcome.
            log.info("gateway: call of decision %s cancelled", decision_id)
            self.book(decision_id, upstream, tool, args, "cancelled")
            raise
        else:
            if result.is_error:
                error = _result_text(result) or "the tool answered isError"
            # The upstream's own protocol stamps (its serverInfo) are not the gateway's.
            kept = {k: v for k, v in (result.meta or {}).items()
                    if not k.startswith("io.modelcontextprotocol/")}
            result = result.model_copy(update={"meta": {**kept, META: meta}})
        # Reported after the answer is on its way: the client never waits for it, and the
        # gateway drains what is left when it stops (drain_reports).
        self.book(decision_id, upstream, tool, args, error)
        return result

    def book(self, decision_id: str, upstream: Upstream, tool: str, args: dict[str, Any],
             error: str | None) -> None:
        """Report the outcome in the background (drained when the gateway stops). Reports
        are queued and sent by one task, `POST /v1/outcomes` (SPEC §11), up to
        REPORT_BATCH a request: what was booked while a request was in flight goes in the
        next one, so calls one at a time still send one report each, with no wait, and
        concurrent calls share requests (each request costs the gateway about as much CPU
        as the rest of the call)."""
        entry = upstream.config.tools.get(tool)
        item = {"decision_id": decision_id,
                **outcome_body("execution_failed" if error is not None else "succeeded",
                               cost=entry.cost if entry is not None else None,
                               error=error[:2000] if error is not None else None,
                               args_sha256=args_sha256(args))}
        self._queue.append(item)
        if self._sender is None or self._sender.done():
            task = asyncio.get_running_loop().create_task(self._send_reports())
            self._sender = task
            self._reports.add(task)
            task.add_done_callback(self._reports.discard)

    async def drain_reports(self, timeout: float = 10.0) -> None:
        if self._reports:
            await asyncio.wait(set(self._reports), timeout=timeout)

    async def _send_reports(self) -> None:
        while self._queue:
            batch = self._queue[:REPORT_BATCH]
            del self._queue[:REPORT_BATCH]
            try:
                answer = await self.toolgate.request("POST", "/v1/outcomes",
                                                     {"outcomes": batch})
            except ToolgateError as exc:
                if exc.status in (404, 405, 413, 422):
                    # The batch refused as a whole (over toolgate's body limit, a toolgate
                    # without the route): each report on its own route, as a single one.
                    for item in batch:
                        await self._report_one(item)
                    continue
                for item in batch:
                    log.warning("gateway: outcome of decision %s not reported: %s",
                                item["decision_id"], exc)
                continue
            except Exception as exc:  # the calls have run: the records stay without outcomes
                for item in batch:
                    log.warning("gateway: outcome of decision %s not reported: %s",
                                item["decision_id"], exc)
                continue
            items = answer.get("items") if isinstance(answer, dict) else None
            if not isinstance(items, list) or len(items) != len(batch):
                for item in batch:
                    log.warning("gateway: outcome of decision %s not reported: toolgate's "
                                "answer has no item for it", item["decision_id"])
                continue
            for item, got in zip(batch, items, strict=True):
                code = got.get("status_code") if isinstance(got, dict) else None
                if code not in (200, 201):
                    refused = (got.get("error") if isinstance(got, dict) else None) or {}
                    log.warning("gateway: outcome of decision %s not reported: %s (%s): %s",
                                item["decision_id"], code,
                                refused.get("code") if isinstance(refused, dict) else None,
                                refused.get("message") if isinstance(refused, dict)
                                else refused)

    async def _report_one(self, item: dict[str, Any]) -> None:
        fields = {k: v for k, v in item.items() if k != "decision_id"}
        try:
            await self.toolgate.report_outcome(item["decision_id"], **fields)
        except Exception as exc:  # the call has run: the record stays without an outcome
            log.warning("gateway: outcome of decision %s not reported: %s",
                        item["decision_id"], exc)


def _client_args(body: dict[str, Any]) -> dict[str, Any]:
    return {"plan_id": body["plan_id"], "tool": body["tool"], "context": body["context"]}


def _annotations(tool: types.Tool | None) -> dict[str, Any] | None:
    if tool is None or tool.annotations is None:
        return None
    return tool.annotations.model_dump(by_alias=True, exclude_none=True)


def _result_text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))[:2000]
