"""The MCP side the client talks to: the SDK's low-level `Server` with `on_list_tools` and
`on_call_tool`, over stdio or Streamable HTTP (SPEC §14).

Confirmation (check 9) goes to the client's user by form elicitation: inline
(`elicitation/create`) on a handshake-era session (2025-11-25), or as an
`InputRequiredResult` on 2026-07-28, whose retry carries the answer and a request state
the gateway signed over the call's name and arguments (a retry for other arguments, or
with a state it did not issue, is asked again).

The tool list changes (an upstream goes down or comes back, or lists other tools): every
client is told, `notifications/tools/list_changed` on each handshake-era connection's
own channel, and the same event on the `subscriptions/listen` streams of 2026-07-28
clients; both eras see `tools.listChanged: true` in the capabilities."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.connection import Connection
from mcp.server.lowlevel import NotificationOptions
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from app import __version__
from app.gateway import oauth
from app.gateway.calls import META, Gate, args_sha256
from app.gateway.relay import RELAYED, Relay, connection_of

CONFIRM_KEY = "toolgate_confirm"
SCHEMA = {"type": "object",
          "properties": {"confirm": {"type": "boolean", "title": "Confirm",
                                     "description": "Run this call?"}},
          "required": ["confirm"]}
ELICITATION = types.ClientCapabilities(elicitation=types.ElicitationCapability())
NOTIFY_SECONDS = 5.0  # one client's channel that does not take a notification is skipped
FIRST_CONNECT_SECONDS = 30.0  # how long a first tools/list waits for the upstreams' first try
STATE_SECONDS = 600  # a 2026-07-28 confirmation's request state is good this long, once

log = logging.getLogger("toolgate.gateway")


def _message(name: str, args: dict[str, Any]) -> str:
    shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
    if len(shown) > 2000:
        shown = shown[:2000] + "..."
    return (f"toolgate: the tool {name} needs your confirmation (it is destructive).\n"
            f"Arguments: {shown}\nConfirm?")


def _accepted(answer: Any) -> bool:
    return (isinstance(answer, types.ElicitResult) and answer.action == "accept"
            and isinstance(answer.content, dict) and answer.content.get("confirm") is True)


class _States:
    """Request states of the 2026-07-28 confirmation round trip (SPEC §19): signed by this
    process over the call (tool name and arguments' digest), the decision it answers and
    when it was issued; single-use (the first retry that presents it spends it, before
    anything is awaited, so concurrent replays lose) and expiring after STATE_SECONDS."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)
        self._spent: dict[str, float] = {}  # state -> when it expires (kept until then)

    def _mac(self, name: str, args: dict[str, Any], decision_id: str, issued: int) -> str:
        message = json.dumps([name, args_sha256(args), decision_id, issued]).encode()
        return hmac.new(self._key, message, hashlib.sha256).hexdigest()

    def issue(self, name: str, args: dict[str, Any], decision_id: str) -> str:
        issued = int(time.time())
        return f"{decision_id}.{issued}.{self._mac(name, args, decision_id, issued)}"

    def spend(self, state: str | None, name: str, args: dict[str, Any]) -> str | None:
        """The decision id the state was issued for, when it is ours, for this call,
        not expired and not spent before; it is spent now."""
        if not state or state.count(".") < 2 or args_sha256(args) is None:
            return None
        rest, _, mac = state.rpartition(".")
        decision_id, _, issued_text = rest.rpartition(".")
        if not issued_text.isdigit():
            return None
        issued = int(issued_text)
        now = time.time()
        if not issued <= now + 5 or now - issued > STATE_SECONDS:
            return None
        if not hmac.compare_digest(mac, self._mac(name, args, decision_id, issued)):
            return None
        for old in [k for k, until in self._spent.items() if until < now]:
            del self._spent[old]
        if state in self._spent:
            log.warning("gateway: a confirmation of decision %s was presented again and "
                        "refused (single-use)", decision_id)
            return None
        self._spent[state] = issued + STATE_SECONDS + 5
        return decision_id


class ToolsChanged:
    """Tells every connected client that the tool list changed. `changed()` is called by
    the upstreams (synchronously); `run()` sends, coalescing what came in meanwhile, so a
    client that lists again on the notification sees the list as it is now."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()  # 2026-07-28: subscriptions/listen streams
        self._connections: set[Connection] = set()  # 2025-11-25: initialized connections
        self._pending: anyio.Event | None = None
        self._early = False  # changed before run() started

    def changed(self) -> None:
        if self._pending is None:
            self._early = True
        else:
            self._pending.set()

    def track(self, connection: Connection) -> None:
        """A handshake-era connection, until it closes."""
        self._connections.add(connection)
        connection.exit_stack.callback(self._connections.discard, connection)

    async def run(self) -> None:
        self._pending = anyio.Event()
        if self._early:
            self._pending.set()
        while True:
            await self._pending.wait()
            self._pending = anyio.Event()
            await self.bus.publish(ToolsListChanged())
            for connection in list(self._connections):
                with anyio.move_on_after(NOTIFY_SECONDS):
                    await connection.send_tool_list_changed()  # never raises


class _GatewayServer(Server[Any]):
    """The SDK's low-level server declaring `tools.listChanged` to handshake-era clients
    (on 2026-07-28 the SDK derives it from the listen handler), on every listener: the
    HTTP session manager asks for the options without arguments. Of what the gateway
    relays (prompts, resources, logging, completions) it declares what its upstreams
    declared (SPEC §19), read at each client's initialize."""

    relay: Relay

    def create_initialization_options(
            self, notification_options: NotificationOptions | None = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None) -> InitializationOptions:
        return super().create_initialization_options(
            notification_options or NotificationOptions(
                tools_changed=True, prompts_changed=True, resources_changed=True),
            experimental_capabilities, extensions)

    def get_capabilities(self, notification_options: NotificationOptions | None = None,
                         experimental_capabilities: dict[str, dict[str, Any]] | None = None,
                         extensions: dict[str, dict[str, Any]] | None = None, *,
                         protocol_version: str | None = None) -> types.ServerCapabilities:
        caps = super().get_capabilities(notification_options, experimental_capabilities,
                                        extensions, protocol_version=protocol_version)
        return caps.model_copy(update={name: None for name in RELAYED
                                       if not self.relay.declares(name)})


def build_server(gate: Gate, tools_changed: ToolsChanged | None = None) -> Server[Any]:
    states = _States()
    tools_changed = tools_changed or ToolsChanged()
    relay = Relay(gate)

    async def on_list_tools(ctx: ServerRequestContext[Any],
                            params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        await gate.first_attempts(FIRST_CONNECT_SECONDS)
        link = relay.via(ctx).link
        if link is not None:
            await link.list_tools()
        await gate.check_pins(link)
        return types.ListToolsResult(tools=gate.list_tools(link))

    async def on_call_tool(ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
                           ) -> types.CallToolResult | types.InputRequiredResult:
        oauth.enter(ctx.request)  # the OAuth token's caller, for the decision (oauth.py)
        await gate.first_attempts(FIRST_CONNECT_SECONDS)
        args = dict(params.arguments or {})
        can_elicit = ctx.session.check_client_capability(ELICITATION)
        modern = ctx.protocol_version in MODERN_PROTOCOL_VERSIONS
        # The upstream's progress rides this call back to the client (a no-op when the
        # client sent no progress token).
        via = relay.via(ctx, progress=lambda value, total, message:
                        _quietly(ctx.session.report_progress(value, total, message)))
        if modern:
            confirmed_of = None
            answer = (params.input_responses or {}).get(CONFIRM_KEY)
            if answer is not None and _accepted(answer):
                confirmed_of = states.spend(params.request_state, params.name, args)
            result = await gate.call(params.name, args, None, confirmation_of=confirmed_of,
                                     via=via)
            deny = ((result.meta or {}).get(META) or {}).get("deny") or {}
            if (can_elicit and confirmed_of is None and answer is None
                    and deny.get("code") == "confirmation_required"):
                decision_id = result.meta[META]["decision_id"]
                return types.InputRequiredResult(
                    input_requests={CONFIRM_KEY: types.ElicitRequest(
                        params=types.ElicitRequestFormParams(
                            message=_message(params.name, args), requested_schema=SCHEMA))},
                    request_state=states.issue(params.name, args, decision_id))
            return result

        async def confirm(name: str, call_args: dict[str, Any]) -> bool:
            answer = await ctx.session.elicit_form(_message(name, call_args), SCHEMA,
                                                   related_request_id=ctx.request_id)
            return _accepted(answer)

        return await gate.call(params.name, args, confirm if can_elicit else None, via=via)

    async def on_initialized(ctx: ServerRequestContext[Any],
                             params: types.NotificationParams) -> None:
        connection = connection_of(ctx)
        if connection is not None and ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            tools_changed.track(connection)
            relay.via(ctx)  # this client's own upstream sessions, opened now
        elif connection is None:
            log.warning("gateway: this client will not be told when the tool list changes")

    server = _GatewayServer(
        "toolgate-gateway", version=__version__,
        instructions="Tools of the servers behind this gateway, named SERVER.TOOL; "
                     "every call is decided by toolgate first.",
        on_list_tools=on_list_tools, on_call_tool=on_call_tool,
        on_list_resources=relay.list_resources,
        on_list_resource_templates=relay.list_templates,
        on_read_resource=relay.read_resource,
        on_subscribe_resource=relay.subscribe, on_unsubscribe_resource=relay.unsubscribe,
        on_list_prompts=relay.list_prompts, on_get_prompt=relay.get_prompt,
        on_completion=relay.complete,
        on_subscriptions_listen=ListenHandler(tools_changed.bus),
        # The Mcp-Param header check of a 2026-07-28 HTTP call reads the tool's schema
        # here instead of running the whole tools/list handler for every call.
        get_tool_input_schema=gate.input_schema)
    server.relay = relay
    # Deprecated at 2026-07-28 (the SDK warns when they are passed to the constructor),
    # relayed for the handshake-era clients and servers that still use them.
    server.add_request_handler("logging/setLevel", types.SetLevelRequestParams,
                               relay.set_level)
    server.add_notification_handler("notifications/roots/list_changed",
                                    types.NotificationParams, relay.roots_changed)
    server.add_notification_handler("notifications/initialized", types.NotificationParams,
                                    on_initialized)
    return server


async def _quietly(send: Any) -> None:
    try:
        await send
    except Exception as exc:  # noqa: BLE001 - a notification is best-effort
        log.debug("gateway: progress not relayed: %s", exc)
