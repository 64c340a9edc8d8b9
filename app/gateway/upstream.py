"""One upstream MCP server, kept connected by a supervisor task (SPEC §14): over stdio (a
command the gateway starts) or Streamable HTTP (a URL), through the SDK's `Client`.

While it is up its tools are listed; when it cannot be reached, crashes, or misses a
call's deadline it is marked down (one log line), its tools leave the list, and the
supervisor reconnects with exponential backoff. The last tools seen are kept so that a
call to a known tool of a down server is still decided and then reported as
`execution_failed`, never forwarded anywhere."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

from app.gateway.config import ServerConfig

log = logging.getLogger("toolgate.gateway")

BACKOFF_FIRST = 0.25
BACKOFF_MAX = 30.0
HEALTH_SECONDS = 5.0  # a listing this often notices a server that died while idle
CONNECT_SECONDS = 30.0


class UpstreamUnavailable(Exception):
    """The call could not be forwarded, or its answer did not come back."""


class Upstream:
    def __init__(self, name: str, config: ServerConfig, deadline: float) -> None:
        self.name = name
        self.config = config
        self.deadline = deadline
        self.tools: dict[str, types.Tool] = {}  # the last listing seen (kept while down)
        self.up = False
        self.reason = "not connected yet"
        self._client: Client | None = None
        self._broken = anyio.Event()
        self._ready = anyio.Event()  # set after the first attempt, whatever its result

    def _target(self) -> Any:
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
        self._broken = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._handshake_watchdog)
            async with Client(self._target(), cache=None, mode="auto") as client:
                try:
                    listing = await _list_all(client)
                    self.tools = {tool.name: tool for tool in listing}
                    self._client = client
                    self.up = True
                    self.reason = ""
                    log.info("gateway: upstream %s up, %d tools", self.name, len(self.tools))
                    self._ready.set()
                    await self._watch(client)
                finally:
                    self._client = None
                    self.up = False

    async def _handshake_watchdog(self) -> None:
        await anyio.sleep(CONNECT_SECONDS)
        if self._client is None:
            raise UpstreamUnavailable(f"no handshake within {CONNECT_SECONDS:g} s")

    async def _watch(self, client: Client) -> None:
        """Until marked broken, or a listing goes unanswered (`ping` is gone from
        2026-07-28; listing the tools also notices a changed list)."""
        while True:
            with anyio.move_on_after(HEALTH_SECONDS):
                await self._broken.wait()
            if self._broken.is_set():
                raise UpstreamUnavailable(self.reason or "marked down")
            with anyio.fail_after(min(self.deadline, 10.0)):
                listing = await _list_all(client)
            self.tools = {tool.name: tool for tool in listing}

    def _down(self, reason: str) -> None:
        if self.up or self.reason != reason:
            log.warning("gateway: upstream %s down (its tools leave the list): %s",
                        self.name, reason)
        self.up = False
        self.reason = reason

    def mark_broken(self, reason: str) -> None:
        """Out of the list at once; the supervisor reconnects."""
        self._down(reason)
        self._broken.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Forward one call within the deadline; UpstreamUnavailable when it cannot be
        sent or answered (the server is then marked down and reconnected)."""
        client = self._client
        if client is None or not self.up:
            raise UpstreamUnavailable(f"upstream {self.name} is down: {self.reason}")
        try:
            with anyio.fail_after(self.deadline):
                return await client.call_tool(tool, arguments)
        except TimeoutError:
            reason = f"no answer within the deadline ({self.deadline:g} s)"
            self.mark_broken(reason)
            raise UpstreamUnavailable(f"upstream {self.name}: {reason}") from None
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            reason = _text(exc)
            if not _is_protocol_error(exc):
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


def _is_protocol_error(exc: BaseException) -> bool:
    """An error answer from a live server (the session still works)."""
    from mcp import MCPError
    from mcp_types import CONNECTION_CLOSED

    return isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED


def _text(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _text(exc.exceptions[0])
    if isinstance(exc, UpstreamUnavailable):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"[:500]
