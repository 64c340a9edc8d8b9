"""The ledger's own reader (app/ledger/reader.py), on SQLite and Postgres: the totals checks
7 and 8 read agree with the session's, see what another process committed on the very next
call (no cache, so no replica decides on totals older than the last report), and a read
that fails answers 503 storage_unavailable, never an allow."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.ledger.reader import PostgresKnown, SQLiteKnown
from app.ledger.service import Ledger
from tests.ledger.helpers import authorize, call, plan_with, report


async def test_the_reader_agrees_with_the_session(client):
    ledger: Ledger = client.app.state.ledger
    assert ledger.reader is not None  # a file or a server: the fast read is on
    plan = await plan_with(client, max_cost_per_plan=50, max_retries_per_step=5)
    paid = await authorize(client, call(plan, step_id="build"))
    r = await report(client, paid["decision_id"], {"status": "execution_failed", "cost": 1.5})
    assert r.status_code == 201, r.text
    await authorize(client, call(plan, estimated_cost=2))  # held
    by_session = Ledger(ledger.sessions)  # no reader: the ORM path
    for step in (None, "build", "never-ran"):
        fast = await ledger.known(plan_id=plan, project="ops", step_id=step)
        assert fast == await by_session.known(plan_id=plan, project="ops", step_id=step)
    fast = await ledger.known(plan_id=plan, project="ops", step_id="build")
    assert (fast.plan, fast.project, fast.step_failures) == (3.5, 3.5, 1)
    unknown = await ledger.known(plan_id="no-such-plan", project="nobody", step_id=None)
    assert (unknown.plan, unknown.project, unknown.step_failures) == (0.0, 0.0, None)


async def test_what_another_process_committed_counts_on_the_next_call(client, settings):
    plan = await plan_with(client, max_cost_per_plan=5)
    assert (await authorize(client, call(plan, estimated_cost=1)))["allowed"] is True  # held
    assert (await authorize(client, call(plan)))["allowed"] is True
    # Another replica books a report: its own engine, its own connection, committed.
    other = create_async_engine(settings.database_url)
    try:
        async with other.begin() as conn:
            await conn.execute(text("UPDATE ledger_plans SET spent = 4 WHERE plan_id = :p"),
                               {"p": plan})
    finally:
        await other.dispose()
    denied = await authorize(client, call(plan, accumulated_cost=0))
    assert denied["deny"]["code"] == "plan_cost_limit_exceeded"


async def test_a_failed_read_is_a_503_never_an_allow(both_paths, settings, tmp_path):
    """On every way the hot route is served: on SQLite the read runs inside the protocol's
    own route, which must hand the failure to the app to render."""
    client = both_paths
    plan = await plan_with(client, max_cost_per_plan=5)
    ledger: Ledger = client.app.state.ledger
    working = ledger.reader
    ledger.reader = (SQLiteKnown(str(tmp_path / "missing" / "toolgate.db"), 0.5)
                     if settings.is_sqlite else
                     PostgresKnown("postgresql://postgres@127.0.0.1:1/none", timeout=0.5))
    try:
        before = (await client.get("/v1/decisions?kind=authorize")).json()["items"]
        r = await client.post("/v1/authorize-tool", json=call(plan))
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] == "storage_unavailable"
        assert (await client.get("/v1/decisions?kind=authorize")).json()["items"] == before
    finally:
        await ledger.reader.close()
        ledger.reader = working
    assert (await authorize(client, call(plan)))["allowed"] is True


async def test_concurrent_reads_each_get_their_own_totals(client):
    """Many calls at once over several plans (Postgres batches them into few statements):
    every call gets its own plan's, project's and step's totals."""
    import asyncio

    ledger: Ledger = client.app.state.ledger
    plans = []
    for i in range(5):
        plan = await plan_with(client, project=f"team{i}", max_cost_per_plan=100,
                               max_retries_per_step=9)
        for _ in range(i):
            d = await authorize(client, call(plan, step_id="s"))
            r = await report(client, d["decision_id"], {"status": "execution_failed",
                                                        "cost": 1})
            assert r.status_code == 201, r.text
        plans.append(plan)
    statements = getattr(ledger.reader, "statements", None)
    reads = [(i, plan, step) for _ in range(10) for i, plan in enumerate(plans)
             for step in ("s", None)]
    found = await asyncio.gather(*(ledger.known(plan_id=plan, project=f"team{i}",
                                                step_id=step) for i, plan, step in reads))
    for (i, _, step), known in zip(reads, found, strict=True):
        assert (known.plan, known.project) == (float(i), float(i))
        assert known.step_failures == (i if step else None)
    if statements is not None:  # Postgres: batched
        assert ledger.reader.statements - statements < len(reads) / 2
