"""What toolgate's HTTP protocol (app/edge/connection.py, app/edge/cycle.py) must do for
every request it hands to the ASGI app, now that it no longer inherits uvicorn's protocol:
request bodies (chunked too), streamed answers, HEAD, keep-alive, pipelining in order,
100-continue, flow control, a client that goes away, graceful shutdown, what llhttp refuses
(request smuggling), upgrades, and an app that fails. Each against a small ASGI app over a
recording transport; where uvicorn's own protocol is the reference, the bytes are compared
with what it writes."""

from __future__ import annotations

import ast
import asyncio
import socket
from pathlib import Path

import pytest
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import Server, ServerState

from app.edge.connection import HIGH_WATER, HttpProtocol
from tests.uvicorn_wire import Recording, connect, responses
from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]


def _get(path: str = "/", method: str = "GET", extra: str = "", body: bytes = b"") -> bytes:
    length = f"Content-Length: {len(body)}\r\n" if body else ""
    return (f"{method} {path} HTTP/1.1\r\nHost: t\r\n{length}{extra}\r\n").encode() + body


async def echo(scope, receive, send):
    """Answers the request's body (read whole) with Content-Length."""
    body = b""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message["body"]
        if not message["more_body"]:
            break
    answer = b"%s %s %s" % (scope["method"].encode(), scope["path"].encode(), body)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})


async def _answers(transport: Recording, count: int) -> list:
    await until(lambda: len(responses(b"".join(transport.writes))) >= count,
                f"{count} answer(s)")
    return responses(b"".join(transport.writes))


def _without_date(data: bytes) -> bytes:
    return b"\r\n".join(line for line in data.split(b"\r\n") if not line.startswith(b"date:"))


# --- bodies in, answers out ---------------------------------------------------------------

async def test_a_chunked_request_body_in_small_pieces_reaches_the_app_whole():
    transport = Recording()
    proto = connect(echo, HttpProtocol, transport)
    data = (b"POST /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
    for start in range(0, len(data), 3):
        proto.data_received(data[start:start + 3])
    [(status, _, body)] = await _answers(transport, 1)
    assert status == 200 and body == b"POST /up hello world"


async def test_a_streamed_answer_is_chunked_and_its_head_is_not_held_back():
    release = asyncio.Event()

    async def events(scope, receive, send):  # an SSE-like route
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await release.wait()  # the first event is slow to come
        for n in range(3):
            await send({"type": "http.response.body", "body": b"data: %d\n\n" % n,
                        "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    transport = Recording()
    connect(events, HttpProtocol, transport).data_received(_get("/events"))
    await until(lambda: transport.writes, "the head")
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"transfer-encoding: chunked\r\n" in transport.writes[0]
    release.set()
    [(status, headers, body)] = await _answers(transport, 1)
    assert body == b"data: 0\n\ndata: 1\n\ndata: 2\n\n" and transport.closed_after is None


async def test_the_answers_are_the_bytes_uvicorns_own_protocol_writes():
    async def app(scope, receive, send):
        await receive()
        if scope["path"] == "/stream":
            await send({"type": "http.response.start", "status": 201, "headers": []})
            await send({"type": "http.response.body", "body": b"ab", "more_body": True})
            await send({"type": "http.response.body", "body": b"cd"})
            return
        await send({"type": "http.response.start", "status": 204 if scope["path"] == "/none"
                    else 200, "headers": [(b"x-a", b"1"), (b"content-length", b"2")]
                    if scope["path"] != "/none" else []})
        await send({"type": "http.response.body", "body": b"" if scope["path"] == "/none"
                    else b"ok"})

    data = (_get("/stream") + _get("/plain") + _get("/plain", method="HEAD")
            + _get("/none") + _get("/plain", extra="Connection: close\r\n"))
    state = ServerState()
    state.default_headers = [(b"date", b"Tue, 01 Dec 2026 07:00:00 GMT"), (b"server", b"x")]
    written = []
    for cls in (HttpProtocol, HttpToolsProtocol):
        transport = Recording()
        connect(app, cls, transport, server_state=state).data_received(data)
        await until(lambda t=transport: t.closed_after is not None, "the close")
        written.append(b"".join(transport.writes))
    ours, stock = written
    assert ours == stock and ours.count(b"HTTP/1.1 ") == 5


async def test_head_gets_the_headers_and_no_body():
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"5")]})
        await send({"type": "http.response.body", "body": b"hello"})

    transport = Recording()
    connect(app, HttpProtocol, transport).data_received(_get(method="HEAD"))
    await until(lambda: transport.writes, "the answer")
    assert b"".join(transport.writes).endswith(b"content-length: 5\r\n\r\n")


