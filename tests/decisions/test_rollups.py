"""/v1/decisions/stats reads whole past hours from hourly counts (app/decisions/rollups.py):
its answers are the log's own, whatever the range, grouping, bucket and key scope, before
and after a prune, on SQLite and Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, insert, select

from app.decisions import queries
from app.decisions.prune import prune
from app.decisions.queries import Filters
from app.log.tables import LogRecord, RolledHour

NOW = datetime.now(UTC)


async def _fill(sessions, n: int = 600) -> None:
    rows = []
    for i in range(n):
        denied = i % 3 == 0
        rows.append({
            "seq": i + 1, "decision_id": f"d-{i}", "kind": "authorize" if i % 50 else "config",
            # Three days back to now, not in seq order within an hour.
            "created_at": NOW - timedelta(minutes=(n - i) * 7 + (i % 5)),
            "project": [None, "ops", "web"][i % 3], "plan_id": f"p-{i % 4}",
            "tool": f"tool-{i % 7}", "allowed": None if i % 50 == 0 else not denied,
            "code": ("unsafe_tool" if i % 2 else "read_only") if denied else None,
            "error": "ToolSafetyViolationError" if denied else None,
            "detail": "{}", "prev_hash": "0" * 64, "hash": "0" * 64,
        })
    async with sessions() as session, session.begin():
        await session.execute(insert(LogRecord), rows)


def _norm(answer: dict) -> dict:
    answer = dict(answer)
    if "groups" in answer:
        answer["groups"] = sorted(answer["groups"], key=lambda g: (str(g["key"]), g["count"]))
    return answer


CASES = [
    {}, {"group_by": "code"}, {"group_by": "tool"}, {"group_by": "project"},
    {"group_by": "allowed"}, {"group_by": "kind"}, {"bucket": "hour"}, {"bucket": "day"},
    {"group_by": "code", "bucket": "hour"},
]


@pytest.mark.parametrize("case", CASES)
async def test_stats_from_the_counts_are_the_logs(client, case):
    sessions = client.app.state.sessions
    await _fill(sessions)
    ranges = [Filters(), Filters(since=NOW - timedelta(hours=30, minutes=17)),
              Filters(since=NOW - timedelta(days=2, minutes=5), until=NOW - timedelta(hours=3)),
              Filters(project="ops", since=NOW - timedelta(days=1)),
              Filters(tool="tool-3"), Filters(projects=["web"]), Filters(kind="authorize")]
    for filters in ranges:
        async with sessions() as session:
            rolled = await queries.stats(session, filters, sessions=sessions, **{
                "group_by": None, "bucket": None, **case})
            raw = await queries.stats(session, filters, **{
                "group_by": None, "bucket": None, **case})
        assert _norm(rolled) == _norm(raw), filters
    async with sessions() as session:
        hours = await session.scalar(select(func.count()).select_from(RolledHour))
    assert hours >= 60  # the counts were used, not only the log

    # A prune drops the counts it may have touched; answers stay the log's.
    await prune(sessions, NOW - timedelta(days=1, minutes=13))
    for filters in ranges:
        async with sessions() as session:
            rolled = await queries.stats(session, filters, sessions=sessions, **{
                "group_by": None, "bucket": None, **case})
            raw = await queries.stats(session, filters, **{
                "group_by": None, "bucket": None, **case})
        assert _norm(rolled) == _norm(raw), ("after prune", filters)


async def test_stats_over_http_use_the_counts(client):
    await _fill(client.app.state.sessions)
    since = (NOW - timedelta(days=2)).isoformat()
    r = await client.get("/v1/decisions/stats", params={"since": since, "group_by": "code",
                                                        "bucket": "hour"})
    assert r.status_code == 200
    body = r.json()
    async with client.app.state.sessions() as session:
        raw = await queries.stats(session, Filters(since=NOW - timedelta(days=2)),
                                  group_by="code", bucket="hour")
    assert body["total"] == raw["total"] and len(body["series"]) == len(raw["series"])


async def test_a_range_from_long_ago_counts_only_the_hours_the_log_spans(client):
    # The contract run asked since=2000-01-01: counting every hour since then (a quarter of a
    # million marks) took longer than the client would wait. The counts start at the oldest
    # record, and an empty log counts nothing.
    r = await client.get("/v1/decisions/stats", params={"since": "2000-01-01T00:00:00Z"})
    assert r.status_code == 200 and r.json()["total"]["count"] == 0
    await _fill(client.app.state.sessions)  # three days of records
    r = await client.get("/v1/decisions/stats", params={"since": "2000-01-01T00:00:00Z",
                                                        "group_by": "code"})
    assert r.status_code == 200
    async with client.app.state.sessions() as session:
        raw = await queries.stats(session, Filters(since=datetime(2000, 1, 1, tzinfo=UTC)),
                                  group_by="code", bucket=None)
        hours = await session.scalar(select(func.count()).select_from(RolledHour))
    assert r.json()["total"] == raw["total"]
    assert 60 <= hours <= 80  # ~70 hours of records, not 235,000 since 2000
