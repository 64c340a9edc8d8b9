"""The HTTP edge in `toolgate serve`'s protocol (app/edge/connection.py) and in the app
(app/edge/limits.py): head size (431), the header, body and keep-alive deadlines (408, close),
the connection cap (the connection waiting longest on its client closed, else 503), and an
answer given before the body was read (413) reaching a client that is still sending.

Deadlines are checked without waiting for them: a test moves the connection's `_since`
back and fires its timer (`_on_timer`), which is what the event loop would do later."""

from __future__ import annotations

import asyncio
import resource

import orjson
import pytest
from uvicorn.server import ServerState

from app.cli.main import _edge_options
from app.config import Settings
from app.edge import connection as protocol
from app.edge import deadlines
from app.edge.connection import HttpProtocol
from app.edge.errors import HeadersTooLarge
from app.edge.limits import EdgeLimits, check_head, connection_cap
from app.main import create_app
from tests.conftest import ADMIN_TOKEN
from tests.uvicorn_wire import Recording, answered, connect, responses
from tests.waiting import until

READER = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}
STATELESS = orjson.dumps({"tool": READER, "safety_profile": {}})


def _request(body: bytes = STATELESS, *, path: str = "/v1/authorize-tool",
             method: str = "POST", extra: str = "", length: int | None = None) -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: toolgate\r\n"
            f"Authorization: Bearer {ADMIN_TOKEN}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n{extra}\r\n")
    return head.encode() + body


def _error(transport: Recording) -> tuple[int, dict[str, str], dict]:
    [(status, headers, body)] = responses(b"".join(transport.writes))
    return status, headers, orjson.loads(body)["error"]


def _overdue(proto: HttpProtocol, seconds: float) -> None:
    """What the event loop does `seconds` after the connection's phase began."""
    proto._since -= seconds
    proto._on_timer()


@pytest.fixture
async def app(settings):
    app = create_app(settings.model_copy(update={"max_connections": 16}))
    async with app.router.lifespan_context(app):
        yield app


# --- head size: 431 ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", ["one large header", "too many headers", "a long target"])
async def test_a_head_past_the_limits_is_431_and_the_connection_closes(app, shape):
    extra = {"one large header": "X-Big: " + "a" * 20_000 + "\r\n",
             "too many headers": "".join(f"X-{n}: 1\r\n" for n in range(120)),
             "a long target": ""}[shape]
    path = "/v1/authorize-tool" + ("?" + "q" * 20_000 if shape == "a long target" else "")
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_request(extra=extra, path=path))
    status, headers, error = _error(transport)
    assert status == 431 and error["code"] == "headers_too_large"
    limit = 100 if shape == "too many headers" else 16 * 1024
    assert error["details"] == {"limit": limit} and str(limit) in error["message"]
    assert headers["connection"] == "close"
    # Closed the lingering way: our side shut after the answer, the rest dropped.
    assert transport.eof_after == 1 and transport.closed_after is None
    proto.data_received(b"x" * 1000)
    assert transport.closed_after is None and len(transport.writes) == 1


async def test_a_head_that_never_ends_is_refused_once_past_the_limit(app):
    """A header sent a little at a time, never finished: what the parser holds of it is
    bounded, not only what it has completed (1 MiB headers cost 203 MiB over 200
    requests, issue 22)."""
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(b"POST /v1/authorize-tool HTTP/1.1\r\nX-Big: ")
    sent = 0
    while not transport.writes and sent < 1_000_000:
        proto.data_received(b"a" * 4096)
        sent += 4096
    status, _, error = _error(transport)
    assert status == 431 and sent <= 16 * 1024 + 2 * 4096


async def test_the_head_limits_hold_in_the_app_under_any_server(client):
    """Under uvicorn's own protocol (or any ASGI server) the app refuses the head itself."""
    r = await client.get("/healthz", headers={"X-Big": "a" * 20_000})
    assert r.status_code == 431 and r.json()["error"]["code"] == "headers_too_large"
    r = await client.post("/v1/authorize-tool", content=STATELESS,
                          headers={f"X-{n}": "1" for n in range(101)})
    assert r.status_code == 431 and r.json()["error"]["details"] == {"limit": 100}
    assert (await client.post("/v1/authorize-tool", content=STATELESS)).status_code == 200


def test_the_head_is_counted_as_target_and_header_bytes():
    limits = EdgeLimits(max_header_bytes=1024, max_headers=8)
    scope = {"raw_path": b"/" + b"p" * 500, "query_string": b"q" * 400,
             "headers": [(b"a", b"b" * 100)]}
    check_head(scope, limits)  # 501 + 400 + 101 bytes
    scope["headers"].append((b"c", b"d" * 30))
    with pytest.raises(HeadersTooLarge):
        check_head(scope, limits)


