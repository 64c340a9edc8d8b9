"""The writer process's loop, driven in process: what it acknowledges, and that a bad
batch fails alone without stopping the writer."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from pathlib import Path

import orjson
import pytest

from app.log.decision_log import FRAME_REQUESTS, DecisionLog, RecordingFailed
from app.log.records import RECORD_FIELDS
from app.log.writer.loop import Source, Writer, groups
from app.log.writer.postgres import PostgresStore
from app.log.writer.sqlite import SQLiteStore
from app.store import migrate
from tests.waiting import until


def _record(decision_id: str) -> dict:
    return {**dict.fromkeys(RECORD_FIELDS), "decision_id": decision_id, "kind": "authorize",
            "created_at": time.time_ns(), "allowed": True, "detail": {"k": 1}}


async def _sqlite_writer(tmp_path: Path) -> tuple[Writer, Source, list[bytes], Path]:
    """A Writer on a fresh SQLite log, and one source whose acknowledgements are kept."""
    path = tmp_path / "log.db"
    await asyncio.to_thread(migrate.upgrade, f"sqlite+aiosqlite:///{path}")
    acks: list[bytes] = []
    return Writer(SQLiteStore(str(path), "FULL"), max_batch=512), Source(acks.append), acks, path


async def test_a_bad_batch_is_refused_alone_and_the_writer_goes_on(tmp_path):
    writer, source, acks, path = await _sqlite_writer(tmp_path)

    bad = {k: v for k, v in _record("bad").items() if k != "created_at"}
    source.took(1)
    await writer.commit([((1, [bad]), source)])
    source.took(1)
    await writer.commit([((2, [_record("good")]), source)])

    answers = [orjson.loads(line) for chunk in acks for line in chunk.splitlines()]
    assert answers[0][0] == 1 and "created_at" in answers[0][1]
    assert answers[1] == [2, None, 1]
    assert source.idle.is_set()
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT decision_id, created_at FROM decision_log").fetchall()
    assert [r[0] for r in rows] == ["good"] and rows[0][1].count(":") == 2


async def _one_bad_among_good(log: DecisionLog, then=lambda: None) -> None:  # type: ignore[no-untyped-def]
    """Three decisions in one frame, the middle one's record holding an integer past 64
    bits (which orjson refuses): it alone fails; `then()`, and the log is closed."""
    try:
        results = await asyncio.gather(
            log.write([_record("before")]), log.write([{**_record("bad"), "detail": {"n": 2**70}}]),
            log.write([_record("after")]), return_exceptions=True)
        then()
    finally:
        await log.close()
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], RecordingFailed) and "cannot be written" in str(results[1])


async def test_a_record_that_cannot_be_sent_fails_alone_not_its_frame(tmp_path):
    """Records of one loop turn travel as one frame; one that cannot be serialised (an
    integer past 64 bits) is refused by itself, and its neighbours are committed."""
    path = tmp_path / "log.db"
    await asyncio.to_thread(migrate.upgrade, f"sqlite+aiosqlite:///{path}")
    log = DecisionLog(f"sqlite+aiosqlite:///{path}")
    await log.start()
    await _one_bad_among_good(log)
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT decision_id FROM decision_log ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == ["before", "after"]


async def test_a_busy_loop_turn_sends_frames_as_they_fill_and_all_are_committed(tmp_path):
    """The writer need not wait for the end of a turn that decides many requests: a frame
    leaves every FRAME_REQUESTS requests, and the rest at the end of the turn."""
    path = tmp_path / "log.db"
    await asyncio.to_thread(migrate.upgrade, f"sqlite+aiosqlite:///{path}")
    log = DecisionLog(f"sqlite+aiosqlite:///{path}")
    await log.start()
    count = 2 * FRAME_REQUESTS + 5
    try:
        await asyncio.gather(*[log.write([_record(f"d{i}")]) for i in range(count)])
        frames = log._frame
    finally:
        await log.close()
    assert frames == 3
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT decision_id FROM decision_log ORDER BY seq").fetchall()
    assert [r[0] for r in rows] == [f"d{i}" for i in range(count)]


def test_groups_never_split_a_frame_and_respect_max_batch():
    source = Source(lambda _: None)
    items = [((i, [{}] * size), source) for i, size in enumerate([3, 3, 5, 1, 1])]
    grouped = groups(items, max_batch=6)
    assert [[frame_id for (frame_id, _), _ in g] for g in grouped] == [[0, 1], [2, 3], [4]]


def test_a_frame_of_no_records_is_grouped_like_any_other():
    """A frame may hold no records (a worker's write([])): grouping it first used to index
    an empty list and stop the writer process, and with it every worker's log."""
    source = Source(lambda _: None)
    items = [((i, [{}] * size), source) for i, size in enumerate([0, 2, 0, 5])]
    grouped = groups(items, max_batch=6)
    assert [[frame_id for (frame_id, _), _ in g] for g in grouped] == [[0, 1, 2], [3]]


async def test_the_writer_acknowledges_a_frame_of_no_records(tmp_path):
    writer, source, acks, _ = await _sqlite_writer(tmp_path)
    source.took(2)
    await writer.commit([((1, []), source), ((2, [_record("one")]), source)])
    answers = [orjson.loads(line) for chunk in acks for line in chunk.splitlines()]
    assert [(frame, error) for frame, error, _ in answers] == [(1, None), (2, None)]
    assert source.idle.is_set()


async def test_batches_chain_onto_records_other_transactions_added(database_url):
    """Between two batches another transaction extends the chain (a configuration change
    through app.log.decision_log.append). On Postgres the writer, which chains onto the head
    it last wrote, must find that out, chain again and still write one unbroken chain."""
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

    from app.log.chain import GENESIS, verify
    from app.log.decision_log import append
    from app.log.records import iso, iso_from_ns, new_record
    from app.log.tables import LogRecord
    from app.log.writer.loop import open_store
    from app.log.writer.start import writer_config

    def _iso(record: dict) -> dict:  # as Writer.commit hands records to the store
        return {**record, "created_at": iso_from_ns(record["created_at"])}

    store = open_store(writer_config(database_url, max_batch=512, timeout=5,
                                     sqlite_synchronous="FULL"))
    engine = create_async_engine(database_url)
    try:
        await store.commit([_iso(_record("first-1")), _iso(_record("first-2"))])
        async with async_sessionmaker(engine)() as session, session.begin():
            await append(session, [new_record("config", "between")])
        await store.commit([_iso(_record("second"))])
        if isinstance(store, PostgresStore):
            assert store.rechained == 1
            # Its backend writes the log's pages out as it goes, not all at the next
            # checkpoint (docs/performance.md: checkpoint stalls).
            assert await store._conn.fetchval("SHOW backend_flush_after") == "256kB"
        async with engine.connect() as conn:
            rows = (await conn.execute(select(LogRecord.__table__).order_by(
                LogRecord.seq))).mappings().all()
    finally:
        store.stop()
        await engine.dispose()
    assert [r["decision_id"] for r in rows] == ["first-1", "first-2", "between", "second"]
    records = [{**r, "created_at": iso(r["created_at"]), "detail": orjson.loads(r["detail"])}
               for r in rows]
    assert verify(records, anchor=(0, GENESIS)).ok


async def test_two_writers_on_one_chain_both_get_every_batch_in(database_url):
    """Two replicas' writers extend one chain at once. On Postgres each writes optimistically
    from the head it last wrote; the one that loses the race must not be starved (a batch
    that misses goes the locking way), and the chain stays one chain."""
    from sqlalchemy import select
    from sqlalchemy.ext.asyncio import create_async_engine

    from app.log.chain import GENESIS, verify
    from app.log.records import iso, iso_from_ns
    from app.log.tables import LogRecord
    from app.log.writer.loop import open_store
    from app.log.writer.start import writer_config

    config = writer_config(database_url, max_batch=512, timeout=5, sqlite_synchronous="FULL")
    stores = [open_store(config), open_store(config)]

    async def keep_writing(name: str, store) -> None:  # type: ignore[no-untyped-def]
        for batch in range(25):
            await store.commit([{**_record(f"{name}-{batch}-{i}"),
                                 "created_at": iso_from_ns(time.time_ns())}
                                for i in range(1 + batch % 4)])
            await asyncio.sleep(0)

    try:
        await asyncio.gather(keep_writing("a", stores[0]), keep_writing("b", stores[1]))
    finally:
        for store in stores:
            store.stop()
    if isinstance(stores[0], PostgresStore):
        assert stores[0].rechained + stores[1].rechained > 0  # they did race
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(select(LogRecord.__table__).order_by(
                LogRecord.seq))).mappings().all()
    finally:
        await engine.dispose()
    expected = sum(1 + batch % 4 for batch in range(25))
    assert len([r for r in rows if r["decision_id"].startswith("a-")]) == expected
    assert len([r for r in rows if r["decision_id"].startswith("b-")]) == expected
    records = [{**r, "created_at": iso(r["created_at"]), "detail": orjson.loads(r["detail"])}
               for r in rows]
    assert verify(records, anchor=(0, GENESIS)).ok