async def test_keep_alive_serves_the_next_request_on_the_same_connection():
    state = ServerState()
    transport = Recording()
    proto = connect(echo, HttpProtocol, transport, server_state=state)
    proto.data_received(_get("/one"))
    await _answers(transport, 1)
    proto.data_received(_get("/two", method="POST", body=b"x"))
    answers = await _answers(transport, 2)
    assert [body for _, _, body in answers] == [b"GET /one ", b"POST /two x"]
    assert transport.closed_after is None and state.total_requests == 2
    proto.data_received(_get("/three", extra="Connection: close\r\n"))
    [*_, (_, headers, _)] = await _answers(transport, 3)
    assert headers["connection"] == "close" and transport.closed_after == len(
        transport.writes)


async def test_pipelined_requests_are_answered_in_order_whatever_each_takes():
    async def app(scope, receive, send):
        await receive()
        if scope["path"] == "/slow":
            for _ in range(20):  # the next requests' tasks would be done by now
                await asyncio.sleep(0)
        body = scope["path"].encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_get("/slow") + _get("/a") + _get("/b"))
    assert proto.read_paused  # the socket waits while requests are queued
    answers = await _answers(transport, 3)
    assert [body for _, _, body in answers] == [b"/slow", b"/a", b"/b"]
    assert not proto.read_paused


@pytest.mark.parametrize("reads", [True, False])
async def test_100_continue_is_sent_only_when_the_app_reads_the_body(reads):
    async def app(scope, receive, send):
        if reads:
            await receive()
        await send({"type": "http.response.start", "status": 200 if reads else 413,
                    "headers": [(b"content-length", b"0")]})
        await send({"type": "http.response.body", "body": b""})

    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n"
                        b"Expect: 100-continue\r\n\r\n")
    await until(lambda: reads or transport.writes, "the answer")
    if reads:
        await until(lambda: transport.writes, "100 Continue")
        assert transport.writes[0] == b"HTTP/1.1 100 Continue\r\n\r\n"
        proto.data_received(b"abc")
        await until(lambda: len(transport.writes) == 2, "the answer")
        assert transport.writes[1].startswith(b"HTTP/1.1 200 OK\r\n")
    else:
        assert transport.writes[0].startswith(b"HTTP/1.1 413 ")
        assert b"100 Continue" not in b"".join(transport.writes)


async def test_a_body_past_the_flow_control_mark_pauses_the_socket_until_the_app_reads():
    read = asyncio.Event()
    got = []

    async def app(scope, receive, send):
        await read.wait()
        while True:
            message = await receive()
            got.append(len(message["body"]))
            if not message["more_body"]:
                break
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    size = 3 * HIGH_WATER
    proto.data_received(b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % size)
    proto.data_received(b"x" * (HIGH_WATER + 1))
    assert proto.read_paused
    read.set()
    await until(lambda: not proto.read_paused, "reading resumed")
    proto.data_received(b"x" * (size - HIGH_WATER - 1))
    await _answers(transport, 1)
    assert sum(got) == size


async def test_writes_wait_while_the_transport_is_paused():
    transport = Recording()
    proto = connect(echo, HttpProtocol, transport)
    proto.pause_writing()
    proto.data_received(_get("/w"))
    for _ in range(20):
        await asyncio.sleep(0)
    assert transport.writes == []
    proto.resume_writing()
    [(status, _, _)] = await _answers(transport, 1)
    assert status == 200


async def test_a_client_gone_mid_answer_ends_the_apps_stream_and_nothing_more_is_written():
    seen = []
    step = asyncio.Event()

    async def app(scope, receive, send):
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first", "more_body": True})
        await step.wait()
        seen.append(await receive())  # the client is gone by now
        await send({"type": "http.response.body", "body": b"never", "more_body": True})
        seen.append("sent")

    transport = Recording()  # fails any write after the close
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_get())
    await until(lambda: transport.writes, "the first part")
    transport.close()
    proto.connection_lost(None)
    step.set()
    await until(lambda: len(seen) == 2, "the app went on")
    assert seen == [{"type": "http.disconnect"}, "sent"] and b"never" not in b"".join(
        transport.writes)
    assert proto not in proto.connections


async def test_an_app_that_fails_before_answering_gets_a_500_and_the_connection_closes():
    async def app(scope, receive, send):
        raise RuntimeError("boom")

    transport = Recording()
    connect(app, HttpProtocol, transport).data_received(_get())
    [(status, headers, body)] = await _answers(transport, 1)
    assert status == 500 and body == b"Internal Server Error"
    assert headers["connection"] == "close"
    await until(lambda: transport.closed_after is not None, "the close")


