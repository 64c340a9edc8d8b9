"""What checks 7 and 8 read from the ledger on every metered decision (SPEC §11), without
SQLAlchemy's session.

Through an ORM session the two reads cost 1.5-2.6 ms of CPU a decision on the 2-core VM
(check out, ping, BEGIN, two SELECTs, roll back, each a hop through the greenlet and the
driver), twenty times the whole memory-only decision; cost-limited plans answered at 0.02
of the bare app. Here it is one statement that returns the plan's, the project's and the
step's totals together:

- SQLite: one read-only connection in WAL mode, read on the event loop's thread (a WAL
  reader never waits for the writer; 7 µs a read), and so also without awaiting: a
  metered call without an estimate is decided on the hot route like any other. Each read
  runs to its end, so it never keeps a snapshot open: it sees every transaction committed
  before it began.
- Postgres: one asyncpg connection of its own, the statement prepared, the reads of
  concurrent calls batched into one statement (below), bounded by the same timeouts as
  every other statement.

No cache: every read sees what every replica committed before it (an outcome reported to
one replica counts on the next call to any other). A failed read raises OperationalError,
answered 503 storage_unavailable: a decision is never made on totals it could not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

from sqlalchemy.exc import OperationalError

from app.config import asyncpg_dsn
from app.store.engine import CLIENT_GRACE_SECONDS
from app.store.raw import (
    asyncpg_reader,
    close_asyncpg,
    close_sqlite,
    sqlite_file,
    sqlite_reader,
)

# The plan's spent + held, the project's, and the step's failed attempts (NULL: no row, or
# no step named). A row whose sum is NULL (SQLite stores NaN as NULL) reads as infinity,
# never as "no row": Ledger.known refuses a total that is not finite (docs/ledger.md).
# Tables and columns: app/ledger/tables.py.
KNOWN_SQL = ("SELECT (SELECT ifnull(spent + held, 9e999) FROM ledger_plans WHERE plan_id = $1), "
             "(SELECT ifnull(spent + held, 9e999) FROM ledger_projects WHERE project = $2), "
             "(SELECT failures FROM ledger_steps WHERE plan_id = $1 AND step_id = $3)")

Totals = tuple[float | None, float | None, int | None]


class SQLiteKnown:
    def __init__(self, path: str, busy_timeout: float) -> None:
        self._path, self._timeout = path, busy_timeout
        self._sql = KNOWN_SQL.replace("$", "?")  # numbered: ?1 ?2 ?3
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite_reader(self._path, self._timeout)
        return self._conn

    async def read(self, plan_id: str, project: str, step_id: str | None) -> Totals:
        return self.read_now(plan_id, project, step_id)

    def read_now(self, plan_id: str, project: str, step_id: str | None) -> Totals:
        """The same read, not awaited: the hot route in the HTTP protocol decides a
        metered call without leaving it (app/authorize/service.py, from_memory)."""
        params = (plan_id, project, step_id)
        try:
            # fetchall: the statement ends here, and with it the read transaction.
            [row] = self._connection().execute(self._sql, params).fetchall()
        except sqlite3.Error as exc:
            self._close()  # opened again on the next read
            raise OperationalError(self._sql, params, exc) from exc
        return row

    def _close(self) -> None:
        close_sqlite(self._conn)
        self._conn = None

    async def close(self) -> None:
        self._close()


# The same totals for many keys in one statement (PostgresKnown batches concurrent reads).
# As KNOWN_SQL (an overflowing sum raises on Postgres: the read fails, 503).
BATCH_SQL = ("SELECT (SELECT coalesce(spent + held, 'Infinity') FROM ledger_plans "
             "WHERE plan_id = k.p), "
             "(SELECT coalesce(spent + held, 'Infinity') FROM ledger_projects "
             "WHERE project = k.j), "
             "(SELECT failures FROM ledger_steps WHERE plan_id = k.p AND step_id = k.s) "
             "FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS k(p, j, s, n) "
             "ORDER BY k.n")


class PostgresKnown:
    """One connection of its own, opened when first needed, and reads batched: the calls
    that arrive while a statement is out wait for the next one, which reads all their keys
    at once (one round trip, one statement's CPU on the server however many calls share
    it). A call only ever joins a statement not yet sent, so what it reads was committed
    no later than when that statement starts, after the call arrived: batching never
    makes a read older. A failed statement fails each of its calls (503), and its
    connection is closed and opened again for the next."""

    def __init__(self, dsn: str, *, timeout: float) -> None:
        self._dsn, self._timeout = dsn, timeout
        self._conn: Any = None
        self._statement: Any = None
        self._waiting: dict[tuple[str, str, str | None], list[asyncio.Future[Totals]]] = {}
        self._runner: asyncio.Task[None] | None = None
        self.statements = 0  # sent, for tests and curiosity

    async def _open(self) -> None:
        conn = await asyncpg_reader(self._dsn, self._timeout)
        try:
            self._statement = await conn.prepare(BATCH_SQL)
        except BaseException:
            conn.terminate()
            raise
        self._conn = conn

    async def read(self, plan_id: str, project: str, step_id: str | None) -> Totals:
        future: asyncio.Future[Totals] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault((plan_id, project, step_id), []).append(future)
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._drain(), name="toolgate-ledger-reads")
        return await future

    async def _drain(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            keys = list(batch)
            try:
                if self._conn is None:
                    await self._open()
                self.statements += 1
                rows = await self._statement.fetch(
                    [k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys],
                    timeout=self._timeout + CLIENT_GRACE_SECONDS)
            except BaseException as exc:
                self._drop()
                failed = OperationalError(BATCH_SQL, None, exc)
                for futures in batch.values():
                    for future in futures:
                        if not future.done():
                            future.set_exception(failed)
                if not isinstance(exc, Exception):
                    raise
                continue
            for key, row in zip(keys, rows, strict=True):
                for future in batch[key]:
                    if not future.done():  # a caller that went away
                        future.set_result((row[0], row[1], row[2]))

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.terminate()
        self._conn = self._statement = None

    async def close(self) -> None:
        if self._runner is not None and not self._runner.done():
            self._runner.cancel()
            with contextlib.suppress(BaseException):
                await self._runner
        conn, self._conn, self._statement = self._conn, None, None
        await close_asyncpg(conn, self._timeout)


def for_database(database_url: str, timeout: float) -> SQLiteKnown | PostgresKnown | None:
    """The ledger's reader for this database; None for in-memory SQLite (whose only
    connection is the engine's: the ledger reads through the session there)."""
    dsn = asyncpg_dsn(database_url)
    if dsn is not None:
        return PostgresKnown(dsn, timeout=timeout)
    path = sqlite_file(database_url)
    return SQLiteKnown(path, timeout) if path is not None else None
