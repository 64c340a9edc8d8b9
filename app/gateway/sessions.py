"""A session per client (SPEC §19): each handshake-era client of the gateway (the stdio
client, each `Mcp-Session-Id` on the HTTP listener) gets upstream sessions of its own,
one per upstream, opened when the client says `notifications/initialized` and closed when
its session ends. What one client does to its upstream sessions (a log level, a
subscription, a server-side toggle) and what they send back reaches that client only.

Relayed from an upstream session to its client: log messages, `resources/updated`, the
resource and prompt list changes, and, when the client declared them, the upstream's
`sampling/createMessage`, `elicitation/create` and `roots/list` requests (answers back).
Sent while the client has a call in flight on that upstream they ride that call (on HTTP,
its response stream); otherwise the session's own channel.

2026-07-28 clients are stateless (no session): their requests use the gateway's shared
session with each upstream (upstream.py), and what rides a request (progress) is relayed
on that request alone."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp import Client, MCPError
from mcp.server.connection import Connection
from mcp.server.session import ServerSession
from mcp.shared.message import ServerMessageMetadata
from mcp_types import INTERNAL_ERROR

from app.gateway.upstream import CONNECT_SECONDS, Upstream, UpstreamUnavailable, text_of

log = logging.getLogger("toolgate.gateway")

CLOSE_SECONDS = 5.0  # closing one client's upstream sessions waits at most this long
LINK_KEY = "toolgate_link"  # in Connection.state


@dataclass
class Via:
    """Where a forwarded request goes: a handshake-era client's own upstream session
    (`link`, sessions.py) or, without one, the gateway's shared session; the client's
    request (`session`, `request_id`) that what the upstream says meanwhile rides, and
    where the upstream's progress notifications go."""

    link: ClientLink | None = None
    session: Any = None
    request_id: Any = None
    progress: Any = None


async def on_session(upstream: Upstream, via: Via,
                     op: Callable[[Client | None], Awaitable[Any]]) -> Any:
    """`op(client)` on the client's own session with `upstream` (None: the gateway's
    shared one), with the request marked in flight; a failed own session is dropped."""
    link = via.link
    if link is None:
        return await op(None)
    client = await link.client(upstream.name)
    if via.session is not None:
        link.begin(upstream.name, via.session, via.request_id)
    try:
        return await op(client)
    except UpstreamUnavailable as exc:
        if exc.broken:
            link.drop(upstream.name, client)
        raise
    finally:
        if via.session is not None:
            link.end(upstream.name, via.session, via.request_id)


class _Own:
    """One client's own session with one upstream: a task that holds the SDK's Client
    open until the client's session ends (or this session fails)."""

    def __init__(self, link: ClientLink, upstream: Upstream) -> None:
        self.link = link
        self.upstream = upstream
        self.client: Client | None = None
        self.error: str | None = None
        self.ready = anyio.Event()  # connected, or failed
        self.done = anyio.Event()
        self.scope = anyio.CancelScope()

    async def run(self) -> None:
        name = self.upstream.name
        try:
            with self.scope:
                async with Client(self.upstream.target(), cache=None, mode="legacy",
                                  **self.link.callbacks(name)) as client:
                    self.client = client
                    self.ready.set()
                    await anyio.sleep_forever()
        except Exception as exc:  # noqa: BLE001 - this client's session with it failed
            self.error = text_of(exc)
            if not self.link.closed:
                log.warning("gateway: upstream %s down for one client's session: %s",
                            name, self.error)
        finally:
            self.client = None
            self.ready.set()
            self.done.set()


