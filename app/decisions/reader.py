"""SQLite reads of the log for GET /v1/decisions and /v1/decisions/{id}, the operators'
page's most frequent reads, without the async driver.

Through SQLAlchemy's session on aiosqlite, one read by decision_id cost 3 ms, of which the
SQL was 13 µs: every step (check out, BEGIN, execute, fetch, roll back, return) is a hop to
the driver's thread and back. Here a read is one hop, to one thread holding one read-only
connection (WAL: it never waits for the writer), and the rows are made into records as the
session's rows are (queries.to_record). Postgres reads stay on the session."""

from __future__ import annotations

import asyncio
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from app.decisions.queries import DECISION_KINDS, Filters
from app.decisions.tables import LogRecord

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


def where(filters: Filters, before_seq: int | None) -> tuple[str, list[Any]]:
    """queries.Filters.apply, as SQLite text (tests/decisions/test_reader.py holds the two
    to the same answers)."""
    clauses, params = [], []
    if filters.kind is not None:
        clauses.append("kind = ?")
        params.append(filters.kind)
        if filters.kind != "authorize":
            clauses.append("kind <> 'authorize'")  # the partial index's own condition
    else:
        clauses.append(f"kind IN ({', '.join('?' * len(DECISION_KINDS))})")
        params.extend(DECISION_KINDS)
    for column in ("project", "plan_id", "action_id", "tool", "allowed", "code", "error"):
        value = getattr(filters, column)
        if value is not None:
            clauses.append(f"{column} = ?")
            params.append(int(value) if isinstance(value, bool) else value)
    if filters.since is not None:
        clauses.append("created_at >= ?")
        params.append(_stored(filters.since))
    if filters.until is not None:
        clauses.append("created_at < ?")
        params.append(_stored(filters.until))
    if filters.projects is not None:
        clauses.append(f"project IN ({', '.join('?' * len(filters.projects))})"
                       if filters.projects else "0")
        params.extend(filters.projects)
    if before_seq is not None:
        clauses.append("seq < ?")
        params.append(before_seq)
    return " WHERE " + " AND ".join(clauses), params


def for_database(database_url: str, busy_timeout: float) -> SQLiteReader | None:
    """The reader of a SQLite file database; None for Postgres (and in-memory SQLite)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return SQLiteReader(url.database, busy_timeout)


class SQLiteReader:
    def __init__(self, path: str, busy_timeout: float) -> None:
        self._path, self._timeout = path, busy_timeout
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="toolgate-log-reader")
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            conn = sqlite3.connect(f"file:{self._path}?mode=ro", uri=True,
                                   timeout=self._timeout, check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout={max(1, round(self._timeout * 1000))}")
            self._conn = conn
        return self._conn

    def _fetch(self, sql: str, params: list[Any]) -> list[SimpleNamespace]:
        try:
            return [_row(r) for r in self._connection().execute(sql, params).fetchall()]
        except sqlite3.Error as exc:
            self._close()  # opened again on the next read
            # As the session's errors are: 503 storage_unavailable (app/kit/handlers.py).
            raise OperationalError(sql, params, exc) from exc

    async def _run(self, sql: str, params: list[Any]) -> list[SimpleNamespace]:
        return await asyncio.get_running_loop().run_in_executor(
            self._pool, self._fetch, sql, params)

    async def get(self, decision_id: str) -> SimpleNamespace | None:
        rows = await self._run(SELECT + " WHERE decision_id = ?", [decision_id])
        return rows[0] if rows else None

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