# --- deadlines: 408 and close -------------------------------------------------------------

async def test_a_head_not_complete_within_its_deadline_is_408_and_closed(app):
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(b"POST /v1/authorize-tool HTTP/1.1\r\nHost: t")
    _overdue(proto, 9.9)
    assert transport.writes == [] and proto._timer is not None  # not yet: looks again
    proto._timer.cancel()
    _overdue(proto, 0.2)
    status, headers, error = _error(transport)
    assert status == 408 and error["code"] == "request_timeout"
    assert "headers" in error["message"] and headers["connection"] == "close"
    assert transport.closed_after == 1


async def test_a_body_not_complete_within_its_deadline_is_408_and_closed(app, tasks):
    for path in ("/v1/authorize-tool", "/v1/plans"):  # the hot route's cycle, an ASGI task
        transport = Recording()
        proto = connect(app, HttpProtocol, transport)
        proto.data_received(_request(b'{"tool": ', path=path, length=100))
        await asyncio.sleep(0.01)
        _overdue(proto, 30.1)
        status, _, error = _error(transport)
        assert status == 408 and "body" in error["message"]
        assert transport.closed_after == 1
    # The ASGI task sees the client go and ends, writing nothing more (Recording refuses
    # a write after close).
    await until(lambda: not proto.tasks, "the ASGI task ended")
    assert tasks == ["/v1/plans"]


async def test_a_connection_that_sends_nothing_or_stays_idle_is_closed(app):
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    _overdue(proto, 5.1)  # a new connection that never sent a byte
    assert transport.closed_after == 0
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_request())
    await answered(transport, 1)
    assert proto._phase == protocol.IDLE and transport.closed_after is None
    _overdue(proto, 5.1)  # the keep-alive wait after an answer
    assert transport.closed_after == 1


async def test_a_request_waiting_for_its_answer_has_no_deadline_of_ours(app, monkeypatch):
    release = asyncio.Event()

    async def commit(records):  # the decision's commit, acknowledged when we say so
        await release.wait()

    monkeypatch.setattr(app.fast_path, "write", commit)
    monkeypatch.setattr(app.fast_path, "submit", lambda records, done: False)
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_request())
    await until(lambda: proto._phase == protocol.WAIT, "the request waits for its answer")
    _overdue(proto, 3600)
    assert transport.closed_after is None and transport.writes == []
    release.set()
    await answered(transport, 1)
    assert [s for s, _, _ in responses(b"".join(transport.writes))] == [200]
    assert proto._phase == protocol.IDLE
    proto._timer.cancel()


# --- the connection cap ------------------------------------------------------------------

async def test_at_the_cap_the_connection_waiting_longest_on_its_client_makes_room(app):
    state = ServerState()
    slow = []
    for n in range(16):  # slow clients: a head begun, never finished
        transport = Recording()
        proto = connect(app, HttpProtocol, transport, server_state=state)
        proto.data_received(b"POST /v1/authorize-tool HTTP/1.1\r\nX: ")
        proto._since -= 100 - n  # the first is the oldest
        slow.append((proto, transport))
    assert len(state.connections) == 16
    transport = Recording()
    connect(app, HttpProtocol, transport, server_state=state).data_received(
        _request())
    await answered(transport, 1)
    [(status, _, body)] = responses(b"".join(transport.writes))
    assert status == 200 and orjson.loads(body)["allowed"] is True
    oldest, oldest_transport = slow[0]
    status, headers, error = _error(oldest_transport)
    assert status == 503 and headers["retry-after"] == "1"
    assert oldest_transport.closed_after == 1 and oldest not in state.connections
    assert all(t.closed_after is None for _, t in slow[1:])
    for proto, _ in slow:
        proto._timer.cancel()


async def test_past_the_cap_with_every_connection_busy_a_new_one_gets_503(app):
    state = ServerState()
    busy = []
    for _ in range(16):
        proto = connect(app, HttpProtocol, Recording(), server_state=state)
        proto._phase = protocol.WAIT  # each waits for an answer of ours
        busy.append(proto)
    transport = Recording()
    refused = connect(app, HttpProtocol, transport, server_state=state)
    status, headers, error = _error(transport)
    assert status == 503 and error["code"] == "unavailable" and "16" in error["message"]
    assert headers["connection"] == "close" and headers["retry-after"] == "1"
    assert refused not in state.connections and len(state.connections) == 16
    # Our side is shut; what the client sends meanwhile is dropped, then it closes.
    assert transport.eof_after == 1 and transport.closed_after is None
    refused.data_received(_request())
    assert len(transport.writes) == 1
    _overdue(refused, 1.1)
    assert transport.closed_after == 1
    refused.connection_lost(None)
    assert deadlines._refusals[0] == 0
    for proto in busy:
        proto._timer.cancel()


