"""`notifications/tools/list_changed` (SPEC §14 "Names", issue 32): the gateway's list changes
when an upstream goes down (its tools leave), comes back, or says its own list changed, and
every connected client is told: on 2025-11-25 by the notification on the session's own
channel (the standalone GET stream over HTTP, the pipe over stdio), on 2026-07-28 on the
client's `subscriptions/listen` stream; and a new tools/list shows the change. The SDK's
client over Streamable HTTP and stdio, in both eras, against two recording upstreams: `rec`
over stdio (2026-07-28, its changes on a listen stream) and `old` over HTTP (2025-11-25
only, as the npm servers are, its changes as notifications). On SQLite: nothing here
touches the database beyond the calls' decisions, which test_faults.py covers on both."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from tests.gateway.clients import decision_meta, http_client, stdio_client, text
from tests.gateway.conftest import (
    RECORDER,
    HttpGateway,
    Toolgate,
    assert_all_forwarded_were_allowed,
    free_port,
    gateway_env,
    http_gateway,
    recorder_command,
    stop_gateway,
    wait_for,
    write_config,
)

pytestmark = pytest.mark.slow
WAIT = 120  # generous: only a failing test waits this long


@pytest.fixture(scope="module", params=["sqlite"])
def module_database(request, tmp_path_factory, sqlite_template) -> Iterator[str]:
    path = tmp_path_factory.mktemp("gwdb") / "toolgate.db"
    shutil.copyfile(sqlite_template, path)
    yield f"sqlite+aiosqlite:///{path}"


@dataclass
class Old:
    """The 2025-11-25-only recording upstream over HTTP, stopped and started by a test."""

    port: int
    record: Path
    log: Path
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(RECORDER), str(self.record), "--http", str(self.port),
                 "--legacy"], stdout=out, stderr=subprocess.STDOUT)

        def answers() -> bool:
            try:
                httpx.get(self.url, timeout=1)
                return True
            except httpx.HTTPError:
                return False

        wait_for(answers, WAIT, "the old recording server")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("listchanged")


@pytest.fixture(scope="module")
def old(folder: Path) -> Iterator[Old]:
    upstream = Old(free_port(), folder / "old.jsonl", folder / "old.log")
    upstream.start()
    yield upstream
    upstream.kill()


def servers(folder: Path, old: Old) -> dict:
    sandbox = {"id": "rec", "root": str(folder)}
    return {"rec": {"command": recorder_command(folder / "rec.jsonl"),
                    "trust_annotations": True, "sandbox": sandbox},
            "old": {"url": old.url, "trust_annotations": True, "sandbox": sandbox}}


@pytest.fixture(scope="module")
def gateway(toolgate: Toolgate, folder: Path, old: Old) -> Iterator[HttpGateway]:
    gw = http_gateway(toolgate, folder, servers(folder, old))
    yield gw
    stop_gateway(gw)


class Told:
    """A client's message handler counting `notifications/tools/list_changed`."""

    def __init__(self) -> None:
        self.count = 0
        self._event = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.count += 1
            self._event.set()

    async def next(self) -> None:
        with anyio.fail_after(WAIT):
            await self._event.wait()
        self._event = anyio.Event()


async def names(client: Any) -> list[str]:
    return [tool.name for tool in (await client.list_tools()).tools]


async def told_until(wait: Callable[[], Any], client: Any,
                     shows: Callable[[list[str]], bool]) -> list[str]:
    """Notifications until a tools/list after one shows the change (a notification that
    came for another change, an upstream's health listing say, is waited past)."""
    with anyio.fail_after(WAIT):
        while True:
            await wait()
            listed = await names(client)
            if shows(listed):
                return listed


def capability(client: Any) -> bool | None:
    tools = client.server_capabilities.tools
    return tools.list_changed if tools is not None else None


