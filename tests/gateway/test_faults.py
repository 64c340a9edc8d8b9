"""Faults (SPEC §14 "Fail closed", issue 32): toolgate stopped mid-session, toolgate
answering 503 or a malformed decision, an upstream that crashes, one that hangs past the
deadline, the gateway SIGKILLed during a call. In every case the recording upstream proves
that nothing reached it without an allow recorded for exactly that call. On SQLite and
Postgres (tests/gateway/conftest.py's module_database): one toolgate, one proxy and one
gateway per database, shared by the module's tests."""

from __future__ import annotations

import http.server
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from tests.gateway.clients import decision_meta, http_client, text
from tests.gateway.conftest import (
    HttpGateway,
    Toolgate,
    assert_all_forwarded_were_allowed,
    http_gateway,
    recorder_command,
    records,
    stop_gateway,
    wait_for,
)
from tests.serving import stop

pytestmark = pytest.mark.slow
DEADLINE = 3


class Proxy:
    """toolgate behind a switch: `pass` forwards, `503` answers 503, `garbage` answers 200
    with a body that is no decision; when toolgate is gone the connection just closes."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.mode = "pass"
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                if proxy.mode == "503" and "/authorize" in self.path:
                    return self._send(503, b'{"error": {"code": "storage_unavailable", '
                                           b'"message": "down", "details": {}}}')
                if proxy.mode == "garbage" and "/authorize" in self.path:
                    return self._send(200, b'{"decision_id": "x", "allowed": "true"}')
                try:
                    answer = httpx.request(
                        self.command, proxy.target + self.path, content=body, timeout=30,
                        headers={k: v for k, v in self.headers.items()
                                 if k.lower() in ("authorization", "content-type",
                                                  "x-request-id")})
                except httpx.HTTPError:
                    self.close_connection = True
                    return None
                self._send(answer.status_code, answer.content)

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = _any

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def proxy(toolgate: Toolgate) -> Iterator[Proxy]:
    p = Proxy(toolgate.url)
    yield p
    p.server.shutdown()


@pytest.fixture(scope="module")
def record(toolgate: Toolgate, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One per database (through `toolgate`): each run's record is proved against its own
    decisions."""
    return tmp_path_factory.mktemp("rec") / "calls.jsonl"


@pytest.fixture(scope="module")
def gateway(toolgate: Toolgate, proxy: Proxy, record: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpGateway]:
    folder = tmp_path_factory.mktemp("gw")
    servers = {"rec": {"command": recorder_command(record), "trust_annotations": True,
                       "sandbox": {"id": "rec", "root": str(folder)}}}
    gw = http_gateway(Toolgate(proxy.url, toolgate.proc, toolgate.env, toolgate.log,
                               toolgate.agent_token, toolgate.project, toolgate.action),
                      folder, servers, deadline_seconds=DEADLINE)
    yield gw
    stop_gateway(gw)


def received(record: Path, tool: str) -> list[dict]:
    return [r["arguments"] for r in records(record) if r["tool"] == tool]


async def test_a_deny_never_reaches_the_upstream(gateway: HttpGateway, toolgate: Toolgate,
                                                 record: Path) -> None:
    async with http_client(gateway.url, gateway.token) as client:
        allowed = await client.call_tool("rec.read_note", {"key": "0"})
        denied = await client.call_tool("rec.write_note", {"key": "k", "text": "t"})
    assert not allowed.is_error and decision_meta(allowed)["allowed"] is True
    assert denied.is_error and decision_meta(denied)["deny"]["code"] == "confirmation_required"
    assert received(record, "read_note") == [{"key": "0"}]
    assert received(record, "write_note") == []
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


async def test_toolgate_stopped_mid_session(gateway: HttpGateway, toolgate: Toolgate,
                                            record: Path) -> None:
    async with http_client(gateway.url, gateway.token) as client:
        before = await client.call_tool("rec.read_note", {"key": "1"})
        stop(toolgate.proc)
        try:
            during = await client.call_tool("rec.read_note", {"key": "2"})
        finally:
            toolgate.restart()
        after = await client.call_tool("rec.read_note", {"key": "3"})
    assert not before.is_error and not after.is_error
    assert during.is_error and text(during).startswith("ToolgateUnavailableError")
    assert {"key": "2"} not in received(record, "read_note")
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


