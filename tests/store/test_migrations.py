"""The schema is built by the migrations, and the models never drift from them."""

import asyncio
from datetime import UTC, datetime

import httpx
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.main import create_app
from app.store import migrate
from app.tables import metadata


async def _diff(url: str) -> list:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(
                lambda sync: compare_metadata(MigrationContext.configure(sync), metadata))
    finally:
        await engine.dispose()


def test_models_match_migrations(database_url):
    """`alembic check` on both backends: no difference between models and migrated schema."""
    assert asyncio.run(_diff(database_url)) == []
    assert migrate.current(database_url) == migrate.head(database_url)


def test_downgrade_to_base_and_back(database_url):
    from alembic import command
    command.downgrade(migrate.alembic_config(database_url), "base")
    assert migrate.current(database_url) is None
    migrate.upgrade(database_url)
    assert migrate.current(database_url) == migrate.head(database_url)


async def test_health_and_readiness(client):
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    r = await client.get("/readyz")
    assert r.status_code == 200 and r.json() == {"status": "ready"}


def test_readiness_fails_when_schema_is_behind(database_url):
    from alembic import command
    command.downgrade(migrate.alembic_config(database_url), "0001")

    async def probe() -> httpx.Response:
        app = create_app(Settings(database_url=database_url))
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://t") as c:
                return await c.get("/readyz")

    r = asyncio.run(probe())
    assert r.status_code == 503
    assert "toolgate migrate" in r.json()["error"]["message"]


def test_readiness_holds_when_schema_is_ahead_of_the_code(database_url):
    """During a rolling upgrade the schema is migrated first; old replicas keep serving."""
    from sqlalchemy import text

    async def probe() -> httpx.Response:
        engine = create_async_engine(database_url)
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE alembic_version SET version_num = 'future_rev'"))
        await engine.dispose()
        app = create_app(Settings(database_url=database_url))
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://t") as c:
                return await c.get("/readyz")

    assert asyncio.run(probe()).status_code == 200


def _kind_plan(url: str, kind: str) -> str:
    """SQLite's plan for the newest page of one kind, as the API's query asks for it, on a
    log of mostly authorize decisions."""
    import sqlite3

    from sqlalchemy import select
    from sqlalchemy.dialects import sqlite
    from sqlalchemy.engine import make_url

    from app.decisions.queries import Filters
    from app.log.tables import LogRecord

    query = (Filters(kind=kind).apply(select(LogRecord))
             .order_by(LogRecord.seq.desc()).limit(101))
    sql = str(query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))
    conn = sqlite3.connect(make_url(url).database)
    try:
        conn.execute(
            "WITH RECURSIVE g(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM g WHERE x < 5000) "
            "INSERT INTO decision_log (seq, decision_id, kind, created_at, detail, prev_hash, "
            "hash) SELECT x, 'id-' || x, CASE WHEN x % 500 = 0 THEN 'config' "
            "ELSE 'authorize' END, '2026-12-01 00:00:00', '{}', '', '' FROM g")
        conn.execute("ANALYZE")
        return " ".join(row[-1] for row in conn.execute("EXPLAIN QUERY PLAN " + sql))
    finally:
        conn.close()


def test_sqlite_kind_index_leaves_authorize_out_and_still_serves_rare_kinds(tmp_path):
    """Migration 0006: authorize decisions (nearly every record) are not in SQLite's kind
    index, and a kind= filter on a rare kind still finds its records through it."""
    import sqlite3

    url = f"sqlite+aiosqlite:///{tmp_path / 'kinds.db'}"
    migrate.upgrade(url)
    conn = sqlite3.connect(tmp_path / "kinds.db")
    (sql,), = conn.execute("SELECT sql FROM sqlite_master WHERE name = "
                           "'ix_decision_log_kind_seq'").fetchall()
    conn.close()
    assert "WHERE kind <> 'authorize'" in sql
    assert "USING INDEX ix_decision_log_kind_seq" in _kind_plan(url, "config")
    # Before 0006 the index was full; downgrading restores it, and upgrading again works.
    from alembic import command
    command.downgrade(migrate.alembic_config(url), "0005")
    conn = sqlite3.connect(tmp_path / "kinds.db")
    (sql,), = conn.execute("SELECT sql FROM sqlite_master WHERE name = "
                           "'ix_decision_log_kind_seq'").fetchall()
    conn.close()
    assert "WHERE" not in sql
    migrate.upgrade(url)
    assert migrate.current(url) == migrate.head(url)


def test_0008_gives_existing_keys_and_project_settings_their_defaults(database_url):
    """Rows written before migration 0008 (a key, a project's registry settings) come out
    of it with stateless false, no principal (shown as the key's id) and approval_mode
    client_flag, shadow_profile null; deny_unregistered_tools is kept."""
    from alembic import command
    from sqlalchemy import text

    from tests.conftest import ADMIN_HEADERS

    async def api(calls):  # type: ignore[no-untyped-def]
        app = create_app(Settings(database_url=database_url, admin_token="test-admin-token"))
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://t", headers=ADMIN_HEADERS) as c:
                return [await c.request(method, path, **kwargs)
                        for method, path, kwargs in calls]

    command.downgrade(migrate.alembic_config(database_url), "0007")

    async def write_at_0007() -> None:  # what the previous release writes
        engine = create_async_engine(database_url)
        async with engine.begin() as conn:
            await conn.execute(text(
                "INSERT INTO api_keys (id, name, role, projects, key_hash, prefix, created_at) "
                "VALUES ('key_old', 'old agent', 'agent', NULL, :hash, 'tg_old', :now)"),
                {"hash": "0" * 64, "now": datetime.now(UTC)})
            await conn.execute(text(
                "INSERT INTO project_registry_settings (project, deny_unregistered_tools, "
                "updated_at) VALUES ('web', true, :now)"), {"now": datetime.now(UTC)})
        await engine.dispose()

    asyncio.run(write_at_0007())
    migrate.upgrade(database_url)
    keys, settings = asyncio.run(api([("GET", "/v1/keys", {}),
                                      ("GET", "/v1/projects/web/settings", {})]))
    (key,) = keys.json()["items"]
    assert (key["id"], key["stateless"], key["principal"]) == ("key_old", False, "key_old")
    body = settings.json()
    assert (body["deny_unregistered_tools"], body["approval_mode"], body["shadow_profile"]) == (
        True, "client_flag", None)


