"""Databases built by the migrations, one fresh database per test, on SQLite and Postgres.

A template is migrated once per session (alembic upgrade head, never create_all); each
test gets a copy (a file copy on SQLite, CREATE DATABASE ... TEMPLATE on Postgres), so no
test sees another's rows. Postgres tests skip with a reason when no server answers, unless
TOOLGATE_REQUIRE_POSTGRES=1 (CI), where a missing Postgres is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.main import create_app
from app.store import migrate

PG_DSN = os.environ.get("TOOLGATE_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
# One template per test run: runs in parallel (several checkouts, one server) must not drop
# each other's template.
PG_TEMPLATE = f"toolgate_test_template_{os.getpid()}"
# Every app the tests build accepts this admin key; `client` sends it by default.
ADMIN_TOKEN = "test-admin-token"
ADMIN_HEADERS = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
REQUIRE_PG = os.environ.get("TOOLGATE_REQUIRE_POSTGRES") == "1"


def _pg_url(database: str) -> str:
    base = PG_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
    return f"{base}/{database}"


async def _pg_admin(sql: str) -> None:
    conn = await asyncpg.connect(PG_DSN, timeout=5)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    migrate.upgrade(f"sqlite+aiosqlite:///{path}")
    return path


@pytest.fixture(scope="session")
def pg_template() -> Iterator[str | None]:
    try:
        asyncio.run(_pg_admin("SELECT 1"))
    except Exception as exc:
        if REQUIRE_PG:
            pytest.fail(f"Postgres is required (TOOLGATE_REQUIRE_POSTGRES=1) but: {exc}")
        yield None
        return
    asyncio.run(_pg_admin(f"DROP DATABASE IF EXISTS {PG_TEMPLATE} WITH (FORCE)"))
    asyncio.run(_pg_admin(f"CREATE DATABASE {PG_TEMPLATE}"))
    try:
        migrate.upgrade(_pg_url(PG_TEMPLATE))
        yield PG_TEMPLATE
    finally:
        asyncio.run(_pg_admin(f"DROP DATABASE IF EXISTS {PG_TEMPLATE} WITH (FORCE)"))


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path,
                 sqlite_template: Path) -> Iterator[str]:
    if request.param == "sqlite":
        path = tmp_path / "toolgate.db"
        shutil.copyfile(sqlite_template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    yield from _pg_database(request.getfixturevalue("pg_template"))


@pytest.fixture
def postgres_url(pg_template: str | None) -> Iterator[str]:
    """A migrated Postgres database of its own, for what only Postgres does."""
    yield from _pg_database(pg_template)


def _pg_database(template: str | None) -> Iterator[str]:
    if template is None:
        pytest.skip(f"Postgres not reachable at {PG_DSN} (set TOOLGATE_REQUIRE_POSTGRES=1 to fail)")
    name = f"toolgate_test_{uuid.uuid4().hex[:12]}"
    asyncio.run(_pg_admin(f"CREATE DATABASE {name} TEMPLATE {template}"))
    try:
        yield _pg_url(name)
    finally:
        asyncio.run(_pg_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, admin_token=ADMIN_TOKEN)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as c:
        yield c


@asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An admin client of an app with these settings, its lifespan running."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://toolgate",
                                     headers=ADMIN_HEADERS) as c:
            c.app = app  # type: ignore[attr-defined]
            yield c


@pytest.fixture(params=["protocol", "fast-path", "fastapi-route"])
async def both_paths(request: pytest.FixtureRequest,
                     settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """A client for tests that must hold on every way the hot route is served: through
    `toolgate serve`'s HTTP protocol (app/edge/connection.py, bytes in and out), the
    plain-ASGI route (app/authorize/hotpath.py) and the FastAPI route they stand in for: same
    answers, same envelope."""
    from app.edge.connection import HttpProtocol
    from tests.uvicorn_wire import ProtocolTransport

    app = create_app(settings.model_copy(update={"fast_path": request.param != "fastapi-route"}))
    async with app.router.lifespan_context(app):
        transport: httpx.AsyncBaseTransport = (
            ProtocolTransport(app, HttpProtocol) if request.param == "protocol"
            else httpx.ASGITransport(app=app))
        async with httpx.AsyncClient(transport=transport, base_url="http://toolgate",
                                     headers=ADMIN_HEADERS) as c:
            c.app = app  # type: ignore[attr-defined]
            yield c
