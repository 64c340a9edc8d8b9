"""The schema is built by the migrations, and the models never drift from them."""

import asyncio

import httpx
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.main import create_app
from app.store import migrate
from app.store.schema import metadata


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
