"""Every database call is bounded (TOOLGATE_DB_TIMEOUT_SECONDS): a database that does not
answer gets the request a 503 storage_unavailable, never a hang (issue 22 item 4: a 40 s
SIGSTOP of Postgres held requests for 35 s).

The shared Postgres is never stopped: a call is made to wait by a lock another connection
holds (LOCK TABLE), by pg_sleep, or by a proxy in front of the server that stops passing
bytes (what a frozen server looks like from here). No assertion is about time: each test
waits for the answer, and asyncio.wait_for only turns a hang (the bug) into a failure.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from app.config import Settings
from app.edge.handlers import render
from app.log.chain import GENESIS
from app.log.records import RECORD_FIELDS, iso_from_ns
from app.log.writer.postgres import PostgresStore
from app.log.writer.sqlite import SQLiteStore
from app.registry.service import RegistryCache
from tests.conftest import ADMIN_TOKEN, app_client

BOUND = 1.0  # db_timeout_seconds in these tests
HANG = 60  # what counts as a hang: far past every bound here, never reached when fixed
TOOL = {"tool": {"name": "t", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}}


def _settings(url: str, **extra) -> Settings:  # type: ignore[no-untyped-def]
    return Settings(database_url=url, admin_token=ADMIN_TOKEN, db_timeout_seconds=BOUND,
                    registry_ttl_seconds=0, **extra)


def _dsn(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@asynccontextmanager
async def _locked(url: str, table: str, mode: str = "ACCESS EXCLUSIVE") -> AsyncIterator[None]:
    """`table` locked by another connection until the block ends."""
    conn = await asyncpg.connect(_dsn(url))
    try:
        async with conn.transaction():
            await conn.execute(f"LOCK TABLE {table} IN {mode} MODE")
            yield
    finally:
        await conn.close()


async def _answer(request) -> httpx.Response:  # type: ignore[no-untyped-def]
    return await asyncio.wait_for(request, HANG)


def _unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "storage_unavailable"
    assert response.headers["retry-after"] == "1"


# --- Postgres: a statement that waits ---------------------------------------------------


async def test_the_registry_refresh_is_bounded_and_its_waiters_share_the_failure(
        postgres_url):
    """The read behind every decision (registry_ttl_seconds=0: one version read each). All
    the requests waiting for one refresh get the 503 together, not one bound each in turn."""
    async with app_client(_settings(postgres_url)) as client:
        assert (await client.post("/v1/authorize-tool", json=TOOL)).status_code == 200
        async with _locked(postgres_url, "registry_state"):
            answers = await _answer(asyncio.gather(
                *[client.post("/v1/authorize-tool", json=TOOL) for _ in range(5)]))
            for response in answers:
                _unavailable(response)
        assert (await client.post("/v1/authorize-tool", json=TOOL)).status_code == 200


async def test_the_key_look_up_is_bounded(postgres_url):
    async with app_client(_settings(postgres_url)) as client:
        created = await client.post("/v1/keys", json={"name": "a", "role": "agent",
                                                      "projects": None, "stateless": True})
        key = {"Authorization": f"Bearer {created.json()['key']}"}
        async with _locked(postgres_url, "api_keys"):
            _unavailable(await _answer(client.post("/v1/authorize-tool", json=TOOL,
                                                   headers=key)))
        assert (await client.post("/v1/authorize-tool", json=TOOL,
                                  headers=key)).status_code == 200


async def test_the_plan_lock_read_is_bounded(postgres_url):
    settings = _settings(postgres_url)
    async with app_client(settings) as client:
        await client.put("/v1/actions/a", json={})
        assert (await client.post("/v1/plans", json={"action_id": "a", "plan_id": "p"})
                ).status_code == 201
    async with app_client(settings) as fresh:  # a process that has not read the plan yet
        async with _locked(postgres_url, "plans"):
            _unavailable(await _answer(fresh.post("/v1/authorize-tool",
                                                  json={**TOOL, "plan_id": "p"})))
        assert (await fresh.post("/v1/authorize-tool", json={**TOOL, "plan_id": "p"})
                ).status_code == 200


async def test_a_configuration_write_and_a_read_are_bounded(postgres_url):
    async with app_client(_settings(postgres_url)) as client:
        async with _locked(postgres_url, "profiles"):
            _unavailable(await _answer(client.put("/v1/profiles/x", json={})))
            _unavailable(await _answer(client.get("/v1/profiles")))
        assert (await client.put("/v1/profiles/x", json={})).status_code == 201


async def test_a_long_statement_is_cancelled_at_the_bound(postgres_url):
    """pg_sleep through the app's own engine: the server cancels it, the error is the 503,
    and the connection goes on serving."""
    async with app_client(_settings(postgres_url)) as client:
        engine = client.app.state.engine  # type: ignore[attr-defined]

        async def sleep() -> Exception | None:
            try:
                async with engine.connect() as conn:
                    await conn.execute(text("SELECT pg_sleep(600)"))
            except Exception as exc:  # what the route would meet
                return exc
            return None

        caught = await asyncio.wait_for(sleep(), HANG)  # a hang fails here, not below
        assert caught is not None
        response = render(caught)
        assert response.status_code == 503 and b"storage_unavailable" in response.body
        async with engine.connect() as conn:
            assert await conn.scalar(text("SELECT 1")) == 1


async def test_no_free_pooled_connection_is_a_503(postgres_url):
    """Every pooled connection busy (pool 1 + overflow 1): the next request waits for one
    at most the bound, then gets 503, not a 500."""
    async with app_client(_settings(postgres_url, db_pool_size=1)) as client:
        engine = client.app.state.engine  # type: ignore[attr-defined]
        async with engine.connect() as first, engine.connect() as second:
            await first.scalar(text("SELECT 1"))
            await second.scalar(text("SELECT 1"))
            _unavailable(await _answer(client.put("/v1/profiles/x", json={})))
        assert (await client.put("/v1/profiles/x", json={})).status_code == 201


# --- Postgres: a server that answers nothing ---------------------------------------------


class FreezingProxy:
    """A TCP proxy in front of Postgres that can stop passing bytes either way: from the
    app's side, what a SIGSTOPped (or unplugged) server looks like."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.passing = asyncio.Event()
        self.passing.set()
        self.server: asyncio.Server | None = None
        self.pipes: set[asyncio.Task] = set()

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return self.server.sockets[0].getsockname()[1]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                await self.passing.wait()
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.passing.wait()
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.port)
        for task in (asyncio.ensure_future(self._pipe(reader, upstream_writer)),
                     asyncio.ensure_future(self._pipe(upstream_reader, writer))):
            self.pipes.add(task)
            task.add_done_callback(self.pipes.discard)

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        for task in list(self.pipes):
            task.cancel()


