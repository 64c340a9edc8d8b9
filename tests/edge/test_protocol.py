"""`toolgate serve`'s HTTP protocol (app/edge/connection.py): the hot route answered
from memory without an ASGI task, and everything around it as uvicorn does it: keep-alive,
Connection: close, pipelining, 100-continue, large bodies, shutdown, a client that goes away, and a
decision that cannot be recorded. The decision cases and bad inputs run through it too
(the `both_paths` fixture's "protocol" client)."""

import asyncio
from contextlib import asynccontextmanager

import orjson
import pytest
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from app.authorize import hotpath as fastpath
from app.config import Settings
from app.edge import connection as protocol
from app.edge.connection import HIGH_WATER as HIGH_WATER_LIMIT
from app.edge.connection import HttpProtocol
from app.log import decision_log
from app.log.decision_log import RecordingFailed
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.uvicorn_wire import Recording, answered, connect, responses

READER = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}


def _request(body: bytes, *, path: str = "/v1/authorize-tool", method: str = "POST",
             extra: str = "") -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: toolgate\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n")
    return head.encode() + body


@pytest.fixture
def settings(database_url):
    """Memory answers only within the registry's ttl (1 s by default): on a loaded machine
    more than that can pass between a plan's first decision and a test's next request,
    which then (rightly) goes to the ASGI app. These tests are about which way a request
    takes when memory can answer, so memory stays fresh for their length."""
    return Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                    registry_ttl_seconds=300)


@pytest.fixture
async def plan(client):
    await client.put("/v1/actions/act-1", json={"project": "web"})
    r = await client.post("/v1/plans", json={"action_id": "act-1", "plan_id": "p-1"})
    assert r.status_code == 201
    body = orjson.dumps({"plan_id": "p-1", "tool": READER})
    # The plan's lock is cached by its first decision; from then on memory answers.
    await _serve(client.app, _request(body), 1)
    return body


@pytest.fixture
def tasks(monkeypatch):
    """The paths of the ASGI tasks started (by our protocol, or uvicorn's own)."""
    started = []

    def counting(original):
        def start(self, cycle, app):
            started.append(cycle.scope["path"])
            original(self, cycle, app)
        return start

    monkeypatch.setattr(HttpProtocol, "_start", counting(HttpProtocol._start))
    monkeypatch.setattr(HttpToolsProtocol, "_start_asgi_task",
                        counting(HttpToolsProtocol._start_asgi_task))
    return started


async def _serve(app, data: bytes, answers: int, protocol_class=HttpProtocol,
                 transport: Recording | None = None) -> Recording:
    transport = transport or Recording()
    connect(app, protocol_class, transport).data_received(data)
    await answered(transport, answers)
    return transport


async def test_the_protocol_finds_the_hot_route_through_the_app(client):
    from app.authorize import pipeline

    fast, edge = protocol.served(client.app)
    assert fast is client.app.fast_path and edge is client.app.edge
    assert fast.path == fastpath.PATH.encode() == pipeline.PATH.encode()


