"""SPEC §19, last item: an answer that is not strictly a decision, or that does not come
whole within the deadline, is no decision -- in the Python clients and in the gateway.

A fake service on 127.0.0.1 (fake_service.py) sends exact bytes: duplicate keys (at the top
and nested), a missing or empty `decision_id`, an `allowed` that is not a JSON boolean, and
a body (or header block) that drips one byte every 2 s for 80 s. Each must end in
ToolgateUnavailableError (the gateway: an error result naming it, nothing forwarded), the
drip well before it would have ended.
"""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types
import pytest
from toolgate_client import AsyncClient, Client, ToolgateUnavailableError

from app.gateway.calls import Gate
from app.gateway.config import load_config
from tests.client.fake_service import MATCH, Drip, FakeService

DENY = b'{"error": "ToolAccessDeniedError", "code": "tool_not_allowed", "message": "no"}'
MALFORMED = {
    "duplicate allowed, last true": b'{"decision_id": "d-1", "allowed": false, "deny": '
                                    + DENY + b', "allowed": true, "deny": null}',
    "duplicate key nested": b'{"decision_id": "d-1", "allowed": true, "deny": null, '
                            b'"profile": {"name": "a", "name": "b"}}',
    "duplicate decision_id": b'{"decision_id": "d-1", "decision_id": "d-2", "allowed": true,'
                             b' "deny": null}',
    "no decision_id": b'{"allowed": true, "deny": null}',
    "empty decision_id": b'{"decision_id": "", "allowed": true, "deny": null}',
    "null decision_id": b'{"decision_id": null, "allowed": true, "deny": null}',
    "allowed a string": b'{"decision_id": "d-1", "allowed": "true", "deny": null}',
    "allowed a number": b'{"decision_id": "d-1", "allowed": 1, "deny": null}',
    "allowed null": b'{"decision_id": "d-1", "allowed": null, "deny": null}',
}
ALLOW = b'{"decision_id": "d-1", "allowed": true, "deny": null}'
TOOL = {"name": "fs.read"}
DEADLINE = 3.0
# The drip lasts 80 s; ending within this shows the deadline held (generous on a loaded
# machine: the deadline is 3 s, with retries=0).
WELL_BEFORE = 30.0


@pytest.fixture(scope="module")
def fake():
    with FakeService() as service:
        yield service


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
def test_sync_client_takes_a_malformed_answer_as_no_decision(fake: FakeService,
                                                             body: bytes) -> None:
    fake.answer = body
    with Client(fake.url, token="t", timeout=DEADLINE, retries=0) as client:
        with pytest.raises(ToolgateUnavailableError):
            client.enforce(plan_id="p-1", tool=TOOL)
        with pytest.raises(ToolgateUnavailableError):
            client.authorize_tool(plan_id="p-1", tool=TOOL)


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_async_client_takes_a_malformed_answer_as_no_decision(fake: FakeService,
                                                                    body: bytes) -> None:
    fake.answer = body
    async with AsyncClient(fake.url, token="t", timeout=DEADLINE, retries=0) as client:
        with pytest.raises(ToolgateUnavailableError):
            await client.enforce(plan_id="p-1", tool=TOOL)


def test_a_strict_allow_is_still_an_allow(fake: FakeService) -> None:
    fake.answer = ALLOW
    with Client(fake.url, token="t", timeout=DEADLINE, retries=0) as client:
        assert client.enforce(plan_id="p-1", tool=TOOL).decision_id == "d-1"


@pytest.mark.parametrize("drip", [Drip(), Drip(in_headers=True)], ids=["body", "headers"])
def test_sync_client_gives_up_on_a_drip_at_its_deadline(fake: FakeService, drip: Drip) -> None:
    fake.answer = drip
    with Client(fake.url, token="t", timeout=DEADLINE, retries=0) as client:
        started = time.monotonic()
        with pytest.raises(ToolgateUnavailableError, match="DeadlineExceeded"):
            client.authorize_tool(plan_id="p-1", tool=TOOL)
    assert time.monotonic() - started < WELL_BEFORE