async def test_a_frozen_server_gets_503s_and_serving_resumes_after(postgres_url):
    """Issue 22 item 4 as reported, without stopping the shared server: the proxy stops
    passing bytes while requests hold pooled connections and new ones are opened."""
    url = make_url(postgres_url)
    proxy = FreezingProxy(url.port or 5432)
    port = await proxy.start()
    try:
        proxied = url.set(port=port).render_as_string(hide_password=False)
        async with app_client(_settings(proxied)) as client:
            assert (await client.post("/v1/authorize-tool", json=TOOL)).status_code == 200
            assert (await client.put("/v1/profiles/x", json={})).status_code == 201
            proxy.passing.clear()
            for _ in range(2):  # pooled connections first, then new ones
                answers = await _answer(asyncio.gather(
                    *[client.post("/v1/authorize-tool", json=TOOL) for _ in range(3)],
                    client.put("/v1/profiles/x", json={"description": "frozen"}),
                    client.get("/v1/profiles/x")))
                for response in answers:
                    _unavailable(response)
            proxy.passing.set()
            assert (await client.post("/v1/authorize-tool", json=TOOL)).status_code == 200
            assert (await client.put("/v1/profiles/x", json={"description": "back"})
                    ).status_code == 200
    finally:
        await proxy.close()


