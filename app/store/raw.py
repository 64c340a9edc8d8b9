"""Connections of a feature's own, beside the engine's pool, for work that SQLAlchemy's
session makes too slow (the reads of app/ledger/reader.py and app/decisions/reader.py,
the outcome reports of app/ledger/book.py): the same database URL, the same bounds on
every wait as the engine (app/store/engine.py)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from typing import Any

from sqlalchemy.engine import make_url

from app.store.engine import CLIENT_GRACE_SECONDS


def sqlite_file(database_url: str) -> str | None:
    """The path of a SQLite file database; None for Postgres and in-memory SQLite (whose
    only connection is the engine's)."""
    url = make_url(database_url)
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    return url.database


def sqlite_reader(path: str, timeout: float) -> sqlite3.Connection:
    """A read-only connection (WAL: it never waits for the writer) that opens no
    transaction of its own: each statement reads what was committed when it began."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout,
                           check_same_thread=False, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={max(1, round(timeout * 1000))}")
    return conn


def sqlite_writer(path: str, timeout: float, synchronous: str) -> sqlite3.Connection:
    """A connection that writes as the engine's do (WAL, the same synchronous setting and
    busy timeout, foreign keys on) and opens no transaction of its own: the caller says
    BEGIN IMMEDIATE and COMMIT."""
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute(f"PRAGMA busy_timeout={max(1, round(timeout * 1000))}")
    return conn


async def asyncpg_reader(dsn: str, timeout: float) -> Any:
    """An asyncpg connection bounded as the engine's are: connecting, and each statement
    (the server's statement_timeout, the client's deadline a grace period later)."""
    import asyncpg

    milliseconds = str(max(1, round(timeout * 1000)))
    return await asyncpg.connect(dsn, timeout=timeout,
                                 command_timeout=timeout + CLIENT_GRACE_SECONDS,
                                 server_settings={"statement_timeout": milliseconds})


def close_sqlite(conn: sqlite3.Connection | None) -> None:
    """Close, whatever state the connection is in (an open transaction rolls back)."""
    if conn is not None:
        with contextlib.suppress(sqlite3.Error):
            conn.close()


async def close_asyncpg(conn: Any, timeout: float) -> None:
    """Close gracefully within `timeout`, else drop the socket."""
    if conn is None:
        return
    with contextlib.suppress(Exception):
        await asyncio.wait_for(conn.close(), timeout)
    if not conn.is_closed():
        conn.terminate()