async def test_inline_on_postgres_a_record_that_cannot_be_hashed_fails_alone(postgres_url):
    """With the writer on the worker's loop nothing is serialised before the commit; the
    record orjson refuses (an integer past 64 bits) is found when the batch is hashed, and
    only its own request fails: the others of its frame are sent again and committed."""
    import asyncpg

    log = DecisionLog(postgres_url, writer="inline")
    await log.start()
    assert log._local is not None
    await log.write([_record("first")])
    store = log._local.writer.store
    connection = store._conn

    def kept_its_connection() -> None:  # nothing had been sent: no reason to reconnect
        assert store._conn is connection

    await _one_bad_among_good(log, kept_its_connection)
    conn = await asyncpg.connect(postgres_url.replace("+asyncpg", ""))
    try:
        rows = await conn.fetch("SELECT decision_id FROM decision_log ORDER BY seq")
    finally:
        await conn.close()
    assert [r[0] for r in rows] == ["first", "before", "after"]


async def test_inline_a_frame_refused_as_unwritable_with_no_record_to_blame_fails_once(
        postgres_url, monkeypatch):
    """The writer refuses a frame as "cannot be written" while every record in it
    serialises (so none can be singled out): its requests fail, rather than being sent
    again, refused again, for ever. The log goes on."""
    import app.log.writer.postgres as postgres_module
    from app.log.chain import Unhashable

    log = DecisionLog(postgres_url, writer="inline")
    await log.start()
    chain_values = postgres_module.chain_values

    def refuse(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise Unhashable("refused")

    try:
        monkeypatch.setattr(postgres_module, "chain_values", refuse)
        results = await asyncio.wait_for(asyncio.gather(
            log.write([_record("one")]), log.write([_record("two")]),
            return_exceptions=True), timeout=10)
        assert all(isinstance(r, RecordingFailed) and "cannot be written" in str(r)
                   for r in results)
        monkeypatch.setattr(postgres_module, "chain_values", chain_values)
        await log.write([_record("three")])
    finally:
        await log.close()


def _niceness(pid: int) -> int:
    stat = open(f"/proc/{pid}/stat").read()
    return int(stat[stat.rindex(")") + 2:].split()[16])  # field 19 of proc(5): nice


async def test_a_workers_own_writer_runs_below_it_and_the_shared_one_does_not(tmp_path):
    """decision_log_writer_nice lowers the priority of a worker's own writer process, which
    only its worker waits on; the shared writer of `--workers N` keeps the server's."""
    from app.log.writer.start import start_shared_writer

    path = tmp_path / "log.db"
    url = f"sqlite+aiosqlite:///{path}"
    await asyncio.to_thread(migrate.upgrade, url)
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    log = DecisionLog(url, nice=7)
    await log.start()
    try:
        await log.write([_record("one")])  # the writer has read its configuration
        assert log._process is not None
        assert _niceness(log._process.pid) == min(19, ours + 7)
    finally:
        await log.close()
    shared = start_shared_writer(url, max_batch=512, timeout=5, sqlite_synchronous="FULL",
                                 socket_path=str(tmp_path / "w.sock"))
    try:
        for _ in range(100):  # listening means it has read its configuration
            if (tmp_path / "w.sock").exists():
                break
            await asyncio.sleep(0.05)
        assert _niceness(shared.pid) == ours
    finally:
        assert shared.stdin is not None
        shared.stdin.close()
        await asyncio.to_thread(shared.wait, 30)


def test_a_fallback_writer_under_several_workers_keeps_the_workers_priority(tmp_path):
    """A worker of `--workers N` that cannot reach the shared writer starts its own: the
    other workers are busy beside it, so it is not lowered; a lone worker's writer is."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'log.db'}"
    alone = DecisionLog(url, nice=7)
    beside_others = DecisionLog(url, nice=7, socket=str(tmp_path / "no-such.sock"))
    assert orjson.loads(alone._config)["nice"] == 7
    assert orjson.loads(beside_others._config)["nice"] == 0


async def test_the_app_passes_the_writers_niceness_to_its_decision_log(tmp_path):
    from app.config import Settings
    from tests.conftest import ADMIN_TOKEN, app_client

    url = f"sqlite+aiosqlite:///{tmp_path / 'log.db'}"
    await asyncio.to_thread(migrate.upgrade, url)
    settings = Settings(database_url=url, admin_token=ADMIN_TOKEN, decision_log_writer_nice=3)
    async with app_client(settings) as client:
        log = client.app.state.decision_log
        assert orjson.loads(log._config)["nice"] == 3


def test_the_writers_niceness_is_a_setting_from_0_to_19():
    from pydantic import ValidationError

    from app.config import Settings

    assert Settings().decision_log_writer_nice == 10
    for wrong in (-1, 20):
        with pytest.raises(ValidationError) as refused:
            Settings(decision_log_writer_nice=wrong)
        assert "decision_log_writer_nice" in str(refused.value)


async def _pg(postgres_url: str, query: str):  # type: ignore[no-untyped-def]
    import asyncpg

    conn = await asyncpg.connect(postgres_url.replace("+asyncpg", ""))
    try:
        return await conn.fetchval(query)
    finally:
        await conn.close()


async def test_on_postgres_the_writer_summarises_the_created_at_index_itself(
        postgres_url, monkeypatch):
    """Migration 0007 turned the BRIN index's autosummarize off (its requests to autovacuum
    overflow under load and flood the server log); the writer summarises every filled
    range itself, on a connection beside the commits."""
    import app.log.writer.postgres as postgres_module
    import app.log.writer.summariser as summariser_module

    assert "autosummarize=off" in await _pg(postgres_url, (
        "SELECT array_to_string(reloptions, ',') FROM pg_class "
        "WHERE relname = 'ix_decision_log_created_at'"))
    monkeypatch.setattr(postgres_module, "SUMMARISE_SECONDS", 0.2)
    log = DecisionLog(postgres_url, writer="inline")
    await log.start()
    try:
        detail = {"pad": "x" * 800}  # rows of ~1 kB: 6,000 of them fill several ranges
        await asyncio.gather(*(log.write([{**_record(f"d{i}"), "detail": detail}])
                               for i in range(6000)))
        summariser = log._local.writer.store.summariser  # type: ignore[union-attr]
        # Two turns more: one that began before the last commit may have missed its range.
        after_the_writes = summariser.turns
        deadline = time.monotonic() + 10
        while summariser.turns < after_the_writes + 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert summariser.summarised >= 2
    finally:
        await log.close()
    # Every full range is summarised already: nothing is left for anyone else to do.
    assert await _pg(postgres_url, summariser_module._PG_SUMMARISE) == 0


async def test_a_summary_that_fails_never_fails_a_commit(postgres_url, monkeypatch, caplog):
    """A passing failure is retried at every turn; one that cannot pass (here: no such
    index, as on a schema from before 0005) is reported once and the summaries stop.
    Either way every decision is committed."""
    import app.log.writer.postgres as postgres_module
    import app.log.writer.summariser as summariser_module

    monkeypatch.setattr(postgres_module, "SUMMARISE_SECONDS", 0.05)
    for n, (query, lasting) in enumerate((("SELECT 1 / 0", False),
                           ("SELECT brin_summarize_new_values('no_such_index'::regclass)",
                            True))):
        caplog.clear()
        monkeypatch.setattr(summariser_module, "_PG_SUMMARISE", query)
        log = DecisionLog(postgres_url, writer="inline")
        await log.start()
        try:
            for i in range(5):
                await log.write([_record(f"r{n}-{i}")])
                await asyncio.sleep(0.06)
            summariser = log._local.writer.store.summariser  # type: ignore[union-attr]
            assert summariser.turns == 0
            assert summariser._task.done() is lasting
        finally:
            await log.close()
        if lasting:
            assert caplog.text.count("cannot be summarised") == 1
        else:
            assert caplog.text.count("summarising the created_at index failed") >= 2
    assert await _pg(postgres_url, "SELECT count(*) FROM decision_log") == 10


async def test_an_inline_writer_that_stops_on_a_bug_takes_its_summaries_with_it(
        postgres_url, monkeypatch):
    """The inline writer's loop ending by an exception (DecisionLog replaces it) stops its
    store: no summary task, nor its connection, is left behind by the old one."""
    import app.log.writer.postgres as postgres_module

    def summaries() -> set[asyncio.Task]:
        return {t for t in asyncio.all_tasks() if t.get_name() == "toolgate-decision-log-brin"}

    monkeypatch.setattr(postgres_module, "SUMMARISE_SECONDS", 0.05)
    before = summaries()  # the tests share one event loop
    log = DecisionLog(postgres_url, writer="inline")
    await log.start()
    try:
        await log.write([_record("a")])
        first = log._local
        assert first is not None

        def bug(*_):  # type: ignore[no-untyped-def]
            raise RuntimeError("a bug in the answer")

        first._source._answer = bug  # type: ignore[method-assign]
        with pytest.raises(RecordingFailed):
            await asyncio.wait_for(log.write([_record("b")]), 5)
        await until(lambda: first.running.done()
                    and first.writer.store.summariser._task is None, "the writer stopped")
        await log.write([_record("c")])  # a new writer, with summaries of its own
        await until(lambda: len(summaries() - before) == 1, "the new writer's summaries")
    finally:
        await log.close()
    await until(lambda: not summaries() - before, "no summaries left running")


async def _server_configures_wal_init_zero(postgres_url: str) -> None:
    if await _pg(postgres_url, "SELECT source <> 'default' FROM pg_settings "
                               "WHERE name = 'wal_init_zero'"):
        pytest.skip("this Postgres server configures wal_init_zero itself")


async def _commit_and_show_wal_init_zero(dsn: str) -> str:
    """One record through a Postgres writer on `dsn`; its connection's wal_init_zero."""
    from app.log.records import iso_from_ns

    record = _record(f"z{time.monotonic_ns()}")
    store = PostgresStore(dsn, 5.0)
    try:  # the time as Writer.commit hands records to a store
        await store.commit([{**record, "created_at": iso_from_ns(record["created_at"])}])
        return await store._conn.fetchval("SHOW wal_init_zero")
    finally:
        store.stop()