async def test_a_known_plan_is_answered_without_an_asgi_task_as_uvicorn_would(
        client, plan, tasks):
    state = ServerState()  # what uvicorn's server puts on every answer
    state.default_headers = [(b"date", b"Tue, 01 Dec 2026 07:00:00 GMT"), (b"server", b"uvicorn")]
    ours = Recording()
    proto = connect(client.app, HttpProtocol, ours, server_state=state)
    for count in (1, 2):  # one after the other on one kept-alive connection
        proto.data_received(_request(plan))
        await answered(ours, count)
    assert tasks == []
    stock = Recording()
    connect(client.app, HttpToolsProtocol, stock, server_state=state).data_received(
        _request(plan))
    await answered(stock, 1)
    assert tasks == ["/v1/authorize-tool"]
    [(status, headers, body), second] = responses(b"".join(ours.writes))
    [(stock_status, stock_headers, stock_body)] = responses(b"".join(stock.writes))
    assert status == stock_status == 200 and second[0] == 200
    # X-Request-ID on both, generated (none was sent): each its own
    assert headers.pop("x-request-id") and stock_headers.pop("x-request-id")
    assert headers == stock_headers  # date, server, content-type, content-length
    decision, expected = orjson.loads(body), orjson.loads(stock_body)
    assert decision["decision_id"] != expected["decision_id"]
    assert {**decision, "decision_id": None} == {**expected, "decision_id": None}
    assert len(ours.writes) == 2 and ours.closed_after is None  # one write each, kept alive
    found = await client.get("/v1/decisions", params={"plan_id": "p-1"})
    ids = {item["decision_id"] for item in found.json()["items"]}
    assert decision["decision_id"] in ids and orjson.loads(second[2])["decision_id"] in ids
    # uvicorn sets a new list of default headers when the second changes: the next answer
    # carries the new date (the hot route formats each list once).
    state.default_headers = [(b"date", b"Tue, 01 Dec 2026 07:00:01 GMT"), (b"server", b"uvicorn")]
    proto.data_received(_request(plan))
    await answered(ours, 3)
    [*_, (status, headers, _)] = responses(b"".join(ours.writes))
    assert status == 200 and headers["date"] == "Tue, 01 Dec 2026 07:00:01 GMT"


async def test_connection_close_is_answered_then_closed(client, plan, tasks):
    transport = await _serve(client.app, _request(plan, extra="Connection: close\r\n"), 1)
    [(status, headers, body)] = responses(b"".join(transport.writes))
    assert status == 200 and orjson.loads(body)["allowed"] is True
    assert headers["connection"] == "close"
    assert transport.closed_after == len(transport.writes) == 1
    assert tasks == []


async def test_pipelined_requests_are_answered_in_order(client, plan, tasks):
    """The second and third arrive while the first waits for its commit: uvicorn queues
    them, and they are answered after it, whatever route they are for."""
    health = b"GET /healthz HTTP/1.1\r\nHost: toolgate\r\n\r\n"
    transport = await _serve(client.app, _request(plan) + _request(plan) + health, 3)
    answers = responses(b"".join(transport.writes))
    assert [status for status, _, _ in answers] == [200, 200, 200]
    assert [orjson.loads(body).get("allowed") for _, _, body in answers] == [True, True, None]
    assert orjson.loads(answers[2][2])["status"] == "ok"
    assert tasks == ["/v1/authorize-tool", "/healthz"]  # the queued ones, as uvicorn runs them
    # One that needs no commit, queued behind one that does, still comes second.
    transport = await _serve(client.app, _request(plan) + health, 2)
    assert [orjson.loads(body).get("allowed") for _, _, body in
            responses(b"".join(transport.writes))] == [True, None]


async def test_a_body_past_the_flow_control_mark_goes_to_the_asgi_app(client, plan, tasks):
    big = orjson.dumps({"plan_id": "p-1", "tool": {**READER, "args": {
        "content": "x" * (2 * HIGH_WATER_LIMIT)}}})
    transport = Recording()
    proto = connect(client.app, HttpProtocol, transport)
    data = _request(big)
    for start in range(0, len(data), 16384):  # as the socket delivers it
        proto.data_received(data[start:start + 16384])
        await asyncio.sleep(0)
    await answered(transport, 1)
    [(status, _, body)] = responses(b"".join(transport.writes))
    assert status == 200 and orjson.loads(body)["allowed"] is True
    assert tasks == ["/v1/authorize-tool"]