# --- what llhttp refuses: 400 and close, the app never called ------------------------------

@pytest.mark.parametrize("head", [
    # Content-Length and Transfer-Encoding together: the classic smuggling request
    b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: t\r\n\r\n",
    # two different lengths
    b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\nabcd",
    # a space before the colon (a proxy may read another header than we do)
    b"POST / HTTP/1.1\r\nHost: t\r\nContent-Length : 4\r\n\r\nabcd",
    # a header name that is not a token
    b"GET / HTTP/1.1\r\nHost: t\r\nBad[name]: 1\r\n\r\n",
    # a transfer coding that does not end in chunked
    b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, identity\r\n\r\nabcd",
    # a chunk size that is not hex
    b"POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n",
    # a header line folded onto the next (obs-fold)
    b"GET / HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n folded\r\n\r\n",
], ids=["cl-and-te", "two-lengths", "space-before-colon", "bad-name", "te-not-chunked",
        "bad-chunk-size", "obs-fold"])
async def test_what_is_not_http_1_1_is_400_and_closed_before_the_app_sees_it(head):
    called = []

    async def app(scope, receive, send):
        called.append(scope["path"])
        await echo(scope, receive, send)

    transport = Recording()
    connect(app, HttpProtocol, transport).data_received(head)
    for _ in range(10):
        await asyncio.sleep(0)
    [(status, headers, body)] = responses(b"".join(transport.writes))
    assert status == 400 and headers["connection"] == "close"
    assert body == b"Invalid HTTP request received."
    assert transport.eof_after == 1 or transport.closed_after == 1
    assert "/smuggled" not in called


async def test_an_upgrade_is_answered_as_plain_http_then_the_connection_closes():
    transport = Recording()
    proto = connect(echo, HttpProtocol, transport)
    proto.data_received(b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\n"
                        b"Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
                        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n\x81\x05hello")
    [(status, headers, body)] = await _answers(transport, 1)
    assert status == 200 and body == b"GET /ws " and headers["connection"] == "close"
    proto.data_received(b"GET /after HTTP/1.1\r\n\r\n")  # not parsed: dropped
    assert len(responses(b"".join(transport.writes))) == 1


# --- shutdown ---------------------------------------------------------------------------

async def test_graceful_shutdown_answers_the_request_in_flight_then_closes():
    """A real uvicorn Server on our protocol, over a socket: told to exit while a request
    is being answered, it lets that answer out, closes, and returns."""
    started, release = asyncio.Event(), asyncio.Event()

    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            return
        await receive()
        started.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-length", b"4")]})
        await send({"type": "http.response.body", "body": b"done"})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = Server(Config(app, http=HttpProtocol, lifespan="off", log_level="warning",
                           timeout_graceful_shutdown=30))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    await until(lambda: server.started, "the server started")
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(_get("/slow"))
    await started.wait()
    server.should_exit = True
    connections = server.server_state.connections
    await until(lambda: connections and not any(c.cycle.keep_alive for c in connections),
                "the shutdown reached the connection")
    release.set()
    answer = await asyncio.wait_for(reader.read(), 30)  # to EOF: the server closed
    [(status, headers, body)] = responses(answer)
    assert status == 200 and body == b"done" and headers["connection"] == "close"
    await asyncio.wait_for(serving, 30)
    writer.close()


# --- what it is built on ----------------------------------------------------------------

def test_the_protocol_imports_nothing_of_uvicorn():
    """It is a plain asyncio.Protocol on httptools: no uvicorn module, private or not, so a
    uvicorn upgrade cannot change what it does (uvicorn only runs the socket)."""
    for name in ("connection.py", "cycle.py", "deadlines.py", "inline.py"):
        tree = ast.parse((ROOT / "app" / "edge" / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n.split(".")[0] == "uvicorn" for n in names), (name, names)
    assert HttpProtocol.__mro__[-2:] == (asyncio.BaseProtocol, object)
    assert not any(cls.__module__.startswith("uvicorn") for cls in HttpProtocol.__mro__)


def test_serve_runs_our_protocol_by_default_and_uvicorns_guarded_on_request():
    from app.cli.main import _http_protocol
    from app.config import Settings

    assert _http_protocol(Settings()) == "app.edge.connection:HttpProtocol"
    assert _http_protocol(Settings(http_protocol="uvicorn")) == "app.edge.guard:Guarded"
