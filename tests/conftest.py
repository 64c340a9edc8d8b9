"""Databases built by the migrations, one fresh database per test, on SQLite and Postgres.

A template is migrated once per session (alembic upgrade head, never create_all); each
test gets a copy (a file copy on SQLite; on Postgres a CREATE DATABASE ... TEMPLATE, or a
database an earlier test of this process used, emptied back to the template's rows under a
new name: tests/pgpool.py), so no test sees another's rows. Postgres tests skip with a
reason when no server answers, unless TOOLGATE_REQUIRE_POSTGRES=1 (CI), where a missing
Postgres is a failure.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import httpx
import pytest

from app.config import Settings
from app.main import create_app
from app.store import migrate
from tests.pgpool import Pool

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


@pytest.fixture(scope="session")
def pg_pool(pg_template: str | None) -> Iterator[Pool | None]:
    if pg_template is None:
        yield None
        return
    pool = Pool(PG_DSN, pg_template, url_of=_pg_url,
                dsn_of=lambda name: f"{PG_DSN.rsplit('/', 1)[0]}/{name}")
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path,
                 sqlite_template: Path) -> Iterator[str]:
    if request.param == "sqlite":
        path = tmp_path / "toolgate.db"
        shutil.copyfile(sqlite_template, path)
        yield f"sqlite+aiosqlite:///{path}"
        return
    yield from _pg_database(request.getfixturevalue("pg_pool"))


@pytest.fixture
def postgres_url(pg_pool: Pool | None) -> Iterator[str]:
    """A migrated Postgres database of its own, for what only Postgres does."""
    yield from _pg_database(pg_pool)


def _pg_database(pool: Pool | None) -> Iterator[str]:
    if pool is None:
        pytest.skip(f"Postgres not reachable at {PG_DSN} (set TOOLGATE_REQUIRE_POSTGRES=1 to fail)")
    name = pool.take()
    try:
        yield _pg_url(name)
    finally:
        pool.give_back(name)


@pytest.fixture
def settings(database_url: str) -> Settings:
    # The app's own decision log writer at the test's priority, not 10 steps below it
    # (the default, for a server's spare core): beside the suite's other worker at full
    # CPU it got a tenth of a core, and each app's shutdown waited ~2 s for it to start
    # and drain. Its niceness has tests of its own (tests/decisions/test_writer.py).
    return Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                    decision_log_writer_nice=0)


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


# `make test` spreads single tests over the workers (--dist loadgroup): a module's tests no
# longer wait for one worker while the other sits idle at the end. Tests that share what a
# fixture of theirs set up once (a module's or a session's server, browser, database) stay
# together on one worker, so it is set up once: such tests get an xdist_group named after
# that fixture (the module, for module- and class-scoped ones). The databases' templates
# are per worker and cheap to share, so they do not group anything.
_PER_WORKER = {"sqlite_template", "pg_template", "pg_pool"}
_ROOTS = (Path(__file__).resolve().parent, Path(__file__).resolve().parents[1] / "clients")


def _shared_fixture(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in sorted(item.fixturenames):  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name)
        if not defs or name in _PER_WORKER:
            continue
        definition = defs[-1]
        if definition.scope == "function":
            continue
        try:
            source = Path(definition.func.__code__.co_filename).resolve()
        except AttributeError:
            continue
        if not any(source.is_relative_to(root) for root in _ROOTS):
            continue  # a plugin's (pytest-asyncio's loop, ...): not ours to keep together
        if definition.scope in ("module", "class"):
            return item.nodeid.split("::", 1)[0]
        return f"{source}:{name}"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if (group := _shared_fixture(item)) is not None:
            item.add_marker(pytest.mark.xdist_group(group))
