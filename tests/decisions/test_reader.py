"""The SQLite log reader (app/decisions/reader.py) answers GET /v1/decisions and
/v1/decisions/{id} exactly as the session's queries do, for every filter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest

from app.decisions import queries, reader
from app.decisions.queries import Filters
from tests.decisions.test_rollups import _fill

NOW = datetime.now(UTC)


async def test_pages_and_records_are_the_sessions(client):
    if not client.app.state.settings.is_sqlite:
        pytest.skip("the reader is SQLite's; Postgres reads through the session")
    sessions = client.app.state.sessions
    await _fill(sessions, 300)
    log = client.app.state.log_reader
    assert isinstance(log, reader.SQLiteReader)
    cases = [Filters(), Filters(project="ops"), Filters(plan_id="p-1", allowed=False),
             Filters(code="unsafe_tool"), Filters(error="ToolSafetyViolationError"),
             Filters(tool="tool-3", since=NOW - timedelta(hours=10), until=NOW),
             Filters(kind="config"), Filters(kind="authorize", allowed=True),
             Filters(projects=["web"]), Filters(projects=[]), Filters(action_id="none")]
    for filters in cases:
        for before in (None, 150):
            async with sessions() as session:
                want = [queries.to_record(r) for r in await queries.page(
                    session, filters, before_seq=before, limit=40)]
            got = [queries.to_record(r) for r in await log.page(
                filters, before_seq=before, limit=40)]
            assert [(r["seq"], r["created_at"], r["allowed"]) for r in got] == \
                [(r["seq"], r["created_at"], r["allowed"]) for r in want], filters
            assert orjson.dumps(got) == orjson.dumps(want)
    one = await log.get("d-7")
    async with sessions() as session:
        want = queries.to_record(await queries.get(session, "d-7"))
    assert orjson.dumps(queries.to_record(one)) == orjson.dumps(want)
    assert await log.get("nope") is None


async def test_http_reads_through_the_reader(client):
    await _fill(client.app.state.sessions, 50)
    page = (await client.get("/v1/decisions", params={"limit": 5, "project": "ops"})).json()
    assert len(page["items"]) == 5 and {i["project"] for i in page["items"]} == {"ops"}
    nxt = (await client.get("/v1/decisions", params={"limit": 5, "project": "ops",
                                                     "cursor": page["next_cursor"]})).json()
    assert nxt["items"][0]["seq"] < page["items"][-1]["seq"]
    one = (await client.get("/v1/decisions/d-4")).json()
    assert one["decision_id"] == "d-4" and one["project"] == "ops"
    assert (await client.get("/v1/decisions/nope")).status_code == 404
