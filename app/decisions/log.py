"""Appending to the hash-chained log, and the group-commit writer.

"No record, no allow": a decision's answer is sent only after its record is committed.
Concurrent decisions share one transaction: one writer per process drains whatever has
queued (up to `max_batch`) and commits it at once, so durability costs one commit per
batch rather than per decision. Every writer, in any process or replica, extends the chain
under a lock on the single `chain_head` row, which makes `seq` a total order.

The writer talks to the database directly, on a connection it holds (the ORM's per-row
work cost ~50 µs per decision; this costs a few): on SQLite a thread with the standard
`sqlite3` module, so hashing, inserting and fsync never stall the event loop; on Postgres
an asyncpg connection. Configuration changes use `append()` inside the request's own
SQLAlchemy transaction instead; both extend the same chain the same way (`chain_rows`).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import sqlite3
import threading
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import insert, update
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from app.decisions.chain import record_hash
from app.decisions.records import parse_iso
from app.decisions.tables import ChainHead, LogRecord
from app.store.tables import utcnow

log = logging.getLogger("toolgate.decisions")
_LOG = LogRecord.__table__
_HEAD = ChainHead.__table__
COLUMNS = tuple(c.name for c in _LOG.columns)


class RecordingFailed(Exception):
    """The log could not record a decision; the caller must not answer allow."""


def chain_rows(records: list[dict[str, Any]], seq: int, prev: str
               ) -> tuple[list[dict[str, Any]], int, str]:
    """Give each record its seq, prev_hash and hash; return the rows to insert and the new
    head. The hash covers the record as exported (ISO time, nested detail)."""
    rows = []
    for record in records:
        seq += 1
        record["seq"] = seq
        record["prev_hash"] = prev
        record["hash"] = prev = record_hash(record)
        rows.append({
            **record,
            "created_at": parse_iso(record["created_at"]),
            "detail": orjson.dumps(record["detail"], option=orjson.OPT_SORT_KEYS).decode(),
        })
    return rows, seq, prev


async def append(session: AsyncSession, records: list[dict[str, Any]]) -> None:
    """Chain and insert records inside the caller's transaction (the caller commits)."""
    if not records:
        return
    # Taking the row lock with an UPDATE first makes SQLite start its write transaction
    # here too, so two processes never both read the head and then race to extend it.
    head = (await session.execute(
        update(_HEAD).where(_HEAD.c.id == 1).values(updated_at=utcnow())
        .returning(_HEAD.c.seq, _HEAD.c.hash)
    )).one()
    rows, seq, prev = chain_rows(records, head.seq, head.hash)
    await session.execute(insert(_LOG), rows)
    await session.execute(update(_HEAD).where(_HEAD.c.id == 1).values(seq=seq, hash=prev))


Batch = list[tuple[list[dict[str, Any]], asyncio.Future]]


class DecisionLog:
    """One per process: `await write(records)` returns once they are committed."""

    def __init__(self, database_url: str, *, max_batch: int = 512,
                 timeout: float = 5.0, sqlite_synchronous: str = "FULL") -> None:
        self._max_batch = max_batch
        self._timeout = timeout
        url = make_url(database_url)
        self._backend: _SQLiteWriter | _PostgresWriter = (
            _SQLiteWriter(url.database or "toolgate.db", self, sqlite_synchronous)
            if url.get_backend_name() == "sqlite" else
            _PostgresWriter(url.set(drivername="postgresql")
                            .render_as_string(hide_password=False), self)
        )
        self.batches = 0
        self.records = 0

    def start(self) -> None:
        self._backend.start(asyncio.get_running_loop())

    async def close(self) -> None:
        """Drain: everything queued before close is written before the writer stops."""
        await self._backend.close()

    async def write(self, records: list[dict[str, Any]]) -> None:
        if not self._backend.running():
            raise RecordingFailed("the decision log writer is not running")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._backend.put((records, future))
        try:
            async with asyncio.timeout(self._timeout):
                await future
        except TimeoutError:
            raise RecordingFailed(
                f"the decision was not recorded within {self._timeout}s") from None

    def _settle(self, batch: Batch, error: BaseException | None) -> None:
        """On the event loop: wake every request of a committed (or failed) batch."""
        if error is None:
            self.batches += 1
            self.records += sum(len(records) for records, _ in batch)
        for _, future in batch:
            if future.done():  # its caller gave up (timeout) already
                continue
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(RecordingFailed(str(error) or type(error).__name__))


# --- SQLite: a writer thread ------------------------------------------------------------

_SQLITE_HEAD = "UPDATE chain_head SET updated_at = ? WHERE id = 1 RETURNING seq, hash"
_SQLITE_INSERT = (f"INSERT INTO decision_log ({', '.join(f'{c!r}' for c in COLUMNS)}) "
                  f"VALUES ({', '.join('?' for _ in COLUMNS)})").replace("'", '"')
