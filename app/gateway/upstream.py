"""One upstream MCP server, kept connected by a supervisor task (SPEC §14): over stdio (a
command the gateway starts) or Streamable HTTP (a URL), through the SDK's `Client`.

While it is up its tools are listed; when it cannot be reached, crashes, or misses a
call's deadline it is marked down (one log line), its tools leave the list, and the
supervisor reconnects with exponential backoff. The last tools seen are kept so that a
call to a known tool of a down server is still decided and then reported as
`execution_failed`, never forwarded anywhere.

Every change of what it lists (up, down, a different listing, read again when the server
says `notifications/tools/list_changed` or, on 2026-07-28, on its `subscriptions/listen`
stream) calls `on_change`: the gateway tells its own clients (server.py)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from app.gateway.config import ServerConfig

log = logging.getLogger("toolgate.gateway")

BACKOFF_FIRST = 0.25
BACKOFF_MAX = 30.0
HEALTH_SECONDS = 5.0  # a listing this often notices a server that died while idle
CONNECT_SECONDS = 30.0

T = TypeVar("T")


class UpstreamUnavailable(Exception):
    """The call could not be forwarded, or its answer did not come back. `broken`: the
    session itself failed (not an error answer of a live server)."""

    def __init__(self, message: str, *, broken: bool = True) -> None:
        super().__init__(message)
        self.broken = broken


class Upstream:
    def __init__(self, name: str, config: ServerConfig, deadline: float,
                 on_change: Callable[[], None] = lambda: None) -> None:
        self.name = name
        self.config = config
        self.deadline = deadline
        self.on_change = on_change  # what it lists changed (synchronous, must not raise)
        self.tools: dict[str, types.Tool] = {}  # the last listing seen (kept while down)
        # What it declared at its last handshake (kept while down): the gateway declares
        # the union of its upstreams' capabilities to its clients (SPEC §19).
        self.capabilities: types.ServerCapabilities | None = None
        self.up = False
        self.reason = "not connected yet"
        self._client: Client | None = None
        self._broken = False
        self._wake = anyio.Event()  # marked broken, or the server said its list changed
        self._ready = anyio.Event()  # set after the first attempt, whatever its result

    def target(self) -> Any:
        if self.config.url is not None:
            return self.config.url
        command, *args = self.config.command or [""]
        return StdioServerParameters(command=command, args=args, env=self.config.env,
                                     cwd=self.config.cwd)

    async def wait_first_attempt(self, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            await self._ready.wait()

    async def supervise(self) -> None:
        """Forever: connect, list, watch; on any failure mark down and retry with backoff."""
        delay = BACKOFF_FIRST
        while True:
            try:
                await self._session()
                delay = BACKOFF_FIRST  # it was up: start the backoff again
            except anyio.get_cancelled_exc_class():
                raise
            except BaseException as exc:  # noqa: BLE001 - any failure marks it down
                self._down(_text(exc))  # one line per outage (or a new reason)
            self._ready.set()
            await anyio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _session(self) -> None:
        self._broken = False
        self._wake = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._handshake_watchdog)
            async with Client(self.target(), cache=None, mode="auto",
                              message_handler=self._on_message) as client:
                try:
                    listing = await _list_all(client)
                    self.tools = {tool.name: tool for tool in listing}
                    self.capabilities = client.server_capabilities
                    self._client = client
                    self.up = True
                    self.reason = ""
                    log.info("gateway: upstream %s up, %d tools", self.name, len(self.tools))
                    self.on_change()
                    self._ready.set()
                    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                        tasks.start_soon(self._listen, client)
                    await self._watch(client)
                finally:
                    self._client = None
                    if self.up:
                        self.up = False
                        self.on_change()

    async def _handshake_watchdog(self) -> None:
        await anyio.sleep(CONNECT_SECONDS)
        if self._client is None:
            raise UpstreamUnavailable(f"no handshake within {CONNECT_SECONDS:g} s")

    async def _watch(self, client: Client) -> None:
        """Until marked broken, or a listing goes unanswered (`ping` is gone from
        2026-07-28; listing the tools also notices a changed list): listed again every
        HEALTH_SECONDS, and at once when the server says its list changed."""
        while True:
            with anyio.move_on_after(HEALTH_SECONDS):
                await self._wake.wait()
            self._wake = anyio.Event()
            if self._broken:
                raise UpstreamUnavailable(self.reason or "marked down")
            with anyio.fail_after(min(self.deadline, 10.0)):
                listing = await _list_all(client)
            tools = {tool.name: tool for tool in listing}
            if list(tools.values()) != list(self.tools.values()):
                self.tools = tools
                log.info("gateway: upstream %s lists %d tools now", self.name, len(tools))
                self.on_change()

    async def _on_message(self, message: Any) -> None:
        """The session's notifications (2025-11-25): a changed list is read again."""
        if isinstance(message, types.ToolListChangedNotification):
            self._wake.set()

    async def _listen(self, client: Client) -> None:
        """2026-07-28: change notifications come on a `subscriptions/listen` stream.
        A server without one is still listed every HEALTH_SECONDS."""
        try:
            async with client.listen(tools_list_changed=True) as events:
                async for _ in events:
                    self._wake.set()
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # noqa: BLE001 - the health listing still notices changes
            log.debug("gateway: upstream %s: no listen stream: %s", self.name, _text(exc))

    def _down(self, reason: str) -> None:
        was_up = self.up
        if self.up or self.reason != reason:
            log.warning("gateway: upstream %s down (its tools leave the list): %s",
                        self.name, reason)
        self.up = False
        self.reason = reason
        if was_up:
            self.on_change()

    def relist(self) -> None:
        """List again now (a client's own session heard that the list changed)."""
        self._wake.set()

    def mark_broken(self, reason: str) -> None:
        """Out of the list at once; the supervisor reconnects."""
        self._down(reason)
        self._broken = True
        self._wake.set()

    async def call(self, tool: str, arguments: dict[str, Any], *, via: Client | None = None,
                   progress: Any = None) -> types.CallToolResult:
        """Forward one call within the deadline, on `via` (a client's own session with
        this server) or the gateway's shared session; UpstreamUnavailable when it cannot
        be sent or answered. `progress` receives the server's progress notifications."""
        return await self.request(
            lambda client: client.call_tool(tool, arguments, progress_callback=progress), via)

    async def request(self, op: Callable[[Client], Awaitable[T]],
                      via: Client | None = None, *, errors_as_is: bool = False) -> T:
        """One request within the deadline. On the shared session a failure marks the
        server down (the supervisor reconnects); on a client's own session it is that
        session's failure alone (sessions.py drops it). `errors_as_is`: an error answer
        of the live server is raised as it came (MCPError), for the client to see."""
        client = via if via is not None else self._client
        if client is None or (via is None and not self.up):
            raise UpstreamUnavailable(f"upstream {self.name} is down: {self.reason}")
        try:
            with anyio.fail_after(self.deadline):
                return await op(client)
        except TimeoutError:
            reason = f"no answer within the deadline ({self.deadline:g} s)"
            if via is None:
                self.mark_broken(reason)
            raise UpstreamUnavailable(f"upstream {self.name}: {reason}") from None
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            reason = _text(exc)
            if is_protocol_error(exc):
                if errors_as_is:
                    raise
                raise UpstreamUnavailable(f"upstream {self.name}: {reason}",
                                          broken=False) from exc
            if via is None:
                self.mark_broken(reason)
            raise UpstreamUnavailable(f"upstream {self.name}: {reason}") from exc


async def _list_all(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):  # a paginator that never ends cannot hang the gateway
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def is_protocol_error(exc: BaseException) -> bool:
    """An error answer from a live server (the session still works)."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


def text_of(exc: BaseException) -> str:
    return _text(exc)


def _text(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _text(exc.exceptions[0])
    if isinstance(exc, UpstreamUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:500]