def test_the_cap_fits_the_open_file_limit():
    settings = Settings(max_connections=2048, db_pool_size=10)
    assert connection_cap(settings, open_files=1 << 20) == 2048
    fitted = connection_cap(settings, open_files=1024)
    assert fitted + fitted // 16 + 64 + 20 <= 1024 and fitted > 800


def test_serve_gives_uvicorns_own_protocol_the_cap_and_both_the_keep_alive_wait():
    plugin = _edge_options(Settings(keep_alive_seconds=7))
    assert plugin["timeout_keep_alive"] == 7 and "limit_concurrency" not in plugin
    plain = _edge_options(Settings(http_protocol="uvicorn", max_connections=300))
    assert plain["http"] == "app.edge.guard:Guarded" and plain["timeout_keep_alive"] == 5
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert plain["limit_concurrency"] == min(300, connection_cap(Settings(), soft))


def test_any_other_app_gets_the_settings_defaults():
    """Any other app served on toolgate's protocol gets the same limits as toolgate's
    defaults."""
    async def bare(scope, receive, send):
        pass

    fast, limits = protocol.served(bare)
    defaults = EdgeLimits.from_settings(Settings())
    assert fast is None
    for name in EdgeLimits.__dataclass_fields__:
        if name != "max_connections":  # fitted to the open-file limit
            assert getattr(limits, name) == getattr(defaults, name), name
    assert limits.max_connections == Settings().max_connections


# --- an answer before the body: 413 that the client reads ----------------------------------

@pytest.mark.parametrize("path", ["/v1/authorize-tool", "/v1/plans"])
async def test_a_413_to_a_client_still_sending_is_followed_by_a_lingering_close(app, path):
    """`Connection: close` and 2 MiB declared: answered 413 before the body is read. The
    connection used to close at once, and the kernel reset it under a client still
    sending (which then never read the 413, issue 22): now our side is shut after the
    answer and the body is read and dropped until the client closes."""
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    size = 2 * 1024 * 1024
    proto.data_received(_request(b"", path=path, length=size, extra="Connection: close\r\n"))
    await answered(transport, 1)
    status, _, error = _error(transport)
    assert status == 413 and error["code"] == "payload_too_large"
    written = len(transport.writes)  # (the status line and headers, then the body)
    assert transport.closed_after is None and transport.eof_after == written
    for _ in range(size // 65536):  # the client goes on sending; all of it is dropped
        proto.data_received(b"x" * 65536)
    assert transport.closed_after is None and len(transport.writes) == written
    proto.eof_received()  # then it closes: so do we (asyncio closes at eof_received)


async def test_a_413_on_a_kept_alive_connection_drains_the_body_then_serves_the_next(app):
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    size = 2 * 1024 * 1024
    proto.data_received(_request(b"", length=size))
    await answered(transport, 1)
    assert proto._phase == protocol.BODY
    for _ in range(size // 65536):
        proto.data_received(b"x" * 65536)
    assert proto._phase == protocol.IDLE and transport.eof_after is None
    proto.data_received(_request())
    await answered(transport, 2)
    assert [s for s, _, _ in responses(b"".join(transport.writes))] == [413, 200]


async def test_draining_is_bounded_in_bytes_and_in_time(app):
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_request(b"", length=100 * 1024 * 1024))  # 100 MiB declared
    await answered(transport, 1)
    sent = 0
    while transport.eof_after is None and sent < 20 * 1024 * 1024:
        proto.data_received(b"x" * 65536)
        sent += 65536
    assert sent <= 4 * 1024 * 1024 + 65536  # drain_max_bytes: then it lingers, shut
    while transport.closed_after is None and sent < 20 * 1024 * 1024:
        proto.data_received(b"x" * 65536)
        sent += 65536
    assert sent <= 8 * 1024 * 1024 + 2 * 65536  # and lingers for as many bytes at most
    # A client that stops sending but does not close: closed after drain_seconds.
    transport = Recording()
    proto = connect(app, HttpProtocol, transport)
    proto.data_received(_request(b"", length=100 * 1024 * 1024, extra="Connection: close\r\n"))
    await answered(transport, 1)
    assert transport.eof_after == len(transport.writes) and transport.closed_after is None
    _overdue(proto, 5.1)
    assert transport.closed_after == len(transport.writes)


@pytest.fixture
def tasks(monkeypatch):
    """The paths of the ASGI tasks the protocol started."""
    started = []
    original = HttpProtocol._start

    def counting(self, cycle, app):
        started.append(cycle.scope["path"])
        original(self, cycle, app)

    monkeypatch.setattr(HttpProtocol, "_start", counting)
    return started