@pytest.mark.parametrize("mode", ["503", "garbage"])
async def test_toolgate_answering_503_or_no_decision(gateway: HttpGateway, toolgate: Toolgate,
                                                     proxy: Proxy, record: Path,
                                                     mode: str) -> None:
    async with http_client(gateway.url, gateway.token) as client:
        proxy.mode = mode
        try:
            result = await client.call_tool("rec.read_note", {"key": mode})
        finally:
            proxy.mode = "pass"
    assert result.is_error and text(result).startswith("ToolgateUnavailableError")
    assert decision_meta(result) == {"decision_id": None, "allowed": False,
                                     "deny": decision_meta(result)["deny"]}
    assert {"key": mode} not in received(record, "read_note")
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


async def _outcome(toolgate: Toolgate, decision_id: str) -> dict:
    def got() -> dict | None:
        return toolgate.decision(decision_id).get("outcome")
    return wait_for(got, 30, "the gateway's outcome")


async def _relisted(client) -> None:
    with anyio.fail_after(120):
        while "rec.read_note" not in [t.name for t in (await client.list_tools()).tools]:
            await anyio.sleep(0.2)


async def test_an_upstream_that_crashes(gateway: HttpGateway, toolgate: Toolgate,
                                        record: Path) -> None:
    async with http_client(gateway.url, gateway.token) as client:
        result = await client.call_tool("rec.crash", {})
        assert result.is_error and "execution_failed" in text(result)
        outcome = await _outcome(toolgate, decision_meta(result)["decision_id"])
        assert outcome["status"] == "execution_failed" and outcome["error"]
        # Its tools leave the list while it is down, one log line says so, and it comes back.
        await _relisted(client)
        again = await client.call_tool("rec.read_note", {"key": "after crash"})
    assert not again.is_error
    assert "upstream rec down" in gateway.log.read_text()
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


async def test_an_upstream_that_hangs_past_the_deadline(gateway: HttpGateway,
                                                        toolgate: Toolgate,
                                                        record: Path) -> None:
    async with http_client(gateway.url, gateway.token) as client:
        result = await client.call_tool("rec.hang", {"key": "1"})
        assert result.is_error and f"deadline ({DEADLINE} s)" in text(result)
        outcome = await _outcome(toolgate, decision_meta(result)["decision_id"])
        assert outcome["status"] == "execution_failed"
        await _relisted(client)
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


async def test_a_registered_tool_is_decided_by_the_registry(gateway: HttpGateway,
                                                            toolgate: Toolgate,
                                                            record: Path) -> None:
    """rec.echo has no annotations: worst case for a trusted server is destructive. Once
    registered as a safe read, the registry decides (read again within ~10 s)."""
    async with http_client(gateway.url, gateway.token) as client:
        first = await client.call_tool("rec.echo", {"try": 0})
        assert decision_meta(first)["deny"]["code"] == "confirmation_required"
        assert toolgate.admin("PUT", "/v1/tools/rec.echo", {
            "capability": {"writes": False, "checkpointable": False, "unsafe": False},
            "safety_category": "safe"}).status_code in (200, 201)
        with anyio.fail_after(60):
            attempt = 0
            while True:
                attempt += 1
                result = await client.call_tool("rec.echo", {"try": attempt})
                if not result.is_error:
                    break
                await anyio.sleep(0.5)
    record_ = toolgate.decision(decision_meta(result)["decision_id"])
    assert record_["detail"]["tool"]["registered"] is True
    assert received(record, "echo") == [{"try": attempt}]
    assert_all_forwarded_were_allowed(toolgate, record, "rec")


async def test_the_gateway_killed_during_a_call(gateway: HttpGateway, toolgate: Toolgate,
                                                record: Path) -> None:
    """Last in this module: it kills the module's gateway."""
    async with anyio.create_task_group() as tasks:
        async def call() -> None:
            try:
                async with http_client(gateway.url, gateway.token) as client:
                    await client.call_tool("rec.hang", {"n": "killed"})
            except Exception:
                pass  # the gateway died under it: no answer is the expected answer
        tasks.start_soon(call)
        with anyio.fail_after(60):
            while {"n": "killed"} not in received(record, "hang"):
                await anyio.sleep(0.05)
        os.kill(gateway.proc.pid, signal.SIGKILL)
        gateway.proc.wait(timeout=30)
        tasks.cancel_scope.cancel()
    assert_all_forwarded_were_allowed(toolgate, record, "rec")
    killed = [d for d in toolgate.decisions(allowed="true")
              if d["tool"] == "rec.hang" and d["detail"]["tool"]["args"] == {"n": "killed"}]
    assert len(killed) == 1
