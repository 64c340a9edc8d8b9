"""The hot route's answer reaches the connection in one write under toolgate's own
protocol (app/edge/connection.py), whole and in order, with keep-alive and with
Connection: close; the answers one acknowledgement released are written together, after
all of them were decided. Under uvicorn's protocols (TOOLGATE_HTTP_PROTOCOL=uvicorn) the
answer goes out as from any ASGI app, nothing of uvicorn's own objects touched: the
connection sees what stock uvicorn would write.

Driven through uvicorn's own protocol classes over a recording transport, as uvicorn's
tests do, so what is checked is what uvicorn would put on the socket."""

import asyncio
import uuid

import orjson
import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.authorize.hotpath import _Outbox
from app.edge.connection import HttpProtocol
from app.log.records import new_record
from tests.conftest import ADMIN_TOKEN
from tests.uvicorn_wire import Recording
from tests.uvicorn_wire import answered as _answered
from tests.uvicorn_wire import connect as _connect
from tests.uvicorn_wire import responses as _responses

READER = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}


def _request(body: bytes, *, close: bool = False) -> bytes:
    head = (f"POST /v1/authorize-tool HTTP/1.1\r\nHost: toolgate\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n")
    return (head + ("Connection: close\r\n" if close else "") + "\r\n").encode() + body


async def _serve(app, protocol_class, data: bytes, answers: int) -> Recording:
    transport = Recording()
    _connect(app, protocol_class, transport).data_received(data)
    await _answered(transport, answers)
    return transport


@pytest.fixture
async def plan(client):
    await client.put("/v1/actions/act-1", json={"project": "web"})
    r = await client.post("/v1/plans", json={"action_id": "act-1", "plan_id": "p-1"})
    assert r.status_code == 201
    return orjson.dumps({"plan_id": "p-1", "tool": READER})


# toolgate's protocol: one write per answer; uvicorn's (httptools and h11): uvicorn's own
# two, status line and headers, then the body.
WRITES = [(HttpProtocol, 1), (HttpToolsProtocol, 2), (H11Protocol, 2)]


@pytest.mark.parametrize(("protocol_class", "writes"), WRITES)
async def test_an_answer_is_one_write_and_keep_alive_goes_on(client, plan, protocol_class,
                                                             writes):
    transport = await _serve(client.app, protocol_class, _request(plan) + _request(plan), 2)
    answers = _responses(b"".join(transport.writes))
    assert [status for status, _, _ in answers] == [200, 200]
    assert [orjson.loads(body)["allowed"] for _, _, body in answers] == [True, True]
    assert len([w for w in transport.writes if w]) == 2 * writes
    assert transport.closed_after is None


@pytest.mark.parametrize(("protocol_class", "writes"), WRITES)
async def test_with_connection_close_the_answer_is_written_before_the_close(
        client, plan, protocol_class, writes):
    transport = await _serve(client.app, protocol_class, _request(plan, close=True), 1)
    [(status, headers, body)] = _responses(b"".join(transport.writes))
    assert status == 200 and orjson.loads(body)["allowed"] is True
    assert headers.get("connection") == "close"
    assert transport.writes and transport.closed_after == len(transport.writes)
    assert len([w for w in transport.writes if w]) == writes


class _Lenient(Recording):
    """Keeps writes that come after close apart instead of failing (stock uvicorn makes
    some when a client sends garbage behind a request)."""

    def __init__(self) -> None:
        super().__init__()
        self.late: list[bytes] = []

    def write(self, data: bytes) -> None:
        if self.closed_after is not None:
            self.late.append(bytes(data))
        else:
            super().write(data)


def _as_any_asgi_app(app):
    """The app behind a `send` that is not uvicorn's own method: stock uvicorn output."""
    async def wrapped(scope, receive, send):
        await app(scope, receive, lambda message: send(message))
    return wrapped