async def test_expect_100_continue_is_honoured(client, plan):
    transport = await _serve(client.app, _request(plan, extra="Expect: 100-continue\r\n"), 2)
    data = b"".join(transport.writes)
    assert data.startswith(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n")


async def test_what_memory_cannot_answer_gets_the_asgi_apps_answer(client, plan, tasks):
    unknown = orjson.dumps({"plan_id": "no-such-plan", "tool": READER})
    not_json = b"{"
    transport = await _serve(client.app, _request(unknown) + _request(not_json), 2)
    (status, _, body), (then, _, error) = responses(b"".join(transport.writes))
    assert status == 404 and orjson.loads(body)["error"]["code"] == "not_found"
    assert then == 422 and orjson.loads(error)["error"]["code"] == "invalid_json"
    assert len(tasks) == 2


async def test_a_decision_that_cannot_be_recorded_is_a_503_and_never_an_allow(
        client, plan, monkeypatch):
    loop = asyncio.get_running_loop()

    def failing(records, done):  # the writer refuses the frame, as when its database is down
        loop.call_soon(done, None, RecordingFailed("database is down"))
        return True

    # The recorder main.py handed to the transport (the decision log's submit).
    monkeypatch.setattr(client.app.fast_path, "submit", failing)
    transport = Recording()
    proto = connect(client.app, HttpProtocol, transport)
    proto.data_received(_request(plan))
    await answered(transport, 1)
    [(status, headers, body)] = responses(b"".join(transport.writes))
    error = orjson.loads(body)["error"]
    assert status == 503 and error["code"] == "decision_not_recorded"
    assert "database is down" in error["message"] and "allowed" not in orjson.loads(body)
    assert headers["content-type"] == "application/json"
    monkeypatch.undo()
    proto.data_received(_request(plan))  # the connection goes on
    await answered(transport, 2)
    assert [s for s, _, _ in responses(b"".join(transport.writes))] == [503, 200]


async def test_a_client_gone_before_the_commit_gets_nothing_and_its_decision_is_kept(
        client, plan):
    transport = Recording()
    proto = connect(client.app, HttpProtocol, transport)
    proto.data_received(_request(plan))
    proto.connection_lost(None)  # Recording fails any write after the close
    found: list = []
    for _ in range(600):  # until the decision is committed (at most 30 s), not a fixed sleep
        found = (await client.get("/v1/decisions", params={"plan_id": "p-1",
                                                           "kind": "authorize"})).json()["items"]
        if len(found) == 2:  # the fixture's, and this one
            break
        await asyncio.sleep(0.05)
    assert len(found) == 2
    assert transport.writes == []  # committed, and nothing written to the gone client


async def test_a_shutdown_while_a_decision_is_pending_answers_it_then_closes(client, plan):
    transport = Recording()
    proto = connect(client.app, HttpProtocol, transport)
    proto.data_received(_request(plan))
    proto.shutdown()  # uvicorn's graceful shutdown: finish the response, then close
    await answered(transport, 1)
    [(status, headers, _)] = responses(b"".join(transport.writes))
    assert status == 200 and headers["connection"] == "close"
    assert transport.closed_after == 1


@asynccontextmanager
async def _app(settings, **changes):
    app = create_app(settings.model_copy(update=changes))
    async with app.router.lifespan_context(app):
        yield app


async def test_each_request_spends_one_rate_limit_token_whichever_way_it_is_answered(
        client, plan, settings):
    async with _app(settings, rate_limit_per_second=0.001, rate_limit_burst=3) as app:
        unregistered = orjson.dumps({"plan_id": "p-1", "tool": {"name": "fs.read"}})
        # The lock is read through the ASGI app (a token); then memory answers, but the
        # tool lacks its capability, which the ASGI app reports (no second token).
        transport = Recording()
        proto = connect(app, HttpProtocol, transport)
        for count, body in enumerate((plan, unregistered, plan, plan), start=1):
            proto.data_received(_request(body))
            await answered(transport, count)
    statuses = [status for status, _, _ in responses(b"".join(transport.writes))]
    assert statuses == [200, 422, 200, 429]


async def test_any_other_app_is_served_as_uvicorn_serves_it():
    async def bare(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b'{"ok":true}'})

    data = _request(b"{}") + _request(b"{}")
    ours = await _serve(bare, data, 2)
    stock = await _serve(bare, data, 2, HttpToolsProtocol)

    def without_date(writes):  # (ours writes a head with its body's first part: one write)
        return b"\r\n".join(line for line in b"".join(writes).split(b"\r\n")
                             if not line.startswith(b"date:"))

    assert without_date(ours.writes) == without_date(stock.writes)
    assert len(ours.writes) == 2 and len(stock.writes) == 4