@pytest.mark.parametrize("drip", [Drip(), Drip(in_headers=True)], ids=["body", "headers"])
async def test_async_client_gives_up_on_a_drip_at_its_deadline(fake: FakeService,
                                                               drip: Drip) -> None:
    fake.answer = drip
    async with AsyncClient(fake.url, token="t", timeout=DEADLINE, retries=0) as client:
        started = time.monotonic()
        with pytest.raises(ToolgateUnavailableError, match="DeadlineExceeded"):
            await client.authorize_tool(plan_id="p-1", tool=TOOL)
    assert time.monotonic() - started < WELL_BEFORE


# -- the gateway: the same answers are no decision, and nothing is forwarded -------------------

class _Recording:
    """An upstream stand-in that is up, lists one tool and records what reaches it."""

    def __init__(self, config: Any) -> None:
        self.name, self.config, self.up, self.reason = "rec", config, True, ""
        self.tools = {"echo": types.Tool(name="echo", input_schema={"type": "object"})}
        self.calls: list[dict[str, Any]] = []

    async def call(self, tool: str, arguments: dict[str, Any],
                   **_: Any) -> types.CallToolResult:
        self.calls.append(arguments)
        return types.CallToolResult(content=[types.TextContent(text="done")])


def _gate(url: str) -> tuple[Gate, AsyncClient, _Recording]:
    config = load_config(f"""
version: 1
toolgate: {{url: "{url}", timeout_seconds: {DEADLINE}}}
listen: {{stdio: true}}
plan: {{plan_id: p-1}}
servers:
  rec: {{command: [python, -c, pass]}}
""")
    # As app/gateway/run.py builds it (retries as the client's default).
    client = AsyncClient(url, "t", timeout=config.toolgate.timeout_seconds)
    upstream = _Recording(config.servers["rec"])
    return Gate(config, client, {"rec": upstream}), client, upstream  # type: ignore[dict-item]


def _text(result: types.CallToolResult) -> str:
    return " ".join(c.text for c in result.content if isinstance(c, types.TextContent))


@pytest.mark.parametrize("body", list(MALFORMED.values()), ids=list(MALFORMED))
async def test_gateway_forwards_nothing_on_a_malformed_answer(fake: FakeService,
                                                              body: bytes) -> None:
    fake.answer = body
    gate, client, upstream = _gate(fake.url)
    async with client:
        result = await gate.call("rec.echo", {"x": 1}, None)
    assert result.is_error and _text(result).startswith("ToolgateUnavailableError")
    assert upstream.calls == []


async def test_gateway_forwards_a_strict_allow(fake: FakeService) -> None:
    fake.answer = ALLOW
    gate, client, upstream = _gate(fake.url)
    async with client:
        result = await gate.call("rec.echo", {"x": 1}, None)
        await gate.drain_reports(5)
    assert not result.is_error and upstream.calls == [{"x": 1}]


@pytest.mark.parametrize("pin", [
    b'{"match": false, "digest": "", "pin": null, "decision": null, "match": true}',
    b'{"match": "true", "digest": "", "pin": null, "decision": null}',
    b'{"match": false, "digest": "", "pin": null, "decision": null}',
], ids=["duplicate match", "match a string", "no match and no decision"])
async def test_gateway_forwards_nothing_on_a_malformed_pin_answer(fake: FakeService,
                                                                  pin: bytes) -> None:
    """The pin check before a decision is held to the same rules (SPEC §19)."""
    fake.answer, fake.pin_answer = ALLOW, pin
    gate, client, upstream = _gate(fake.url)
    try:
        async with client:
            result = await gate.call("rec.echo", {"x": 1}, None)
    finally:
        fake.pin_answer = MATCH
    assert result.is_error and _text(result).startswith("ToolgateUnavailableError")
    assert upstream.calls == []


async def test_gateway_gives_up_on_a_drip_within_one_deadline(fake: FakeService) -> None:
    """Retries included: the gateway's client waits one deadline, not one per attempt."""
    fake.answer = Drip()
    gate, client, upstream = _gate(fake.url)
    async with client:
        started = time.monotonic()
        result = await gate.call("rec.echo", {"x": 1}, None)
    assert result.is_error and _text(result).startswith("ToolgateUnavailableError")
    assert time.monotonic() - started < WELL_BEFORE
    assert upstream.calls == []