async def test_on_postgres_the_writers_backend_creates_wal_segments_without_zeros(
        postgres_url):
    """The backend that writes the log creates the server's new WAL segments: zero-filling
    each (wal_init_zero, the default) held every commit for 50-90 ms once a second on a new
    server. The writer turns it off for its own connection; other connections keep it."""
    await _server_configures_wal_init_zero(postgres_url)
    dsn = postgres_url.replace("+asyncpg", "")
    assert await _commit_and_show_wal_init_zero(dsn) == "off"
    assert await _pg(postgres_url, "SHOW wal_init_zero") == "on"


async def test_wal_init_zero_that_the_operator_configured_stands(postgres_url, caplog):
    """Set for the database (as in postgresql.conf, for a role...), either way: the writer
    leaves it and writes as ever, and says once why commits may stall when it is on."""
    dsn = postgres_url.replace("+asyncpg", "")
    name = dsn.rsplit("/", 1)[1]
    caplog.set_level("INFO", logger="toolgate.decisions.writer")
    for configured, told in (("on", 1), ("off", 0)):
        caplog.clear()
        await _pg(postgres_url, f"ALTER DATABASE {name} SET wal_init_zero = {configured}")
        assert await _commit_and_show_wal_init_zero(dsn) == configured
        assert caplog.text.count("zero-filled first (wal_init_zero)") == told
    assert await _pg(postgres_url, "SELECT count(*) FROM decision_log") == 2


