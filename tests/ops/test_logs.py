"""Logs (SPEC §13): TOOLGATE_LOG_FORMAT=json gives one JSON object per line with the
request's id, the decision's, route, status and duration; TOOLGATE_ACCESS_LOG one line
per request on every way of serving; text lines carry the ids too."""

from __future__ import annotations

import io
import logging
import logging.config
from collections.abc import AsyncIterator, Iterator

import httpx
import orjson
import pytest

from app.config import Settings
from app.edge.logs import log_config
from app.main import create_app
from tests.conftest import ADMIN_HEADERS

ALLOW = {"tool": {"name": "reader", "capability": {
    "writes": False, "checkpointable": True, "unsafe": False}}}
LOGGERS = ("toolgate", "toolgate.access", "uvicorn", "uvicorn.error", "uvicorn.access")


@pytest.fixture
def configured() -> Iterator[None]:
    """log_config applied as uvicorn applies it, undone afterwards (other tests' caplog)."""
    saved = {name: (logging.getLogger(name).handlers[:], logging.getLogger(name).level,
                    logging.getLogger(name).propagate) for name in LOGGERS}
    yield
    for name, (handlers, level, propagate) in saved.items():
        logger = logging.getLogger(name)
        logger.handlers, logger.level, logger.propagate = handlers, level, propagate


def lines_of(stream: io.StringIO) -> list[str]:
    return [line for line in stream.getvalue().splitlines() if line.strip()]


def use(log_format: str) -> io.StringIO:
    logging.config.dictConfig(log_config(log_format, "info"))
    stream = io.StringIO()
    for handler in logging.getLogger("toolgate").handlers:
        handler.setStream(stream)  # type: ignore[attr-defined]
    return stream


@pytest.fixture(params=["protocol", "asgi"])
async def logged(request: pytest.FixtureRequest, database_url: str
                 ) -> AsyncIterator[httpx.AsyncClient]:
    from app.edge.connection import HttpProtocol
    from tests.uvicorn_wire import ProtocolTransport

    app = create_app(Settings(database_url=database_url, admin_token="test-admin-token",
                              access_log=True))
    async with app.router.lifespan_context(app):
        transport: httpx.AsyncBaseTransport = (
            ProtocolTransport(app, HttpProtocol) if request.param == "protocol"
            else httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://toolgate",
                                     headers=ADMIN_HEADERS) as c:
            yield c


async def test_json_access_lines(configured: None, logged: httpx.AsyncClient) -> None:
    stream = use("json")
    r = await logged.post("/v1/authorize-tool", json=ALLOW, headers={"X-Request-ID": "rq-7"})
    decision_id = r.json()["decision_id"]
    r = await logged.post("/v1/authorize-tool", json={"tool": {}})
    generated = r.headers["x-request-id"]
    await logged.get("/v1/profiles/none")
    records = [orjson.loads(line) for line in lines_of(stream)]  # every line is JSON
    access = [rec for rec in records if rec["logger"] == "toolgate.access"]
    assert len(access) == 3, records
    first, second, third = access
    for rec in access:
        assert {"time", "level", "message", "request_id", "decision_id", "route", "status",
                "duration_ms"} <= rec.keys()
        assert rec["level"] == "INFO" and rec["duration_ms"] >= 0
    assert first["request_id"] == "rq-7" and first["decision_id"] == decision_id
    assert (first["route"], first["status"], first["code"]) == ("/v1/authorize-tool", 200, None)
    assert second["request_id"] == generated and second["decision_id"] is None
    assert (second["status"], second["code"]) == (422, "invalid_input")
    assert (third["route"], third["status"], third["code"]) == (
        "/v1/profiles/{name}", 404, "not_found")


async def test_text_lines_carry_the_ids(configured: None, logged: httpx.AsyncClient) -> None:
    stream = use("text")
    await logged.post("/v1/authorize-tool", json=ALLOW, headers={"X-Request-ID": "rq-8"})
    (line,) = [line for line in lines_of(stream) if "toolgate.access" in line]
    assert "POST /v1/authorize-tool 200" in line and "request_id=rq-8" in line
    assert "decision_id=" in line and "duration_ms=" in line


async def test_no_access_line_unless_asked(configured: None, client: httpx.AsyncClient) -> None:
    stream = use("json")
    r = await client.post("/v1/authorize-tool", json=ALLOW)
    assert r.status_code == 200
    assert not [line for line in lines_of(stream) if "toolgate.access" in line]


def test_a_request_context_names_its_request(configured: None) -> None:
    from app.edge.logs import REQUEST_ID

    stream = use("json")
    token = REQUEST_ID.set("rq-9")
    try:
        logging.getLogger("toolgate").warning("storage unavailable: %s", "gone")
    finally:
        REQUEST_ID.reset(token)
    (record,) = [orjson.loads(line) for line in lines_of(stream)]
    assert record["request_id"] == "rq-9" and record["message"] == "storage unavailable: gone"
    assert record["level"] == "WARNING"
