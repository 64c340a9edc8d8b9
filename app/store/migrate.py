"""Alembic, driven from code: `toolgate migrate`, `serve`'s start-up check, and the tests.

Rolling upgrades (docs/deployment.md, "Upgrades"): every migration module declares
`backward_compatible`: True when it only expands the schema (the code of the revision
before it serves the result as well as before: new tables, new nullable columns, indexes),
False when it contracts or changes what older code reads. Each migration run writes, in the
same transaction, the oldest revision whose code may serve the schema it leaves
(`serving_floor`) into the `toolgate_schema` row (migrations/env.py). A release whose head is
behind the schema cannot read the newer migration files; it reads that row instead, and
serves when it knows the revision named there (`schema_verdict`).
"""

from __future__ import annotations

from dataclasses import dataclass
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


# The revision that created the toolgate_schema table: below it there is no row to write.
MARK_SINCE = "0009"


def serving_floor(script: ScriptDirectory, revision: str) -> str:
    """The oldest revision whose code may serve a schema at `revision`: back from it
    through every migration marked backward_compatible (each leaves a schema the code
    before it serves), stopping at the first one that is not."""
    current = script.get_revision(revision)
    while current is not None and _compatible(current) and current.down_revision is not None:
        current = script.get_revision(current.down_revision)  # type: ignore[arg-type]
    assert current is not None
    return current.revision


def _compatible(revision) -> bool:  # type: ignore[no-untyped-def]
    mark = getattr(revision.module, "backward_compatible", None)
    if not isinstance(mark, bool):
        raise ValueError(f"migration {revision.revision} ({revision.path}) does not declare "
                         "backward_compatible = True or False")
    return mark


def mark_statement(script: ScriptDirectory, revision: str | None) -> str | None:
    """The SQL that records who may serve a schema at `revision` (None when that schema
    has no toolgate_schema table: before MARK_SINCE, or no schema at all). Plain SQL, so
    that an offline run (`alembic upgrade --sql`) writes it into its script too."""
    if revision is None:
        return None
    ancestry = {r.revision for r in script.iterate_revisions(revision, "base")}
    if MARK_SINCE not in ancestry:
        return None
    floor = serving_floor(script, revision)
    return f"UPDATE toolgate_schema SET oldest_revision = '{floor}' WHERE id = 1"


@dataclass(frozen=True)
class Verdict:
    """Whether this code may serve the database's schema, and what to tell the operator."""

    serves: bool
    message: str
    ahead: bool = False  # the schema is newer than this code's head


def schema_verdict(current: str | None, oldest: str | None, *, head: str | None,
                   known: frozenset[str]) -> Verdict:
    """`current`: the database's revision; `oldest`: its toolgate_schema row (None without
    one); `head` and `known`: this code's revisions."""
    if current == head:
        return Verdict(True, f"schema at {current}")
    if current is None:
        return Verdict(False, f"database has no schema, expected {head}: run `toolgate "
                              "migrate` first")
    if current in known:
        return Verdict(False, f"database schema is at {current}, expected {head}: run "
                              "`toolgate migrate` first")
    if oldest is not None and oldest in known:
        return Verdict(True, f"database schema is at {current}, ahead of this release "
                             f"(head {head}), and marked as served by releases from "
                             f"{oldest} on: serving it", ahead=True)
    return Verdict(False, f"database schema is at {current}, ahead of this release (head "
                          f"{head}), and not marked as served by it (oldest release that "
                          f"may serve it: {oldest or 'not recorded'}); run a newer release",
                   ahead=True)


def upgrade(url: str) -> None:
    command.upgrade(alembic_config(url), "head")


async def current_async(engine) -> str | None:  # type: ignore[no-untyped-def]
    def read(connection):  # type: ignore[no-untyped-def]
        return MigrationContext.configure(connection).get_current_revision()

    async with engine.connect() as connection:
        return await connection.run_sync(read)


async def state_async(engine) -> tuple[str | None, str | None]:  # type: ignore[no-untyped-def]
    """(the database's revision, the oldest revision that may serve it), each None when
    not recorded."""
    from sqlalchemy import inspect, text

    def read(connection):  # type: ignore[no-untyped-def]
        current = MigrationContext.configure(connection).get_current_revision()
        oldest = None
        if inspect(connection).has_table("toolgate_schema"):
            oldest = connection.execute(
                text("SELECT oldest_revision FROM toolgate_schema WHERE id = 1")).scalar()
        return current, oldest

    async with engine.connect() as connection:
        return await connection.run_sync(read)


def _run(url: str, read):  # type: ignore[no-untyped-def]
    import asyncio

    from sqlalchemy.ext.asyncio import create_async_engine
    from sqlalchemy.pool import NullPool

    # Bounded: `toolgate serve` must not hang on a database that does not answer.
    bounds = {"timeout": 10, "command_timeout": 10} if url.startswith("postgresql") else {}

    async def run():  # type: ignore[no-untyped-def]
        engine = create_async_engine(url, poolclass=NullPool, connect_args=bounds)
        try:
            return await read(engine)
        finally:
            await engine.dispose()

    return asyncio.run(run())


def current(url: str) -> str | None:
    """The database's revision (None when it has no schema yet)."""
    return _run(url, current_async)


def verdict(url: str) -> Verdict:
    """Whether this code may serve the database at `url` (`toolgate serve`'s check)."""
    current_revision, oldest = _run(url, state_async)
    return schema_verdict(current_revision, oldest, head=head(url), known=known_revisions(url))