async def test_with_the_fast_path_off_every_request_goes_to_the_asgi_app(
        client, plan, settings, tasks):
    async with _app(settings, fast_path=False) as app:
        transport = await _serve(app, _request(plan), 1)
    [(status, _, body)] = responses(b"".join(transport.writes))
    assert status == 200 and orjson.loads(body)["allowed"] is True  # the same database
    assert tasks == ["/v1/authorize-tool"]


async def test_with_the_log_off_a_pipelined_request_is_not_cut_by_the_keep_alive_timer(
        client, plan, settings):
    """An answer given without waiting for a commit still completes on a later loop turn,
    as an ASGI task's would: the request pipelined behind it is queued, and uvicorn's
    keep-alive timer is not running while that one is served."""
    slow = orjson.dumps({"plan_id": "no-such-plan", "tool": READER})  # read from the database
    async with _app(settings, decision_log_enabled=False) as app:
        await _serve(app, _request(plan), 1)  # this app's plan cache now holds the lock
        transport = Recording()
        proto = connect(app, HttpProtocol, transport, timeout_keep_alive=0.001)
        proto.data_received(_request(plan) + _request(slow))
        assert proto._phase == protocol.WAIT  # no deadline of ours while it waits
        await answered(transport, 2)
    assert [s for s, _, _ in responses(b"".join(transport.writes))] == [200, 404]


async def test_a_shutdown_right_after_the_commit_still_sends_the_answer(
        client, plan, monkeypatch):
    """Between the acknowledgement that released an answer and the outbox's flush that
    writes it, uvicorn's main loop may shut the connection down: the recorded decision's
    answer still goes out, then the connection closes."""
    transport = Recording()
    proto = connect(client.app, HttpProtocol, transport)
    release = decision_log._call

    def then_shut_down(waiters, number, error):
        release(waiters, number, error)
        proto.shutdown()

    monkeypatch.setattr(decision_log, "_call", then_shut_down)
    proto.data_received(_request(plan))
    await answered(transport, 1)
    [(status, headers, _)] = responses(b"".join(transport.writes))
    assert status == 200 and transport.closed_after == 1


async def test_a_declared_body_past_the_limit_is_refused_before_it_is_read(client, plan):
    head = _request(b"")[:-2].replace(b"Content-Length: 0", b"Content-Length: 5000000")
    transport = await _serve(client.app, head + b"\r\n{", 1)
    [(status, _, body)] = responses(b"".join(transport.writes))
    assert status == 413 and orjson.loads(body)["error"]["code"] == "payload_too_large"


async def test_uvicorns_concurrency_limit_still_applies(client, plan):
    transport = Recording()
    connect(client.app, HttpProtocol, transport,
            limit_concurrency=1).data_received(_request(plan))
    await answered(transport, 1)
    assert [s for s, _, _ in responses(b"".join(transport.writes))] == [503]


async def test_a_chunked_body_in_small_pieces_and_http_1_0(client, plan, tasks):
    chunked = (_request(b"").replace(b"Content-Length: 0\r\n",
                                     b"Transfer-Encoding: chunked\r\n")
               + b"%x\r\n%s\r\n0\r\n\r\n" % (len(plan), plan))
    transport = Recording()
    proto = connect(client.app, HttpProtocol, transport)
    for start in range(0, len(chunked), 7):
        proto.data_received(chunked[start:start + 7])
    await answered(transport, 1)
    old = await _serve(client.app, _request(plan).replace(b"HTTP/1.1", b"HTTP/1.0"), 1)
    [(status, _, _)] = responses(b"".join(transport.writes))
    [(old_status, old_headers, _)] = responses(b"".join(old.writes))
    assert status == old_status == 200 and old_headers["connection"] == "close"
    assert old.closed_after == 1 and tasks == []
