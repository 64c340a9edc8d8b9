"""The gateway as a faithful proxy (SPEC §19, issue 44), with server-everything (npm, over
Streamable HTTP) and the recording server behind one HTTP gateway, driven by the SDK's
client: a session per client, resources (a read decided as `SERVER.resources:read`),
prompts, completions, logging, progress, and the upstream's sampling and elicitation
relayed to the client that declared them. On SQLite; test_proxy_decisions.py holds what
is booked and decided, on both databases."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest

from tests.gateway.clients import http_client, inspector, text
from tests.gateway.conftest import (
    HttpGateway,
    Toolgate,
    free_port,
    http_gateway,
    npm_bin,
    recorder_command,
    stop_gateway,
    wait_for,
)

# The relayed 2025-11-25 features (logging, resource subscriptions) are deprecated at
# 2026-07-28, and the SDK says so on every use.
pytestmark = [pytest.mark.slow,
              pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")]
LEGACY = {"mode": "legacy"}


def start_everything(log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    env = {**os.environ, "PORT": str(port)}
    with open(log, "ab") as out:
        proc = subprocess.Popen([npm_bin("mcp-server-everything"), "streamableHttp"], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"

    def up() -> bool:
        try:
            httpx.get(url, timeout=1)
            return True
        except httpx.HTTPError:
            return False

    wait_for(up, 60, "server-everything")
    return proc, url


@pytest.fixture(scope="module", params=["sqlite"])
def module_database(request, tmp_path_factory, sqlite_template) -> Iterator[str]:
    path = tmp_path_factory.mktemp("gwdb") / "toolgate.db"
    shutil.copyfile(sqlite_template, path)
    yield f"sqlite+aiosqlite:///{path}"


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy")


@pytest.fixture(scope="module")
def record(folder: Path, toolgate: Toolgate) -> Path:
    return folder / f"calls-{toolgate.url.rsplit(':', 1)[1]}.jsonl"


@pytest.fixture(scope="module")
def gateway(toolgate: Toolgate, folder: Path, record: Path) -> Iterator[HttpGateway]:
    everything, url = start_everything(folder / "everything.log")
    # The tools server-everything offers only to a client that can answer them, and its
    # long-running one: registered as safe reads, so no confirmation comes between.
    for tool in ("trigger-sampling-request", "trigger-elicitation-request",
                 "trigger-long-running-operation", "toggle-simulated-logging",
                 "toggle-subscriber-updates", "get-roots-list"):
        assert toolgate.admin("PUT", f"/v1/tools/ev.{tool}", {
            "capability": {"writes": False, "checkpointable": False, "unsafe": False},
            "safety_category": "safe"}).status_code in (200, 201)
    gw = http_gateway(toolgate, folder, {
        "ev": {"url": url, "trust_annotations": True},
        "rec": {"command": recorder_command(record), "trust_annotations": True,
                "sandbox": {"id": "rec", "root": str(folder)}}})
    yield gw
    stop_gateway(gw)
    everything.kill()
    everything.wait(timeout=30)


class Logs:
    """A client's log notifications, counted, with an event per arrival."""

    def __init__(self) -> None:
        self.count = 0
        self.arrived = anyio.Event()

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.count += 1
        self.arrived.set()
        self.arrived = anyio.Event()

    async def more_than(self, count: int, seconds: float = 60) -> None:
        with anyio.fail_after(seconds):
            while self.count <= count:
                await self.arrived.wait()


async def test_two_clients_have_upstream_sessions_of_their_own(gateway: HttpGateway) -> None:
    """The review's finding: A's toggle-simulated-logging started, B's stopped the same
    session. Now each toggles its own: A's logs go to A alone, and B's toggle starts B's
    logs without stopping A's."""
    a_logs, b_logs = Logs(), Logs()
    async with http_client(gateway.url, gateway.token, logging_callback=a_logs, **LEGACY) as a, \
            http_client(gateway.url, gateway.token, logging_callback=b_logs, **LEGACY) as b:
        await a.set_logging_level("debug")
        await b.set_logging_level("debug")
        started = await a.call_tool("ev.toggle-simulated-logging", {})
        assert not started.is_error, text(started)
        await a_logs.more_than(1)
        assert b_logs.count == 0  # nothing of A's session reached B
        toggled = await b.call_tool("ev.toggle-simulated-logging", {})
        assert not toggled.is_error and "started" in text(toggled).lower(), text(toggled)
        seen = a_logs.count
        await b_logs.more_than(0)
        await a_logs.more_than(seen)  # A's logging was not stopped by B
        await a.call_tool("ev.toggle-simulated-logging", {})  # stop A's; B's goes on
        b_seen = b_logs.count
        await b_logs.more_than(b_seen)


