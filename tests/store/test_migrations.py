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
    from app.decisions.tables import LogRecord

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