_SQLITE_SET_HEAD = "UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1"
_STOP = object()


def _collect(first: Any, get_nowait: Any, max_batch: int) -> tuple[Batch, bool]:
    """The first item and whatever else is already queued (up to max_batch); True when the
    stop sentinel was among them."""
    batch: Batch = [first]
    while len(batch) < max_batch:
        try:
            nxt = get_nowait()
        except (queue.Empty, asyncio.QueueEmpty):
            break
        if nxt is _STOP:
            return batch, True
        batch.append(nxt)
    return batch, False


def _sqlite_time(moment: datetime) -> str:
    # The text SQLAlchemy's SQLite DATETIME stores, so the ORM reads these rows back.
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")


class _SQLiteWriter:
    def __init__(self, path: str, owner: DecisionLog, synchronous: str) -> None:
        self._path = path
        self._synchronous = synchronous
        self._owner = owner
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._thread = threading.Thread(target=self._run, name="toolgate-decision-log",
                                        daemon=True)
        self._thread.start()

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def put(self, item: tuple[list[dict], asyncio.Future]) -> None:
        self._queue.put(item)

    async def close(self) -> None:
        if self._thread is None:
            return
        self._queue.put(_STOP)
        await asyncio.to_thread(self._thread.join)
        self._thread = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, timeout=30, isolation_level=None,
                               check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    def _run(self) -> None:
        conn: sqlite3.Connection | None = None
        stopping = False
        while not stopping:
            item = self._queue.get()
            if item is _STOP:
                break
            batch, stopping = _collect(item, self._queue.get_nowait, self._owner._max_batch)
            error: BaseException | None = None
            try:
                conn = conn or self._connect()
                self._commit(conn, [r for records, _ in batch for r in records])
            except Exception as exc:  # whatever the cause, these decisions are not recorded
                log.error("decision log write failed (%d requests): %s", len(batch), exc)
                error = exc
                if conn is not None:
                    conn.close()
                    conn = None  # reconnect on the next batch
            assert self._loop is not None
            self._loop.call_soon_threadsafe(self._owner._settle, batch, error)
        if conn is not None:
            conn.close()

    @staticmethod
    def _commit(conn: sqlite3.Connection, records: list[dict[str, Any]]) -> None:
        conn.execute("BEGIN IMMEDIATE")
        try:
            seq, prev = conn.execute(_SQLITE_HEAD, (_sqlite_time(utcnow()),)).fetchone()
            rows, seq, prev = chain_rows(records, seq, prev)
            conn.executemany(_SQLITE_INSERT, [
                tuple(_sqlite_time(row[c]) if c == "created_at" else row[c] for c in COLUMNS)
                for row in rows
            ])
            conn.execute(_SQLITE_SET_HEAD, (seq, prev))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


# --- Postgres: a task with one held asyncpg connection ----------------------------------

_PG_HEAD = "UPDATE chain_head SET updated_at = $1 WHERE id = 1 RETURNING seq, hash"
_PG_SET_HEAD = "UPDATE chain_head SET seq = $1, hash = $2 WHERE id = 1"


class _PostgresWriter:
    def __init__(self, dsn: str, owner: DecisionLog) -> None:
        self._dsn = dsn
        self._owner = owner
        self._queue: asyncio.Queue = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self._conn: Any = None

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._task = loop.create_task(self._run(), name="toolgate-decision-log")

    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def put(self, item: tuple[list[dict], asyncio.Future]) -> None:
        self._queue.put_nowait(item)

    async def close(self) -> None:
        if self._task is None:
            return
        self._queue.put_nowait(_STOP)
        await self._task
        self._task = None
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    async def _run(self) -> None:
        stopping = False
        while not stopping:
            item = await self._queue.get()
            if item is _STOP:
                break
            batch, stopping = _collect(item, self._queue.get_nowait, self._owner._max_batch)
            error: BaseException | None = None
            try:
                await self._commit([r for records, _ in batch for r in records])
            except Exception as exc:  # whatever the cause, these decisions are not recorded
                log.error("decision log write failed (%d requests): %s", len(batch), exc)
                error = exc
                if self._conn is not None:
                    self._conn.terminate()
                    self._conn = None  # reconnect on the next batch
            self._owner._settle(batch, error)

    async def _commit(self, records: list[dict[str, Any]]) -> None:
        import asyncpg

        if self._conn is None:
            self._conn = await asyncpg.connect(self._dsn, timeout=self._owner._timeout)
        conn = self._conn
        async with conn.transaction():
            seq, prev = await conn.fetchrow(_PG_HEAD, utcnow())
            rows, seq, prev = chain_rows(records, seq, prev)
            await conn.copy_records_to_table(
                "decision_log", columns=COLUMNS,
                records=[tuple(row[c] for c in COLUMNS) for row in rows])
            await conn.execute(_PG_SET_HEAD, seq, prev)
