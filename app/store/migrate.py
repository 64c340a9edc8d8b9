"""Alembic, driven from code: `toolgate migrate`, `serve`'s start-up check, and the tests."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "migrations"))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    config.attributes["configure_logging"] = False
    return config


def head(url: str) -> str | None:
    return ScriptDirectory.from_config(alembic_config(url)).get_current_head()


def known_revisions(url: str) -> frozenset[str]:
    return frozenset(r.revision for r in
                     ScriptDirectory.from_config(alembic_config(url)).walk_revisions())


def upgrade(url: str) -> None:
    command.upgrade(alembic_config(url), "head")


async def current_async(engine) -> str | None:  # type: ignore[no-untyped-def]
    def read(connection):  # type: ignore[no-untyped-def]
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        return await connection.run_sync(read)


def current(url: str) -> str | None:
    """The database's revision (None when it has no schema yet)."""
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine

    async def run() -> str | None:
        engine = create_async_engine(url)
        try:
            return await current_async(engine)
        finally:
            await engine.dispose()

    return asyncio.run(run())

