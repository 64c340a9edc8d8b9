"""The log readers (app/decisions/reader.py, SQLite and Postgres) answer GET /v1/decisions
and /v1/decisions/{id} exactly as the session's queries do, for every filter, outcomes
included; a failed read is a 503."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson

from app.decisions import queries, reader
from app.decisions.queries import Filters
from tests.decisions.test_rollups import _fill

NOW = datetime.now(UTC)


async def test_pages_and_records_are_the_sessions(client):
    sessions = client.app.state.sessions
    await _fill(sessions, 300)
    log = client.app.state.log_reader
    assert isinstance(log, reader.SQLiteReader if client.app.state.settings.is_sqlite
                      else reader.PostgresReader)
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


async def test_one_decision_and_its_outcome_as_the_session_reads_them(client):
    from app.ledger.tables import outcome_of
    from tests.ledger.helpers import authorize, call, plan_with, report

    plan = await plan_with(client)
    allowed = await authorize(client, call(plan, step_id="s1"))
    unreported = await authorize(client, call(plan))
    r = await report(client, allowed["decision_id"], {
        "status": "succeeded", "cost": 0.25, "verified": False,
        "artifacts": [{"path": "out/report.pdf", "sha256": "ab" * 32, "bytes": 2048},
                      {"path": "out/log.txt"}]})
    assert r.status_code == 201, r.text
    log = client.app.state.log_reader
    for decision_id in (allowed["decision_id"], unreported["decision_id"]):
        shown = (await client.get(f"/v1/decisions/{decision_id}")).json()
        async with client.app.state.sessions() as session:
            want = await outcome_of(session, decision_id)
        assert shown["outcome"] == want
        assert orjson.dumps(shown["outcome"]) == orjson.dumps(want)
    assert shown["outcome"] is None  # the unreported one
    reported = (await client.get(f"/v1/decisions/{allowed['decision_id']}")).json()
    assert reported["outcome"]["unverified"] is True
    assert reported["outcome"]["artifacts"][0]["bytes"] == 2048
    assert await log.get_with_outcome("no-such-decision") == (None, None)
    row, outcome = await log.get_with_outcome(allowed["decision_id"])
    assert row.decision_id == allowed["decision_id"] and outcome.status == "succeeded"


async def test_a_failed_read_is_a_503(client, tmp_path):
    app_state = client.app.state
    working = app_state.log_reader
    app_state.log_reader = (
        reader.SQLiteReader(str(tmp_path / "missing" / "toolgate.db"), 0.5)
        if app_state.settings.is_sqlite
        else reader.PostgresReader("postgresql://postgres@127.0.0.1:1/none", 0.5))
    try:
        for path in ("/v1/decisions", "/v1/decisions/d-1"):
            r = await client.get(path)
            assert r.status_code == 503, (path, r.text)
            assert r.json()["error"]["code"] == "storage_unavailable"
    finally:
        app_state.log_reader.close()
        app_state.log_reader = working
    assert (await client.get("/v1/decisions")).status_code == 200
