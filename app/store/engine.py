"""Engine and session factory, created by the app's lifespan (never at import time)."""

from __future__ import annotations

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker, create_async_engine

from app.config import Settings

# Connection execution option marking a transaction that will write (see get_session).
WRITE_OPTION = "toolgate_write"


def make_engine(settings: Settings) -> AsyncEngine:
    if settings.is_sqlite:
        engine = create_async_engine(settings.database_url, connect_args={"timeout": 30})

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            # WAL lets readers run beside the writer; synchronous=FULL keeps a committed
            # decision on disk through a power loss, which "no record, no allow" needs.
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={settings.sqlite_synchronous}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()
            # SQLAlchemy's recipe: the driver must not open transactions on its own, so that
            # the "begin" hook below decides how each one starts (and SAVEPOINTs work).
            dbapi_connection.isolation_level = None

        @event.listens_for(engine.sync_engine, "begin")
        def _sqlite_begin(conn):  # type: ignore[no-untyped-def]
            # A write transaction takes the write lock up front (BEGIN IMMEDIATE): two
            # concurrent writes then queue instead of one failing when it upgrades from
            # reading, and read-then-insert is safe from a concurrent duplicate.
            write = conn.get_execution_options().get(WRITE_OPTION)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

        return engine
    return create_async_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_pre_ping=True,
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)


async def get_locked(session, model, key):  # type: ignore[no-untyped-def]
    """The row as it is now (None when there is none), locked FOR UPDATE until the
    transaction ends: what a read-modify-write must start from, and what its audit record's
    `before` must show. `populate_existing`: a row this session read earlier (before the
    lock was granted) would otherwise come back as that stale copy, not as the row the
    lock protects: on Postgres concurrent identical PUTs then each saw the old content and
    each made a new version (issue 22 item 5)."""
    return await session.get(model, key, with_for_update=True, populate_existing=True)


async def lock_key(session, key: str) -> None:  # type: ignore[no-untyped-def]
    """Serialise writers of one resource for the rest of the transaction. On Postgres a
    transaction-level advisory lock (a row that does not exist yet cannot be locked FOR
    UPDATE); on SQLite the write transaction already holds the database's write lock."""
    if session.bind.dialect.name == "postgresql":
        await session.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"),
                              {"key": key})
