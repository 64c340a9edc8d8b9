"""Reads of the log for GET /v1/decisions and /v1/decisions/{id}, the operators' page's
most frequent reads, without SQLAlchemy's session.

Through the session on aiosqlite, one read by decision_id cost 3 ms, of which the SQL was
13 µs: every step (check out, BEGIN, execute, fetch, roll back, return) is a hop to the
driver's thread and back; on Postgres the session's check out, ping and BEGIN/ROLLBACK are
round trips of their own (one decision read 33 ms p50 under load, 1.5 ms of CPU a session
on an idle 2-core VM). Here:

- SQLite: one hop to one thread holding one read-only connection (WAL: it never waits for
  the writer);
- Postgres: a few asyncpg connections of its own, one statement a read (asyncpg prepares
  and caches it per connection), bounded by the same timeouts as every other statement.

Either way the rows are made into records as the session's rows are (queries.to_record),
and a failed read raises OperationalError (503 storage_unavailable)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy.exc import OperationalError

from app.config import asyncpg_dsn
from app.decisions.queries import DECISION_KINDS, Filters
from app.log.tables import LogRecord
from app.store.base import floats_for_huge_ints
from app.store.engine import CLIENT_GRACE_SECONDS
from app.store.raw import asyncpg_reader, sqlite_file, sqlite_reader

COLUMNS = [c.name for c in LogRecord.__table__.columns]
SELECT = "SELECT " + ", ".join(f'"{c}"' for c in COLUMNS) + " FROM decision_log"


def _stored(moment: datetime) -> str:
    """A time as SQLite holds the log's (app/store/base.py: naive UTC text)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _row(values: tuple) -> SimpleNamespace:
    row = dict(zip(COLUMNS, values, strict=True))
    text = row["created_at"]
    row["created_at"] = datetime.fromisoformat(text).replace(tzinfo=UTC)
    if row["allowed"] is not None:
        row["allowed"] = bool(row["allowed"])
    return SimpleNamespace(**row)


# What GET /v1/decisions/{id} shows of an outcome (app/ledger/service.py outcome_out).
OUTCOME_COLUMNS = ("status", "cost", "verified", "error", "args_sha256", "artifacts",
                   "error_class", "unverified", "args_mismatch", "reported_at")
# One decision and its outcome (NULLs until one is reported: status is never NULL in a
# stored one), in one statement: GET /v1/decisions/{id}.
WITH_OUTCOME = ("SELECT " + ", ".join(f'd."{c}"' for c in COLUMNS) + ", "
                + ", ".join(f"o.{c}" for c in OUTCOME_COLUMNS)
                + " FROM decision_log d LEFT JOIN outcomes o ON o.decision_id = d.decision_id"
                " WHERE d.decision_id = $1")
_SPLIT = len(COLUMNS)


def _sqlite_with_outcome(values: tuple) -> SimpleNamespace:
    outcome = values[_SPLIT:]
    return SimpleNamespace(row=_row(values[:_SPLIT]),
                           outcome=None if outcome[0] is None else _sqlite_outcome(outcome))


def _sqlite_outcome(values: tuple) -> SimpleNamespace:
    """An outcome row as the session reads it on SQLite (app/store/base.py types)."""
    row = dict(zip(OUTCOME_COLUMNS, values, strict=True))
    for name in ("verified", "unverified", "args_mismatch"):
        if row[name] is not None:
            row[name] = bool(row[name])
    if row["artifacts"] is not None:
        row["artifacts"] = json.loads(row["artifacts"])
    row["reported_at"] = datetime.fromisoformat(row["reported_at"]).replace(tzinfo=UTC)
    return SimpleNamespace(**row)


def where(filters: Filters, before_seq: int | None, *,
          postgres: bool = False) -> tuple[str, list[Any]]:
    """queries.Filters.apply, as SQL text: `?` placeholders and SQLite's stored values, or
    Postgres's `$n` and typed values (tests/decisions/test_reader.py holds both to the
    session's answers)."""
    clauses: list[str] = []
    params: list[Any] = []

    def param(value: Any) -> str:
        params.append(value)
        return f"${len(params)}" if postgres else "?"

    if filters.kind is not None:
        clauses.append(f"kind = {param(filters.kind)}")
        if filters.kind != "authorize":
            clauses.append("kind <> 'authorize'")  # the partial index's own condition
    else:
        clauses.append(f"kind IN ({', '.join(param(k) for k in DECISION_KINDS)})")
    for column in ("project", "plan_id", "action_id", "tool", "allowed", "code", "error"):
        value = getattr(filters, column)
        if value is not None:
            if isinstance(value, bool) and not postgres:
                value = int(value)
            clauses.append(f"{column} = {param(value)}")
    if filters.since is not None:
        since = filters.since if postgres else _stored(filters.since)
        clauses.append(f"created_at >= {param(since)}")
    if filters.until is not None:
        until = filters.until if postgres else _stored(filters.until)
        clauses.append(f"created_at < {param(until)}")
    if filters.projects is not None:
        clauses.append(f"project IN ({', '.join(param(p) for p in filters.projects)})"
                       if filters.projects else "1 = 0")
    if before_seq is not None:
        clauses.append(f"seq < {param(before_seq)}")
    return " WHERE " + " AND ".join(clauses), params