# --- the decision log writer ---------------------------------------------------------------


def _record(n: int) -> dict:
    return {**dict.fromkeys(RECORD_FIELDS), "decision_id": f"t{n}-{time.time_ns()}",
            "kind": "authorize", "created_at": iso_from_ns(time.time_ns()), "allowed": True,
            "detail": {}}


async def test_the_postgres_writer_gives_up_on_a_statement_and_recovers(postgres_url):
    """The writer's statement waits for the chain head like any chain writer; held past
    the bound, the batch fails (its requests get 503) and the next one goes in."""
    store = PostgresStore(_dsn(postgres_url), 5.0, statement_timeout=BOUND)
    try:
        await store.commit([_record(1)])
        async with _locked(postgres_url, "chain_head"):
            with pytest.raises(asyncpg.QueryCanceledError):
                await asyncio.wait_for(store.commit([_record(2)]), HANG)
        await store.commit([_record(3)])
    finally:
        store.stop()
    conn = await asyncpg.connect(_dsn(postgres_url))
    try:
        assert await conn.fetchval("SELECT count(*) FROM decision_log") == 2
    finally:
        await conn.close()


async def test_the_sqlite_writer_waits_for_the_write_lock_at_most_the_bound(tmp_path):
    from app.store import migrate

    path = tmp_path / "log.db"
    await asyncio.to_thread(migrate.upgrade, f"sqlite+aiosqlite:///{path}")
    store = SQLiteStore(str(path), "FULL", busy_timeout=0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await asyncio.wait_for(store.commit([_record(1)]), HANG)
        holder.execute("ROLLBACK")
        await store.commit([_record(2)])
    finally:
        holder.close()
        store.stop()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT hash FROM chain_head").fetchone()[0] != GENESIS


# --- SQLite -----------------------------------------------------------------------------


async def test_sqlite_waits_for_the_write_lock_at_most_the_bound(tmp_path, sqlite_template):
    import shutil

    path = tmp_path / "toolgate.db"
    shutil.copyfile(sqlite_template, path)
    settings = Settings(database_url=f"sqlite+aiosqlite:///{path}", admin_token=ADMIN_TOKEN,
                        db_timeout_seconds=0.25)
    async with app_client(settings) as client:
        engine = client.app.state.engine  # type: ignore[attr-defined]
        async with engine.connect() as conn:
            assert await conn.scalar(text("PRAGMA busy_timeout")) == 250
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            _unavailable(await _answer(client.put("/v1/profiles/x", json={})))
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert (await client.put("/v1/profiles/x", json={})).status_code == 201


# --- the registry's shared refresh ------------------------------------------------------


async def test_callers_waiting_for_one_registry_refresh_share_its_failure():
    """Five decisions find the registry due at once: one read, and when it fails all five
    get its error (before, each retried in turn behind a lock: five bounds end to end)."""
    started, release = asyncio.Event(), asyncio.Event()
    reads = 0

    class Session:
        async def __aenter__(self):  # type: ignore[no-untyped-def]
            nonlocal reads
            reads += 1
            started.set()
            await release.wait()
            raise TimeoutError("the database did not answer")

        async def __aexit__(self, *exc):  # type: ignore[no-untyped-def]
            return False

    cache = RegistryCache(ttl=1.0)
    first = asyncio.ensure_future(cache.ensure_fresh(Session))  # type: ignore[arg-type]
    await started.wait()
    rest = [asyncio.ensure_future(cache.ensure_fresh(Session))  # type: ignore[arg-type]
            for _ in range(4)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(first, *rest, return_exceptions=True)
    assert all(isinstance(r, TimeoutError) for r in results), results
    assert reads == 1