@pytest.mark.parametrize("protocol_class", [HttpToolsProtocol, H11Protocol])
async def test_garbage_pipelined_behind_a_request_is_answered_as_stock_uvicorn_does(
        client, plan, protocol_class):
    """h11 parses a pipelined request while completing the previous response, and answers
    garbage there with a 400 and a close: our answer must already be on the wire."""
    await _serve(client.app, protocol_class, _request(plan), 1)  # key and plan cached
    statuses = {}
    for name, app in (("stock", _as_any_asgi_app(client.app)), ("toolgate", client.app)):
        transport = _Lenient()
        _connect(app, protocol_class, transport).data_received(
            _request(plan) + b"GARBAGE\r\n\r\n")
        for _ in range(50):
            await asyncio.sleep(0.01)
        statuses[name] = [status for status, _, _ in _responses(b"".join(transport.writes))]
    assert statuses["toolgate"] == statuses["stock"]
    assert statuses["stock"] == ([200, 400] if protocol_class is H11Protocol else [400])


@pytest.mark.parametrize("protocol_class", [HttpToolsProtocol, H11Protocol])
async def test_under_uvicorn_the_hot_route_writes_as_any_asgi_app(client, plan,
                                                                  protocol_class):
    """TOOLGATE_HTTP_PROTOCOL=uvicorn: no swap of uvicorn's private cycle's transport (issue
    45): the same writes, byte for byte but the ids, as the app behind a plain `send`."""
    await _serve(client.app, protocol_class, _request(plan), 1)  # key and plan cached
    writes = {}
    for name, app in (("stock", _as_any_asgi_app(client.app)), ("toolgate", client.app)):
        transport = await _serve(app, protocol_class, _request(plan), 1)
        writes[name] = [len(w) for w in transport.writes if w]
    assert len(writes["toolgate"]) == len(writes["stock"]) == 2


async def test_errors_on_the_hot_route_are_answered_whole(client, plan):
    bad = orjson.dumps({"plan_id": "no-such-plan", "tool": READER})
    transport = await _serve(client.app, HttpProtocol, _request(bad) + _request(plan), 2)
    (status, _, body), (then, _, _) = _responses(b"".join(transport.writes))
    assert status == 404 and orjson.loads(body)["error"]["code"] == "not_found"
    assert then == 200


async def test_the_answers_of_one_commit_leave_together_after_all_were_decided(client, plan):
    """Four connections whose requests arrive in one loop turn share a commit: no answer is
    written before every one of them is complete, then each is written once, whole."""
    await _serve(client.app, HttpProtocol, _request(plan), 1)  # key and plan cached
    protocols: list = []
    early: list[bool] = []

    def on_write() -> None:  # at each socket write: had every request been answered?
        early.append(not all(p.cycle is not None and p.cycle.response_started
                             for p in protocols))

    transports = [Recording(on_write) for _ in range(4)]
    for transport in transports:
        protocols.append(_connect(client.app, HttpProtocol, transport))
    for protocol in protocols:
        protocol.data_received(_request(plan))
    for transport in transports:
        await _answered(transport, 1)
    for transport in transports:
        [(status, _, body)] = _responses(b"".join(transport.writes))
        assert status == 200 and orjson.loads(body)["allowed"] is True
        assert len(transport.writes) == 1
    assert early == [False] * 4


async def test_the_log_runs_its_after_ack_hook_after_the_requests_it_released(client):
    log = client.app.state.decision_log
    events: list[tuple[str, int | None]] = []
    hook = log.after_ack
    log.after_ack = lambda number: events.append(("hook", number))
    try:
        async def decide() -> None:
            number = await log.write([new_record("authorize", str(uuid.uuid4()))])
            events.append(("resumed", number))

        await asyncio.gather(*(decide() for _ in range(5)))
        await asyncio.sleep(0)
    finally:
        log.after_ack = hook
    numbers = {number for _, number in events}
    assert len(numbers) == 1 and None not in numbers  # one commit, one acknowledgement
    assert [kind for kind, _ in events] == ["resumed"] * 5 + ["hook"]


def test_an_outbox_writes_in_order_and_never_holds_after_its_flush():
    outbox = _Outbox()
    a, b, gone = Recording(), Recording(), Recording()
    gone.close()
    assert outbox.hold(a, b"1", 1) and outbox.hold(b, b"2", 1) and outbox.hold(gone, b"x", 1)
    assert outbox.hold(a, b"3", 1)
    assert a.writes == b.writes == []
    outbox.flush(1)
    assert a.writes == [b"1", b"3"] and b.writes == [b"2"] and gone.writes == []
    # a request of an acknowledgement already flushed (it waited to send) writes itself
    assert not outbox.hold(a, b"4", 1) and not outbox.hold(a, b"5", None)
    assert outbox.hold(a, b"6", 2)
