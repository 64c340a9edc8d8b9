"""The edge's limits around uvicorn's own httptools protocol (app/edge/guard.py), which
`TOOLGATE_HTTP_PROTOCOL=uvicorn` serves on: the same deadlines and cap as the default
protocol's (tests/edge/test_limits.py), every request otherwise uvicorn's.

Deadlines are checked without waiting for them: a test moves the connection's `since`
back and fires its timer, which is what the event loop would do later; the last test
sends a real head one byte a second to a real `toolgate serve` under each protocol."""

from __future__ import annotations

import socket
import time

import orjson
import pytest

from app.edge import guard
from app.edge.guard import Guarded
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.serving import serve, stop
from tests.uvicorn_wire import Recording, answered, connect, responses

BODY = orjson.dumps({"tool": {"name": "fs.read", "capability": {
    "writes": False, "checkpointable": True, "unsafe": False}}, "safety_profile": {}})


def _request(body: bytes = BODY, length: int | None = None) -> bytes:
    return (f"POST /v1/authorize-tool HTTP/1.1\r\nHost: toolgate\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n"
            ).encode() + body


def _overdue(proto: Guarded, seconds: float) -> None:
    proto.since -= seconds
    if proto.timer is not None:
        proto.timer.cancel()
    proto._on_timer()


def _error(transport: Recording) -> tuple[int, dict[str, str], dict]:
    [(status, headers, body)] = responses(b"".join(transport.writes))
    return status, headers, orjson.loads(body)["error"]


@pytest.fixture
async def app(settings):
    app = create_app(settings.model_copy(update={"max_connections": 16}))
    async with app.router.lifespan_context(app):
        yield app


async def test_a_request_is_served_by_uvicorns_own_protocol_unchanged(app):
    transport = Recording()
    proto = connect(app, Guarded, transport)
    proto.data_received(_request())
    await answered(transport, 1)
    [(status, headers, body)] = responses(b"".join(transport.writes))
    assert status == 200 and orjson.loads(body)["allowed"] is True
    assert "x-request-id" in headers and transport.closed_after is None
    assert type(proto.inner).__name__ == "HttpToolsProtocol"  # uvicorn's, composed


async def test_a_head_not_complete_within_its_deadline_is_408_and_closed(app):
    transport = Recording()
    proto = connect(app, Guarded, transport)
    proto.data_received(b"POST /v1/authorize-tool HTTP/1.1\r\nHost: t")
    _overdue(proto, 9.9)
    assert transport.writes == [] and transport.closed_after is None  # not yet
    _overdue(proto, 0.2)
    status, headers, error = _error(transport)
    assert status == 408 and error["code"] == "request_timeout"
    assert "headers" in error["message"] and headers["connection"] == "close"
    assert transport.closed_after == 1


async def test_a_head_past_the_size_limit_is_431_while_it_still_arrives(app):
    transport = Recording()
    proto = connect(app, Guarded, transport)
    proto.data_received(b"GET /healthz HTTP/1.1\r\nHost: t\r\n")
    for _ in range(40):  # 40 headers of 1 kB, never ending
        if transport.closed_after is not None:
            break
        proto.data_received(b"X-Pad: " + b"a" * 1024 + b"\r\n")
    status, _, error = _error(transport)
    assert status == 431 and error["code"] == "headers_too_large"


async def test_a_body_not_complete_within_its_deadline_is_408_and_closed(app):
    transport = Recording()
    proto = connect(app, Guarded, transport)
    proto.data_received(_request(b'{"tool": ', length=100))
    _overdue(proto, 29.9)
    assert transport.closed_after is None
    _overdue(proto, 0.2)
    status, _, error = _error(transport)
    assert status == 408 and "body" in error["message"] and transport.closed_after == 1


async def test_a_connection_that_sends_nothing_is_closed_after_the_keep_alive_wait(app):
    transport = Recording()
    proto = connect(app, Guarded, transport)
    _overdue(proto, 4.9)
    assert transport.closed_after is None
    _overdue(proto, 0.2)
    assert transport.closed_after == 0 and transport.writes == []


async def test_a_waiting_request_has_no_deadline_of_ours_and_an_answer_is_never_cut(app):
    transport = Recording()
    proto = connect(app, Guarded, transport)
    proto.data_received(_request())
    await answered(transport, 1)
    _overdue(proto, 60)  # after the answer: uvicorn's own keep-alive, not ours
    assert len(responses(b"".join(transport.writes))) == 1


async def test_past_the_cap_a_new_connection_gets_503(app, monkeypatch):
    monkeypatch.setattr(guard, "_open", [16])  # 16 connections open already
    transport = Recording()
    proto = connect(app, Guarded, transport)
    status, headers, error = _error(transport)
    assert status == 503 and headers["retry-after"] == "1" and transport.closed_after == 1
    proto.connection_lost(None)
    assert guard._open == [16]  # a refused connection was never counted


@pytest.mark.slow
@pytest.mark.parametrize("http_protocol", ["toolgate", "uvicorn"])
def test_a_head_sent_one_byte_a_second_is_closed_at_the_header_deadline(
        tmp_path, http_protocol):
    """What the review measured: under uvicorn's own protocol such a head was held 12 s
    against a 3 s deadline, for as long as the client kept sending."""
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/t.db",
                       "TOOLGATE_HTTP_PROTOCOL": http_protocol,
                       "TOOLGATE_HEADER_TIMEOUT_SECONDS": "2"}, tmp_path / "serve.log",
                      timeout=300)  # start-up on a loaded machine
    try:
        host, port = url.removeprefix("http://").split(":")
        head = b"POST /v1/authorize-tool HTTP/1.1\r\nHost: toolgate\r\n" + b"X-Slow: " \
            + b"a" * 60
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            started = time.monotonic()
            answer = b""
            for byte in head:  # ~110 s to send it all, if the server let it
                try:
                    conn.sendall(bytes([byte]))
                except OSError:  # closed under us: what the deadline does
                    break
                conn.settimeout(1.0)
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:  # reset under us: closed at the deadline, after its answer
                    break
                if not data:
                    break
                answer += data
            conn.settimeout(10)
            try:
                while data := conn.recv(65536):
                    answer += data
            except OSError:
                pass
            held = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b"request_timeout" in answer
        # 2 s deadline: closed long before the head could be complete (generous slack
        # for a loaded machine, far below the ~110 s the client would take).
        assert held < 30, held
    finally:
        stop(proc)
