"""Engine and session factory, created by the app's lifespan (never at import time)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from sqlalchemy import event, text
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from app.config import Settings

# Connection execution option marking a transaction that will write (see get_session).
WRITE_OPTION = "toolgate_write"


# How much longer than the server's statement_timeout the client waits for an answer: the
# server cancels a statement at the bound and the connection stays usable; the client's
# own deadline only ends a wait on a server that answers nothing at all (frozen, or gone
# without a word), and that connection is then dropped.
CLIENT_GRACE_SECONDS = 1.0


def make_engine(settings: Settings, *, long_statements: bool = False) -> AsyncEngine:
    """The app's engine. Every wait on the database is bounded by
    `settings.db_timeout_seconds` (docs/configuration.md): a connection from the pool, a
    new connection, a statement and the locks it waits for (SQLite: the busy timeout). A
    call past it raises, and the request is answered 503 storage_unavailable
    (app/edge/handlers.py). `long_statements`: statements may run as long as they need
    (`toolgate audit prune`, whose one DELETE may remove millions of records); connecting
    and waiting for a lock stay bounded."""
    timeout = settings.db_timeout_seconds
    if settings.is_sqlite:
        engine = create_async_engine(settings.database_url, connect_args={"timeout": timeout})

        @event.listens_for(engine.sync_engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # type: ignore[no-untyped-def]
            # WAL lets readers run beside the writer; synchronous=FULL keeps a committed
            # decision on disk through a power loss, which "no record, no allow" needs.
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={settings.sqlite_synchronous}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={max(1, round(timeout * 1000))}")
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
    milliseconds = str(max(1, round(timeout * 1000)))
    server = ({"lock_timeout": milliseconds} if long_statements
              else {"statement_timeout": milliseconds})
    connect_args: dict = {"timeout": timeout, "server_settings": server}
    if not long_statements:
        connect_args["command_timeout"] = timeout + CLIENT_GRACE_SECONDS
    engine = create_async_engine(
        settings.database_url,
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_pool_size,
        pool_timeout=timeout,
        connect_args=connect_args,
    )

    @event.listens_for(engine.sync_engine, "handle_error")
    def _drop_timed_out(context):  # type: ignore[no-untyped-def]
        # The client gave up on a statement the server never answered: what the connection
        # is doing is unknown, so it is closed at once and the pool opens a new one when
        # needed. At once: SQLAlchemy's own invalidation first tries a graceful close,
        # which waits up to 2 s more for a server that does not answer.
        if isinstance(context.original_exception, TimeoutError):
            context.is_disconnect = True
            if context.connection is not None:
                _terminate(context.connection.connection.driver_connection)

    @event.listens_for(engine.sync_engine, "checkout")
    def _ping(dbapi_connection, record, _proxy):  # type: ignore[no-untyped-def]
        # pool_pre_ping, with the same bound as every statement: a connection the server
        # closed (a restart) is replaced by a new one; one whose ping the server does not
        # answer is closed at once and the request fails (503) instead of also waiting for
        # a new connection to the same unresponsive server.
        try:
            engine.dialect.do_ping(dbapi_connection)
        except TimeoutError:
            _terminate(record.driver_connection)
            raise
        except Exception as exc:
            raise DisconnectionError(f"pooled connection lost: {exc}") from exc

    return engine


def _terminate(driver_connection) -> None:  # type: ignore[no-untyped-def]
    with contextlib.suppress(Exception):
        driver_connection.terminate()  # asyncpg: closes the socket, waits for nothing


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker:
    return async_sessionmaker(engine, expire_on_commit=False)


@contextlib.asynccontextmanager
async def read_only(sessions: async_sessionmaker[AsyncSession]) -> AsyncIterator[AsyncSession]:
    """A session for work that only reads (replay, export, verify): it never takes a write
    lock, so it never delays a decision however long it runs. SQLite: a deferred BEGIN,
    which reads a WAL snapshot beside the writer (never BEGIN IMMEDIATE, see
    `_sqlite_begin`). Postgres: a READ ONLY transaction, which the server refuses to let
    write. What such work records of itself (replay's audit record) is written at the end,
    in a short write transaction of its own."""
    async with sessions() as session:
        if session.bind.dialect.name == "postgresql":
            await session.connection(execution_options={"postgresql_readonly": True})
        yield session


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
