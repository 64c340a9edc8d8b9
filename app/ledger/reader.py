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
- Postgres: a few asyncpg connections of its own, each with the statement prepared (one
  round trip, ~95 µs of CPU), bounded by the same timeouts as every other statement.

No cache: every read sees what every replica committed before it (an outcome reported to
one replica counts on the next call to any other). A failed read raises OperationalError,
answered 503 storage_unavailable: a decision is never made on totals it could not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app.config import asyncpg_dsn

# The plan's spent + held, the project's, and the step's failed attempts (NULL: no row, or
# no step named). Tables and columns: app/ledger/tables.py.
KNOWN_SQL = ("SELECT (SELECT spent + held FROM ledger_plans WHERE plan_id = $1), "
             "(SELECT spent + held FROM ledger_projects WHERE project = $2), "
             "(SELECT failures FROM ledger_steps WHERE plan_id = $1 AND step_id = $3)")

Totals = tuple[float | None, float | None, int | None]


class SQLiteKnown:
    def __init__(self, path: str, busy_timeout: float) -> None:
        self._path, self._timeout = path, busy_timeout
        self._sql = KNOWN_SQL.replace("$", "?")  # numbered: ?1 ?2 ?3
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True,
                                   timeout=self._timeout, check_same_thread=False,
                                   isolation_level=None)
            conn.execute(f"PRAGMA busy_timeout={max(1, round(self._timeout * 1000))}")
            self._conn = conn
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
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            self._conn = None

    async def close(self) -> None:
        self._close()


class PostgresKnown:
    """Up to `size` connections, opened when first needed; a connection whose read failed
    in any way is closed and replaced by a new one on a later read."""

    def __init__(self, dsn: str, *, timeout: float, size: int = 4) -> None:
        self._dsn, self._timeout, self._size = dsn, timeout, size
        self._idle: list[tuple[Any, Any]] = []  # (connection, prepared statement)
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    async def _open(self) -> tuple[Any, Any]:
        import asyncpg

        milliseconds = str(max(1, round(self._timeout * 1000)))
        conn = await asyncpg.connect(self._dsn, timeout=self._timeout,
                                     command_timeout=self._timeout + 1.0,
                                     server_settings={"statement_timeout": milliseconds})
        try:
            return conn, await conn.prepare(KNOWN_SQL)
        except BaseException:
            conn.terminate()
            raise

    async def read(self, plan_id: str, project: str, step_id: str | None) -> Totals:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._size)
        params = (plan_id, project, step_id)
        try:
            async with asyncio.timeout(self._timeout):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise OperationalError(KNOWN_SQL, params, exc) from exc
        held: tuple[Any, Any] | None = None
        try:
            held = self._idle.pop() if self._idle else await self._open()
            row = await held[1].fetchrow(*params, timeout=self._timeout + 1.0)
        except BaseException as exc:
            if held is not None:
                held[0].terminate()
                held = None
            if isinstance(exc, Exception):
                raise OperationalError(KNOWN_SQL, params, exc) from exc
            raise
        finally:
            if held is not None:
                if self._closed:
                    held[0].terminate()
                else:
                    self._idle.append(held)
            self._slots.release()
        return row[0], row[1], row[2]

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(conn.close(), self._timeout)
            if not conn.is_closed():
                conn.terminate()


def for_database(database_url: str, timeout: float) -> SQLiteKnown | PostgresKnown | None:
    """The ledger's reader for this database; None for in-memory SQLite (whose only
    connection is the engine's: the ledger reads through the session there)."""
    dsn = asyncpg_dsn(database_url)
    if dsn is not None:
        return PostgresKnown(dsn, timeout=timeout)
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return SQLiteKnown(url.database, timeout)