async def test_a_role_that_may_not_set_wal_init_zero_still_writes(postgres_url):
    """Only a superuser, or a role granted SET on it, may change wal_init_zero: any other
    role's writer commits with the server's setting instead of failing."""
    import uuid

    await _server_configures_wal_init_zero(postgres_url)
    role = f"toolgate_test_writer_{uuid.uuid4().hex[:8]}"
    await _pg(postgres_url, f"CREATE ROLE {role} LOGIN")
    try:
        await _pg(postgres_url, f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "
                                f"public TO {role}")
        dsn = postgres_url.replace("+asyncpg", "").replace("://postgres@", f"://{role}@")
        assert await _commit_and_show_wal_init_zero(dsn) == "on"
        assert await _pg(postgres_url, "SELECT count(*) FROM decision_log") == 1
        # What docs/deployment.md tells the operator of such a role to grant.
        await _pg(postgres_url, f"GRANT SET ON PARAMETER wal_init_zero TO {role}")
        assert await _commit_and_show_wal_init_zero(dsn) == "off"
    finally:
        await _pg(postgres_url, f"REVOKE SET ON PARAMETER wal_init_zero FROM {role}")
        await _pg(postgres_url, f"DROP OWNED BY {role}")
        await _pg(postgres_url, f"DROP ROLE {role}")


async def test_a_tls_mode_in_the_database_url_reaches_the_writers_connection(postgres_url):
    """`?ssl=MODE` (what SQLAlchemy's asyncpg takes; `?sslmode=` becomes it) must not stop
    the writer process, which connects with a libpq DSN: every decision would be a 503."""
    log = DecisionLog(f"{postgres_url}?ssl=disable")
    await log.start()
    try:
        await asyncio.wait_for(log.write([_record("tls")]), 20)
    finally:
        await log.close()
    assert await _pg(postgres_url, "SELECT count(*) FROM decision_log") == 1
