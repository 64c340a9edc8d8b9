"""Alembic environment: async engines, metadata from app.store.base.

The URL is taken from the Alembic config's `sqlalchemy.url` when a caller set it (the
`toolgate migrate` command and the tests do), else from TOOLGATE_DATABASE_URL.
"""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy import pool
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.store.migrate import mark_statement
from app.tables import metadata

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings().database_url


def _mark_serving(ctx, step, heads, run_args) -> None:  # type: ignore[no-untyped-def]
    """After each migration, in its transaction: who may serve the schema it leaves (the
    toolgate_schema row; app/store/migrate.py). Written here, not by each migration, so
    that no migration can forget it; each migration module declares backward_compatible."""
    (revision,) = heads or (None,)
    statement = mark_statement(context.script, revision)
    if statement is not None:
        ctx.execute(statement)


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        on_version_apply=_mark_serving,
    )


def _run_sync(connection: Connection) -> None:
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    engine = create_async_engine(_url(), poolclass=pool.NullPool)
    async with engine.connect() as connection:
        await connection.run_sync(_run_sync)
    await engine.dispose()


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True,
                      on_version_apply=_mark_serving)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run_sync(connection)
    else:
        asyncio.run(_run_async())
