"""What the faithful proxy books and decides (SPEC §19, issue 44), with the recording
server behind an HTTP gateway, on SQLite and Postgres: a resources/read is the decision
`SERVER.resources:read` and a denied one a JSON-RPC error carrying it; a forwarded call the
client cancels or abandons is booked; a 2026-07-28 confirmation answers one call only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import MCPError

from tests.gateway.clients import decision_meta, http_client, text
from tests.gateway.conftest import (
    HttpGateway,
    Toolgate,
    http_gateway,
    recorder_command,
    records,
    stop_gateway,
    wait_for,
)

pytestmark = pytest.mark.slow
LEGACY = {"mode": "legacy"}


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("proxy")


@pytest.fixture(scope="module")
def record(folder: Path, toolgate: Toolgate) -> Path:
    return folder / f"calls-{toolgate.url.rsplit(':', 1)[1]}.jsonl"


@pytest.fixture(scope="module")
def gateway(toolgate: Toolgate, folder: Path, record: Path) -> Iterator[HttpGateway]:
    gw = http_gateway(toolgate, folder, {
        "rec": {"command": recorder_command(record), "trust_annotations": True,
                "sandbox": {"id": "rec", "root": str(folder)}}})
    yield gw
    stop_gateway(gw)


async def test_a_read_is_a_decision_and_a_denied_one_an_error(
        gateway: HttpGateway, toolgate: Toolgate, folder: Path, record: Path) -> None:
    inside = (folder / "a.txt").as_uri()
    async with http_client(gateway.url, gateway.token, **LEGACY) as client:
        ok = await client.read_resource(inside)
        assert "contents of" in ok.contents[0].text
        with pytest.raises(MCPError) as denied:
            await client.read_resource("file:///etc/passwd")
    assert denied.value.code == -32001
    assert denied.value.message.startswith("ToolSandboxEscapeError (sandbox_path_escape)")
    meta = denied.value.data["toolgate/decision"]
    assert meta["allowed"] is False and meta["decision_id"]
    assert denied.value.message == text_of_deny(meta)
    made = toolgate.decision(meta["decision_id"])
    assert made["tool"] == "rec.resources:read"
    assert made["detail"]["tool"]["args"] == {"uri": "file:///etc/passwd", "path": "/etc/passwd"}
    reads = [r["arguments"]["uri"] for r in records(record) if r["tool"] == "resources:read"]
    assert inside in reads and "file:///etc/passwd" not in reads
    allowed = ok.meta["toolgate/decision"]
    assert toolgate.decision(allowed["decision_id"])["detail"]["tool"]["path_args"] == ["path"]
    outcome = await anyio.to_thread.run_sync(lambda: wait_for(
        lambda: toolgate.decision(allowed["decision_id"]).get("outcome"), 30, "the outcome"))
    assert outcome["status"] == "succeeded"


def text_of_deny(meta: dict) -> str:
    deny = meta["deny"]
    return f"{deny['error']} ({deny['code']}): {deny['message']} [decision {meta['decision_id']}]"


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
    never booked. Cancelled (notifications/cancelled) and abandoned (the client ends its
    session mid-call) are both booked execution_failed, error "cancelled"."""
    async with http_client(gateway.url, gateway.token, **LEGACY) as client:
        with anyio.move_on_after(60) as scope:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(client.call_tool, "rec.hang", {"n": "cancelled"})
                await anyio.to_thread.run_sync(lambda: wait_for(
                    lambda: {"n": "cancelled"} in hung(record), 60, "the forwarded call"))
                tasks.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        assert not scope.cancelled_caught
        # Booked while this client's session is still open: the cancellation did it.
        outcome = await _outcome(toolgate, "rec.hang", {"n": "cancelled"})
    assert outcome["status"] == "execution_failed" and outcome["error"] == "cancelled"

    async def abandoned(client: Any) -> None:
        try:
            await client.call_tool("rec.hang", {"n": "abandoned"})
        except Exception:  # noqa: BLE001 - its session ended under it: no answer
            pass

    async with anyio.create_task_group() as tasks:
        async with http_client(gateway.url, gateway.token, **LEGACY) as client:
            tasks.start_soon(abandoned, client)
            await anyio.to_thread.run_sync(lambda: wait_for(
                lambda: {"n": "abandoned"} in hung(record), 60, "the forwarded call"))
        # The client left with the call in flight (its session ended: DELETE).
    outcome = await _outcome(toolgate, "rec.hang", {"n": "abandoned"})
    assert outcome["status"] == "execution_failed" and outcome["error"] == "cancelled"


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
