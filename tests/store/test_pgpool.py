"""The suite's reused Postgres databases (tests/pgpool.py) are as good as a new copy of the
template: every row a test wrote is gone, the migrations' seed rows and sequences are back,
the old name leads nowhere, and a database whose schema a test changed is dropped."""

from __future__ import annotations

import asyncio
import threading

import asyncpg
import pytest

from tests.conftest import ADMIN_TOKEN, app_client
from tests.pgpool import FINGERPRINT, Pool


def _dsn(pool: Pool, name: str) -> str:
    return pool.dsn_of(name)


async def _snapshot(dsn: str) -> tuple[str, dict[str, str]]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        tables = [r[0] for r in await conn.fetch(
            "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables "
            "WHERE schemaname = 'public' ORDER BY 1")]
        rows = {t: await conn.fetchval(f"SELECT coalesce(json_agg(x ORDER BY x::text)::text, "
                                       f"'') FROM {t} x") for t in tables}
        sequences = await conn.fetchval("SELECT json_agg(s ORDER BY sequencename)::text "
                                        "FROM pg_sequences s")
        rows["(sequences)"] = sequences
        return await conn.fetchval(FINGERPRINT), rows
    finally:
        await conn.close()


async def _use(url: str) -> None:
    """Rows in many tables, as a test leaves them: a key, a plan, decisions, an outcome."""
    from app.config import Settings

    async with app_client(Settings(database_url=url, admin_token=ADMIN_TOKEN)) as client:
        assert (await client.put("/v1/actions/deploy", json={"project": "web"})).status_code \
            in (200, 201)
        assert (await client.post("/v1/plans", json={"action_id": "deploy",
                                                     "plan_id": "p-1"})).status_code == 201
        assert (await client.post("/v1/keys", json={"name": "k", "role": "agent",
                                                     "projects": None})
                ).status_code == 201
        decided = await client.post("/v1/authorize-tool", json={
            "plan_id": "p-1", "tool": {"name": "t", "capability": {
                "writes": False, "checkpointable": True, "unsafe": False}}})
        assert decided.status_code == 200, decided.text
        r = await client.post(f"/v1/decisions/{decided.json()['decision_id']}/outcome",
                              json={"status": "succeeded", "cost": 1.0})
        assert r.status_code == 201, r.text


def test_a_reused_database_is_the_template_again(pg_pool: Pool | None) -> None:
    if pg_pool is None:
        pytest.skip("Postgres not reachable")
    pristine = asyncio.run(_snapshot(_dsn(pg_pool, pg_pool.template)))
    name = pg_pool.take()
    asyncio.run(_use(pg_pool.url_of(name)))
    used = asyncio.run(_snapshot(_dsn(pg_pool, name)))
    assert used[1] != pristine[1]  # the test wrote rows (else this proves nothing)
    # A session left open, as a process a test did not stop would hold, mid-query.
    connected, ended = threading.Event(), []

    async def linger() -> None:
        conn = await asyncpg.connect(_dsn(pg_pool, name), timeout=10)
        connected.set()
        try:
            await conn.execute("SELECT pg_sleep(60)")
        except (asyncpg.PostgresError, OSError) as exc:
            ended.append(exc)

    thread = threading.Thread(target=asyncio.run, args=(linger(),))
    thread.start()
    assert connected.wait(30)
    pg_pool.give_back(name)
    thread.join(30)
    assert ended  # its session was ended, not waited for
    again = pg_pool.take()
    try:
        assert again != name
        assert asyncio.run(_snapshot(_dsn(pg_pool, again))) == pristine
        with pytest.raises(asyncpg.InvalidCatalogNameError):
            asyncio.run(asyncpg.connect(_dsn(pg_pool, name), timeout=10))
    finally:
        pg_pool.give_back(again)


def test_a_database_whose_schema_changed_is_dropped(pg_pool: Pool | None) -> None:
    if pg_pool is None:
        pytest.skip("Postgres not reachable")
    name = pg_pool.take()

    async def change() -> None:
        conn = await asyncpg.connect(_dsn(pg_pool, name), timeout=10)
        try:
            await conn.execute("ALTER TABLE plans ADD COLUMN extra integer")
        finally:
            await conn.close()

    asyncio.run(change())
    before = list(pg_pool.free)
    pg_pool.give_back(name)
    assert pg_pool.free == before  # nothing handed back

    async def databases() -> set[str]:
        conn = await asyncpg.connect(pg_pool.admin_dsn, timeout=10)
        try:
            return {r[0] for r in await conn.fetch("SELECT datname FROM pg_database")}
        finally:
            await conn.close()

    names = asyncio.run(databases())
    assert name not in names