# --- rolling upgrades: a schema ahead of the code ---------------------------------------


def test_every_migration_declares_whether_the_release_before_it_may_serve_its_schema():
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config("sqlite+aiosqlite://"))
    for revision in script.walk_revisions():
        assert isinstance(getattr(revision.module, "backward_compatible", None), bool), (
            f"{revision.path}: declare backward_compatible = True (expand only: the code "
            "of the revision before serves the schema it leaves) or False")


FUTURE = '''"""a migration of a release after this one (tests/store/test_migrations.py)"""

import sqlalchemy as sa
from alembic import op

revision = "{revision}"
down_revision = "{down}"
branch_labels = None
depends_on = None
backward_compatible = {compatible}


def upgrade() -> None:
    op.create_table("{table}", sa.Column("id", sa.Integer(), primary_key=True))


def downgrade() -> None:
    op.drop_table("{table}")
'''


def _future_release(tmp_path, url: str, *migrations: tuple[str, bool]):  # type: ignore[no-untyped-def]
    """An Alembic config whose scripts are this release's plus `migrations` (revision,
    backward_compatible) after its head: the next release's `toolgate migrate`."""
    import shutil

    folder = tmp_path / "next-release-migrations"
    shutil.copytree(migrate.ROOT / "migrations", folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    down = migrate.head(url)
    for revision, compatible in migrations:
        (folder / "versions" / f"{revision}-future.py").write_text(FUTURE.format(
            revision=revision, down=down, compatible=compatible, table=f"future_{revision}"))
        down = revision
    config = migrate.alembic_config(url)
    config.set_main_option("script_location", str(folder))
    return config


def _oldest(url: str) -> str | None:
    from sqlalchemy import text

    async def read() -> str | None:
        engine = create_async_engine(url)
        try:
            async with engine.connect() as conn:
                return await conn.scalar(
                    text("SELECT oldest_revision FROM toolgate_schema WHERE id = 1"))
        finally:
            await engine.dispose()

    return asyncio.run(read())


def _readyz(url: str) -> httpx.Response:
    async def probe() -> httpx.Response:
        app = create_app(Settings(database_url=url))
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                         base_url="http://t") as c:
                return await c.get("/readyz")

    return asyncio.run(probe())


def test_the_migrations_record_which_releases_may_serve_the_schema(database_url):
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config(database_url))
    head = migrate.head(database_url)
    assert _oldest(database_url) == migrate.serving_floor(script, head)
    assert migrate.verdict(database_url).serves


def test_a_release_serves_a_schema_ahead_only_when_its_migrations_say_so(database_url,
                                                                        tmp_path):
    """Issue 22 item 12: the next release migrates (a fake future revision); this release
    keeps serving and may restart while every migration past its head is expand-only, and
    refuses (serve exits 2, /readyz 503) once one is not. Back down, it serves again."""
    from alembic import command

    head = migrate.head(database_url)
    expand = _future_release(tmp_path, database_url, ("f001", True))
    command.upgrade(expand, "head")
    assert migrate.current(database_url) == "f001"
    assert _oldest(database_url) == _oldest_known(database_url)
    verdict = migrate.verdict(database_url)
    assert verdict.serves and verdict.ahead, verdict
    assert _readyz(database_url).status_code == 200

    contract = _future_release(tmp_path / "later", database_url, ("f001", True),
                               ("f002", False))
    command.upgrade(contract, "head")
    assert _oldest(database_url) == "f002"
    verdict = migrate.verdict(database_url)
    assert not verdict.serves and "f002" in verdict.message, verdict
    r = _readyz(database_url)
    assert r.status_code == 503 and r.json()["error"]["details"]["oldest"] == "f002"
    if not database_url.startswith("sqlite"):  # on SQLite serve migrates: see the next test
        from tests.cli.test_cli import _run

        served = _run("serve", "--port", "1", env={"TOOLGATE_DATABASE_URL": database_url})
        assert served.returncode == 2 and "not marked as served by it" in served.stderr

    command.downgrade(contract, head)  # the next release's downgrade: this one serves again
    assert migrate.current(database_url) == head
    assert migrate.verdict(database_url).serves
    assert _readyz(database_url).status_code == 200


def _oldest_known(url: str) -> str:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(migrate.alembic_config(url))
    return migrate.serving_floor(script, migrate.head(url))


def test_an_offline_migration_script_records_who_may_serve_it_too():
    import io

    from alembic import command

    config = migrate.alembic_config("sqlite+aiosqlite:///unused.db")
    config.stdout = out = io.StringIO()
    config.output_buffer = out
    # From 0008: offline scripts from base stop at 0002's bulk insert, and 0008 alters
    # SQLite tables in batch mode, which needs a live database (separate matters).
    command.upgrade(config, "0008:head", sql=True)
    assert (f"UPDATE toolgate_schema SET oldest_revision = '{_oldest_known('sqlite://')}'"
            in out.getvalue())