async def test_resources_prompts_and_completions_are_relayed(gateway: HttpGateway,
                                                             toolgate: Toolgate) -> None:
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    async with http_client(gateway.url, gateway.token, message_handler=on_message,
                           **LEGACY) as client:
        caps = client.server_capabilities
        assert caps.resources is not None and caps.prompts is not None
        assert caps.logging is not None and caps.completions is not None
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        static = "demo://resource/static/document/architecture.md"
        assert static in uris and "note://first" in uris  # as the upstreams gave them
        templates = [t.uri_template for t in
                     (await client.list_resource_templates()).resource_templates]
        assert "demo://resource/dynamic/text/{resourceId}" in templates
        read = await client.read_resource(static)
        assert read.contents and str(read.contents[0].uri) == static
        decision = (read.meta or {})["toolgate/decision"]
        assert decision["allowed"] is True
        made = toolgate.decision(decision["decision_id"])
        assert made["tool"] == "ev.resources:read"
        assert made["detail"]["tool"]["args"] == {"uri": static}
        by_template = await client.read_resource("demo://resource/dynamic/text/7")
        assert by_template.contents

        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert {"ev.simple-prompt", "ev.args-prompt"} <= set(prompts)
        got = await client.get_prompt("ev.args-prompt", {"city": "Oslo", "state": "Oslo"})
        assert "Oslo" in str(got.messages[0].content)
        done = await client.complete(types.PromptReference(name="ev.completable-prompt"),
                                     {"name": "department", "value": "E"})
        assert done.completion.values

        await client.subscribe_resource("demo://resource/dynamic/text/1")
        toggled = await client.call_tool("ev.toggle-subscriber-updates", {})
        assert not toggled.is_error, text(toggled)
        with anyio.fail_after(60):
            while "demo://resource/dynamic/text/1" not in updated:
                await anyio.sleep(0.1)
        await client.unsubscribe_resource("demo://resource/dynamic/text/1")
        await client.call_tool("ev.toggle-subscriber-updates", {})


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_of_a_call_in_flight_is_relayed(gateway: HttpGateway,
                                                       mode: str) -> None:
    steps: list[float] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        steps.append(value)

    async with http_client(gateway.url, gateway.token, mode=mode) as client:
        result = await client.call_tool("ev.trigger-long-running-operation",
                                        {"duration": 1, "steps": 3},
                                        progress_callback=progress)
    assert not result.is_error, text(result)
    assert len(steps) >= 2 and steps == sorted(steps)


async def test_sampling_elicitation_and_roots_go_to_the_client_that_declared_them(
        gateway: HttpGateway) -> None:
    asked: list[str] = []

    async def sampling(ctx: Any, params: types.CreateMessageRequestParams
                       ) -> types.CreateMessageResult:
        asked.append("sampling")
        return types.CreateMessageResult(role="assistant", model="test-model",
                                         content=types.TextContent(text="sampled by the client"))

    async def elicitation(ctx: Any, params: Any) -> types.ElicitResult:
        asked.append("elicitation")
        return types.ElicitResult(action="decline")

    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri="file:///client/own/root",
                                                       name="own")])

    async with http_client(gateway.url, gateway.token, **LEGACY) as plain:
        names = {t.name for t in (await plain.list_tools()).tools}
        assert "ev.trigger-sampling-request" not in names  # it cannot answer them
    async with http_client(gateway.url, gateway.token, sampling_callback=sampling,
                           elicitation_callback=elicitation, list_roots_callback=roots,
                           **LEGACY) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"ev.trigger-sampling-request", "ev.trigger-elicitation-request",
                "ev.get-roots-list"} <= names
        sampled = await client.call_tool("ev.trigger-sampling-request",
                                         {"prompt": "hello", "maxTokens": 10})
        assert not sampled.is_error and "sampled by the client" in text(sampled), \
            text(sampled)
        elicited = await client.call_tool("ev.trigger-elicitation-request", {})
        assert not elicited.is_error and "decline" in text(elicited).lower(), text(elicited)
        rooted = await client.call_tool("ev.get-roots-list", {})
        assert "file:///client/own/root" in text(rooted), text(rooted)
    assert asked == ["sampling", "elicitation"]




def test_the_inspector_cli_sees_resources_and_prompts(gateway: HttpGateway,
                                                      folder: Path) -> None:
    """The independent client: what the review found answered -32601 through the gateway
    (resources, prompts, the log level) is served."""
    home = folder / "inspector-home"
    target = [gateway.url, "--transport", "http", "--header",
              f"Authorization: Bearer {gateway.token}"]
    code, answer, err = inspector(target, home, "--method", "resources/list")
    assert code == 0, err
    assert "demo://resource/static/document/architecture.md" in str(answer)
    code, answer, err = inspector(target, home, "--method", "resources/read", "--uri",
                                  "demo://resource/static/document/architecture.md")
    assert code == 0 and "toolgate/decision" in str(answer), (code, answer, err)
    code, answer, err = inspector(target, home, "--method", "prompts/get", "--prompt-name",
                                  "ev.args-prompt", "--prompt-args", "city=Oslo", "state=Viken")
    assert code == 0 and "Oslo" in str(answer), (code, answer, err)
    code, answer, err = inspector(target, home, "--method", "logging/setLevel",
                                  "--log-level", "debug")
    assert code == 0, (code, answer, err)