class ClientLink:
    """One handshake-era client's upstream sessions, and the relay back to it."""

    def __init__(self, upstreams: dict[str, Upstream], connection: Connection,
                 tasks: TaskGroup) -> None:
        self.upstreams = upstreams
        self.connection = connection
        self.tasks = tasks
        self.closed = False
        self._own: dict[str, _Own] = {}
        # What each upstream lists on this client's own session: a server can offer a
        # client tools by what it declared (server-everything's sampling and elicitation
        # tools appear only to a client that can answer them).
        self.tools: dict[str, dict[str, types.Tool]] = {}
        # Per upstream, the client's requests in flight on it (their request contexts):
        # what the upstream asks or says meanwhile goes back on the newest one.
        self._in_flight: dict[str, list[tuple[ServerSession, Any]]] = {}

    def start(self) -> None:
        """Open a session with every upstream that is up (in the background); one that
        is down is tried on this client's first request for it."""
        for name, upstream in self.upstreams.items():
            if upstream.up:
                self._session(name)

    def _session(self, name: str) -> _Own:
        own = self._own.get(name)
        if own is None or own.done.is_set():
            own = self._own[name] = _Own(self, self.upstreams[name])
            if not self.closed:
                self.tasks.start_soon(own.run)
            else:
                own.ready.set()
                own.done.set()
        return own

    async def client(self, name: str) -> Client:
        """This client's own session with `name`, opened again if it failed;
        UpstreamUnavailable when it cannot be had within the connect bound."""
        own = self._session(name)
        with anyio.move_on_after(CONNECT_SECONDS):
            await own.ready.wait()
        if own.client is None:
            if not own.ready.is_set():
                own.scope.cancel()
            raise UpstreamUnavailable(f"upstream {name}: no session for this client"
                                      + (f": {own.error}" if own.error else ""))
        return own.client

    async def list_tools(self) -> None:
        """List every upstream that is up on this client's own sessions (one that fails
        keeps the gateway's shared listing)."""
        for name, upstream in self.upstreams.items():
            if not upstream.up:
                continue
            try:
                client = await self.client(name)
                listing = await upstream.request(_list_tools, client)
            except UpstreamUnavailable as exc:
                log.debug("gateway: %s not listed on a client's session: %s", name, exc)
                continue
            self.tools[name] = {tool.name: tool for tool in listing}

    def drop(self, name: str, client: Client) -> None:
        """The session failed under a request (the process died, a deadline passed):
        closed, and opened again on the next use."""
        own = self._own.get(name)
        if own is not None and own.client is client:
            own.scope.cancel()

    async def aclose(self) -> None:
        self.closed = True
        for own in self._own.values():
            own.scope.cancel()
        with anyio.move_on_after(CLOSE_SECONDS), anyio.CancelScope(shield=True):
            for own in self._own.values():
                await own.done.wait()

    # -- calls in flight -------------------------------------------------------------------

    def begin(self, name: str, session: ServerSession, request_id: Any) -> None:
        self._in_flight.setdefault(name, []).append((session, request_id))

    def end(self, name: str, session: ServerSession, request_id: Any) -> None:
        stack = self._in_flight.get(name) or []
        if (session, request_id) in stack:
            stack.remove((session, request_id))

    def _riding(self, name: str) -> tuple[ServerSession, Any] | None:
        stack = self._in_flight.get(name)
        return stack[-1] if stack else None

    # -- from the upstream to the client ---------------------------------------------------

    def callbacks(self, name: str) -> dict[str, Any]:
        """The SDK Client's callbacks for this client's session with `name`: the client's
        own capabilities are declared upstream, no more."""
        caps = self.connection.client_capabilities or types.ClientCapabilities()
        options: dict[str, Any] = {
            "logging_callback": lambda params: self._log(name, params),
            "message_handler": lambda message: self._message(name, message),
        }
        if caps.sampling is not None:
            options["sampling_callback"] = lambda ctx, params: self._ask(
                name, types.CreateMessageRequest(params=params), types.CreateMessageResult)
            options["sampling_capabilities"] = caps.sampling
        if caps.elicitation is not None:
            options["elicitation_callback"] = lambda ctx, params: self._ask(
                name, types.ElicitRequest(params=params), types.ElicitResult)
        if caps.roots is not None:
            options["list_roots_callback"] = lambda ctx: self._ask(
                name, types.ListRootsRequest(), types.ListRootsResult)
        return options

    async def _log(self, name: str, params: types.LoggingMessageNotificationParams) -> None:
        notification = types.LoggingMessageNotification(params=params)
        riding = self._riding(name)
        if riding is not None:
            session, request_id = riding
            await _quietly(session.send_notification(notification, related_request_id=request_id))
        else:
            await self._standalone(notification)

    async def _message(self, name: str, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools.pop(name, None)  # listed again on this client's next tools/list
            self.upstreams[name].relist()  # and the gateway's shared listing
            await self._standalone(message)
        elif isinstance(message, (types.ResourceUpdatedNotification,
                                  types.ResourceListChangedNotification,
                                  types.PromptListChangedNotification)):
            await self._standalone(message)

    async def _standalone(self, notification: Any) -> None:
        data = notification.model_dump(by_alias=True, mode="json", exclude_none=True)
        await self.connection.notify(data["method"], data.get("params"))  # never raises

    async def _ask(self, name: str, request: Any, result_type: type[Any]) -> Any:
        """The upstream's request to this client; its answer (or error) goes back."""
        riding = self._riding(name)
        try:
            if riding is not None:
                session, request_id = riding
                return await session.send_request(
                    request, result_type,
                    metadata=ServerMessageMetadata(related_request_id=request_id))
            return await self.connection.send_request(request, result_type=result_type)
        except MCPError as exc:
            return exc.error
        except Exception as exc:  # noqa: BLE001 - the upstream gets an error answer
            return types.ErrorData(code=INTERNAL_ERROR,
                                   message=f"the gateway's client did not answer: "
                                           f"{text_of(exc)}")


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the gateway
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


async def _quietly(send: Any) -> None:
    try:
        await send
    except Exception as exc:  # noqa: BLE001 - a notification is best-effort
        log.debug("gateway: a notification to a client was dropped: %s", text_of(exc))


def link_of(connection: Connection | None) -> ClientLink | None:
    if connection is None:
        return None
    link = connection.state.get(LINK_KEY)
    return link if isinstance(link, ClientLink) else None


def open_link(upstreams: dict[str, Upstream], connection: Connection,
              tasks: TaskGroup) -> ClientLink:
    """The connection's link, made (and its sessions started) on first use; closed with
    the connection."""
    link = link_of(connection)
    if link is None:
        link = ClientLink(upstreams, connection, tasks)
        connection.state[LINK_KEY] = link
        connection.exit_stack.push_async_callback(link.aclose)
        link.start()
    return link
