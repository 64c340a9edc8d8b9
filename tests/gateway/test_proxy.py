"""The gateway as a faithful proxy (SPEC §19, issue 44), with server-everything (npm, over
Streamable HTTP) and the recording server behind one HTTP gateway, driven by the SDK's
client: a session per client, resources (decided as `SERVER.resources:read`), prompts,
completions, logging, progress, the upstream's sampling and elicitation relayed, every
forwarded call booked even when cancelled or abandoned, and a 2026-07-28 confirmation that
answers one call only. On SQLite and Postgres."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp import MCPError

from tests.gateway.clients import decision_meta, http_client, text
from tests.gateway.conftest import (
    HttpGateway,
    Toolgate,
    free_port,
    http_gateway,
    npm_bin,
    recorder_command,
    records,
    stop_gateway,
    wait_for,
)

pytestmark = pytest.mark.slow
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


async def test_a_read_is_a_decision_and_a_denied_one_an_error(
        gateway: HttpGateway, toolgate: Toolgate, folder: Path, record: Path) -> None:
    inside = (folder / "a.txt").as_uri()
    async with http_client(gateway.url, gateway.token, **LEGACY) as client:
        ok = await client.read_resource(inside)
        assert "contents of" in ok.contents[0].text
        with pytest.raises(MCPError) as denied:
            await client.read_resource("file:///etc/passwd")
    assert "(path_outside_sandbox)" in denied.value.message or "path" in denied.value.message
    meta = denied.value.data["toolgate/decision"]
    assert meta["allowed"] is False and meta["decision_id"]
    assert denied.value.message == text_of_deny(meta)
    made = toolgate.decision(meta["decision_id"])
    assert made["tool"] == "rec.resources:read"
    assert made["detail"]["tool"]["args"] == {"uri": "file:///etc/passwd", "path": "/etc/passwd"}
    reads = [r["arguments"]["uri"] for r in records(record) if r["tool"] == "resources:read"]
    assert inside in reads and "file:///etc/passwd" not in reads


def text_of_deny(meta: dict) -> str:
    deny = meta["deny"]
    return f"{deny['error']} ({deny['code']}): {deny['message']} [decision {meta['decision_id']}]"


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


async def test_sampling_and_elicitation_go_to_the_client_that_declared_them(
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

    async with http_client(gateway.url, gateway.token, **LEGACY) as plain:
        names = {t.name for t in (await plain.list_tools()).tools}
        assert "ev.trigger-sampling-request" not in names  # it cannot answer them
    async with http_client(gateway.url, gateway.token, sampling_callback=sampling,
                           elicitation_callback=elicitation, **LEGACY) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"ev.trigger-sampling-request", "ev.trigger-elicitation-request"} <= names
        sampled = await client.call_tool("ev.trigger-sampling-request",
                                         {"prompt": "hello", "maxTokens": 10})
        assert not sampled.is_error and "sampled by the client" in text(sampled), \
            text(sampled)
        elicited = await client.call_tool("ev.trigger-elicitation-request", {})
        assert not elicited.is_error and "decline" in text(elicited).lower(), text(elicited)
    assert asked == ["sampling", "elicitation"]


async def _outcome(toolgate: Toolgate, tool: str, args: dict) -> dict:
    def booked() -> dict | None:
        for item in toolgate.decisions(allowed="true"):
            if item["tool"] == tool and item["detail"]["tool"]["args"] == args:
                return toolgate.decision(item["decision_id"]).get("outcome")
        return None
    return await anyio.to_thread.run_sync(lambda: wait_for(booked, 60, f"{tool}'s outcome"))


async def test_a_cancelled_or_abandoned_call_is_booked(gateway: HttpGateway,
                                                       toolgate: Toolgate,
                                                       record: Path) -> None:
    """The review's finding: a call cancelled by the client was forwarded and allowed but
    never booked. Cancelled (notifications/cancelled) and abandoned (the client's session
    ends mid-call) are both booked execution_failed, error "cancelled"."""
    async with http_client(gateway.url, gateway.token, **LEGACY) as client:
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "rec.hang", {"n": "cancelled"})
                await anyio.to_thread.run_sync(lambda: wait_for(
                    lambda: {"n": "cancelled"} in hung(record), 60, "the forwarded call"))
                tasks.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        assert not scope.cancelled_caught
    outcome = await _outcome(toolgate, "rec.hang", {"n": "cancelled"})
    assert outcome["status"] == "execution_failed" and outcome["error"] == "cancelled"

    async with anyio.create_task_group() as tasks:
        async def abandon() -> None:
            async with http_client(gateway.url, gateway.token, **LEGACY) as client:
                await client.call_tool("rec.hang", {"n": "abandoned"})
        tasks.start_soon(abandon)
        await anyio.to_thread.run_sync(lambda: wait_for(
            lambda: {"n": "abandoned"} in hung(record), 60, "the forwarded call"))
        tasks.cancel_scope.cancel()  # the client leaves: its session is closed
    outcome = await _outcome(toolgate, "rec.hang", {"n": "abandoned"})
    assert outcome["status"] == "execution_failed"


def hung(record: Path) -> list[dict]:
    return [r["arguments"] for r in records(record) if r["tool"] == "hang"]


async def test_a_confirmation_answers_one_call_only(gateway: HttpGateway, toolgate: Toolgate,
                                                    record: Path) -> None:
    """The review's finding: the same 2026-07-28 tools/call with the same request_state and
    input_responses was forwarded again, 3 of 3 times at once and once later. Now the state
    is spent by the first: one write reaches the upstream."""
    args = {"key": "once", "text": "t"}
    answer = {"toolgate_confirm": types.ElicitResult(action="accept",
                                                     content={"confirm": True})}
    async with http_client(gateway.url, gateway.token, mode="2026-07-28",
                           elicitation_callback=_never) as client:
        first = await client.session.call_tool("rec.write_note", args,
                                               allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult) and first.request_state
        results: list[Any] = []

        async def retry() -> None:
            results.append(await client.session.call_tool(
                "rec.write_note", args, input_responses=answer,
                request_state=first.request_state, allow_input_required=True))

        async with anyio.create_task_group() as tasks:
            for _ in range(3):
                tasks.start_soon(retry)
        await retry()  # and once more, later
        # Another call's arguments with this state: refused too (bound to the call).
        other = await client.session.call_tool(
            "rec.write_note", {"key": "other", "text": "t"}, input_responses=answer,
            request_state=first.request_state, allow_input_required=True)
    allowed = [r for r in results if isinstance(r, types.CallToolResult) and not r.is_error]
    assert len(allowed) == 1, [text(r) for r in results]
    refused = [r for r in results if r not in allowed]
    assert all(decision_meta(r)["deny"]["code"] == "confirmation_required" for r in refused)
    assert decision_meta(other)["deny"]["code"] == "confirmation_required"
    writes = [r["arguments"] for r in records(record) if r["tool"] == "write_note"]
    assert writes.count(args) == 1 and {"key": "other", "text": "t"} not in writes


async def _never(ctx: Any, params: Any) -> types.ElicitResult:
    raise AssertionError("the test drives the confirmation itself")