def for_database(database_url: str,
                 busy_timeout: float) -> SQLiteReader | PostgresReader | None:
    """The reader of a SQLite file database or a Postgres one; None for in-memory SQLite
    (its only connection is the engine's: reads go through the session there)."""
    dsn = asyncpg_dsn(database_url)
    if dsn is not None:
        return PostgresReader(dsn, busy_timeout)
    path = sqlite_file(database_url)
    return SQLiteReader(path, busy_timeout) if path is not None else None


class SQLiteReader:
    def __init__(self, path: str, busy_timeout: float) -> None:
        self._path, self._timeout = path, busy_timeout
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="toolgate-log-reader")
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = sqlite_reader(self._path, self._timeout)
        return self._conn

    def _fetch(self, sql: str, params: list[Any],
               make: Callable[[tuple], SimpleNamespace] = _row) -> list[SimpleNamespace]:
        try:
            return [make(r) for r in self._connection().execute(sql, params).fetchall()]
        except sqlite3.Error as exc:
            self._close()  # opened again on the next read
            # As the session's errors are: 503 storage_unavailable (app/edge/handlers.py).
            raise OperationalError(sql, params, exc) from exc

    async def _run(self, sql: str, params: list[Any],
                   make: Callable[[tuple], SimpleNamespace] = _row) -> list[SimpleNamespace]:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self._fetch, sql, params, make)

    async def get(self, decision_id: str) -> SimpleNamespace | None:
        rows = await self._run(SELECT + " WHERE decision_id = ?", [decision_id])
        return rows[0] if rows else None

    async def get_with_outcome(self, decision_id: str
                               ) -> tuple[SimpleNamespace | None, SimpleNamespace | None]:
        """The record and its outcome row (SPEC §11: the attributes ledger.outcome_out
        reads; None until one is reported), in one read."""
        rows = await self._run(WITH_OUTCOME.replace("$1", "?"), [decision_id],
                               _sqlite_with_outcome)
        return (rows[0].row, rows[0].outcome) if rows else (None, None)

    async def page(self, filters: Filters, *, before_seq: int | None,
                   limit: int) -> list[SimpleNamespace]:
        clause, params = where(filters, before_seq)
        return await self._run(f"{SELECT}{clause} ORDER BY seq DESC LIMIT ?", [*params, limit])

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._pool.submit(self._close).result()
        self._pool.shutdown()


class PostgresReader:
    """Up to `size` asyncpg connections, opened when first needed; one whose read failed
    in any way is closed (a later read opens a new one)."""

    def __init__(self, dsn: str, timeout: float, *, size: int = 4) -> None:
        self._dsn, self._timeout, self._size = dsn, timeout, size
        self._idle: list[Any] = []
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    async def _run(self, sql: str, params: list[Any]) -> list[Any]:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._size)
        try:
            async with asyncio.timeout(self._timeout):
                await self._slots.acquire()
        except TimeoutError as exc:
            raise OperationalError(sql, params, exc) from exc
        conn = None
        try:
            conn = self._idle.pop() if self._idle else await asyncpg_reader(self._dsn,
                                                                         self._timeout)
            return await conn.fetch(sql, *params, timeout=self._timeout + CLIENT_GRACE_SECONDS)
        except BaseException as exc:
            if conn is not None:
                conn.terminate()
                conn = None
            if isinstance(exc, Exception):
                raise OperationalError(sql, params, exc) from exc
            raise
        finally:
            if conn is not None:
                if self._closed:
                    conn.terminate()
                else:
                    self._idle.append(conn)
            self._slots.release()

    async def get(self, decision_id: str) -> SimpleNamespace | None:
        rows = await self._run(SELECT + " WHERE decision_id = $1", [decision_id])
        return SimpleNamespace(**dict(rows[0])) if rows else None

    async def page(self, filters: Filters, *, before_seq: int | None,
                   limit: int) -> list[SimpleNamespace]:
        clause, params = where(filters, before_seq, postgres=True)
        rows = await self._run(f"{SELECT}{clause} ORDER BY seq DESC LIMIT ${len(params) + 1}",
                               [*params, limit])
        return [SimpleNamespace(**dict(r)) for r in rows]

    async def get_with_outcome(self, decision_id: str
                               ) -> tuple[SimpleNamespace | None, SimpleNamespace | None]:
        rows = await self._run(WITH_OUTCOME, [decision_id])
        if not rows:
            return None, None
        values = tuple(rows[0])
        row = SimpleNamespace(**dict(zip(COLUMNS, values[:_SPLIT], strict=True)))
        if values[_SPLIT] is None:
            return row, None
        outcome = dict(zip(OUTCOME_COLUMNS, values[_SPLIT:], strict=True))
        if outcome["artifacts"] is not None:  # JSONB text, decoded as the session does
            outcome["artifacts"] = floats_for_huge_ints(json.loads(outcome["artifacts"]))
        return row, SimpleNamespace(**outcome)

    def close(self) -> None:
        """Synchronous, as SQLiteReader's (main.py's shutdown): the connections are ended
        without a goodbye, which the server takes as a client gone."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.terminate()