async def test_http_clients_of_both_eras_are_told_when_an_upstream_leaves_and_comes_back(
        gateway: HttpGateway, toolgate: Toolgate, old: Old, folder: Path) -> None:
    opened = anyio.Event()
    told = Told()
    async with http_client(gateway.url, gateway.token, mode="legacy", message_handler=told,
                           get_stream=opened) as legacy, \
            http_client(gateway.url, gateway.token) as modern:
        assert legacy.protocol_version not in MODERN_PROTOCOL_VERSIONS
        assert modern.protocol_version in MODERN_PROTOCOL_VERSIONS
        assert capability(legacy) is True and capability(modern) is True
        assert "old.read_note" in await names(legacy)
        with anyio.fail_after(WAIT):
            await opened.wait()  # the stream the legacy session's notifications come on
        async with modern.listen(tools_list_changed=True) as events:
            async def event() -> None:
                with anyio.fail_after(WAIT):
                    await events.__anext__()

            old.kill()
            gone = await legacy.call_tool("old.read_note", {"key": "after the kill"})
            assert gone.is_error and "execution_failed" in text(gone)

            def without(listed: list[str]) -> bool:
                return not any(n.startswith("old.") for n in listed) and "rec.read_note" in listed

            await told_until(told.next, legacy, without)
            await told_until(event, modern, without)

            old.start()

            def back(listed: list[str]) -> bool:
                return "old.read_note" in listed

            await told_until(told.next, legacy, back)
            await told_until(event, modern, back)
        again = await modern.call_tool("old.read_note", {"key": "back"})
    assert not again.is_error, text(again)
    assert_all_forwarded_were_allowed(toolgate, old.record, "old")


@pytest.mark.parametrize("server", ["rec", "old"])
async def test_an_upstreams_own_list_changed_reaches_the_clients(
        gateway: HttpGateway, toolgate: Toolgate, server: str, folder: Path) -> None:
    """`rec` says it on its listen stream (2026-07-28), `old` with the notification."""
    opened = anyio.Event()
    told = Told()
    async with http_client(gateway.url, gateway.token, mode="legacy", message_handler=told,
                           get_stream=opened) as client:
        with anyio.fail_after(WAIT):
            await opened.wait()
        before = await names(client)
        grown = await client.call_tool(f"{server}.grow", {})
        assert not grown.is_error and decision_meta(grown)["allowed"] is True, text(grown)
        name = f"{server}.{text(grown)}"
        assert name not in before
        await told_until(told.next, client, lambda listed: name in listed)
        # The new tool is served like the others: decided, then forwarded.
        called = await client.call_tool(name, {})
    assert not called.is_error, text(called)
    assert decision_meta(called)["allowed"] is True


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_client_over_stdio_is_told(toolgate: Toolgate, folder: Path, old: Old,
                                           mode: str) -> None:
    told = Told()
    config = write_config(folder, toolgate.url, servers(folder, old))
    async with stdio_client(config, gateway_env(toolgate), mode=mode,
                            message_handler=told) as client:
        assert capability(client) is True
        modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
        assert modern is (mode == "auto")
        with anyio.fail_after(WAIT):
            while "rec.grow" not in await names(client):  # its first connection may lag
                await anyio.sleep(0.2)
        if modern:
            async with client.listen(tools_list_changed=True) as events:
                async def event() -> None:
                    with anyio.fail_after(WAIT):
                        await events.__anext__()

                grown = await client.call_tool("rec.grow", {})
                await told_until(event, client, lambda listed: f"rec.{text(grown)}" in listed)
        else:
            grown = await client.call_tool("rec.grow", {})
            await told_until(told.next, client, lambda listed: f"rec.{text(grown)}" in listed)
    assert not grown.is_error, text(grown)


async def test_a_stdio_client_is_answered_before_a_slow_upstream_and_lists_its_tools(
        toolgate: Toolgate, folder: Path) -> None:
    """The stdio listener answers `initialize` at once (Claude Code gives up on a handshake
    after ~8 s, issue 33), while an upstream is still starting; the client's first tools/list
    then waits for that upstream's first try and shows its tools."""
    go = folder / "go"
    waiting = ["sh", "-c", f'while [ ! -e "{go}" ]; do sleep 0.05; done; exec "$0" "$@"',
               *recorder_command(folder / "slow.jsonl")]
    config = write_config(folder, toolgate.url, {"slow": {
        "command": waiting, "trust_annotations": True,
        "sandbox": {"id": "rec", "root": str(folder)}}})
    async with stdio_client(config, gateway_env(toolgate)) as client:
        assert not go.exists()  # initialized while the upstream has not even started

        async def start_upstream() -> None:
            await anyio.sleep(0.5)
            go.touch()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(start_upstream)
            with anyio.fail_after(WAIT):
                listed = await names(client)
        assert "slow.grow" in listed, listed
