"""What TOOLGATE_DATABASE_URL accepts, and the URLs toolgate's connections are made with."""

import pytest
from pydantic import ValidationError

from app.config import Settings, asyncpg_dsn


@pytest.mark.parametrize(("given", "used"), [
    ("postgresql://u:p@db:5432/toolgate", "postgresql+asyncpg://u:p@db:5432/toolgate"),
    ("postgres://u@db/toolgate", "postgresql+asyncpg://u@db/toolgate"),
    ("POSTGRESQL+ASYNCPG://u@db/toolgate", "postgresql+asyncpg://u@db/toolgate"),
    # libpq's TLS parameter, as platforms write it, in the form SQLAlchemy's asyncpg takes
    ("postgres://u@db/toolgate?sslmode=require", "postgresql+asyncpg://u@db/toolgate?ssl=require"),
    ("sqlite:///./toolgate.db", "sqlite+aiosqlite:///./toolgate.db"),
    ("sqlite+aiosqlite:///:memory:", "sqlite+aiosqlite:///:memory:"),
    (" postgresql://u@db/toolgate\n", "postgresql+asyncpg://u@db/toolgate"),
])
def test_database_urls_as_platforms_write_them_use_toolgates_drivers(given, used):
    assert Settings(database_url=given).database_url == used


@pytest.mark.parametrize("url", ["mysql://root@db/toolgate", "postgresql+psycopg://u@db/x",
                                 "toolgate.db", ""])
def test_a_database_url_toolgate_cannot_use_is_refused_naming_the_field(url):
    with pytest.raises(ValidationError) as refused:
        Settings(database_url=url)
    assert refused.value.errors()[0]["loc"] == ("database_url",)


def test_the_writer_and_the_notifier_connect_with_libpq_tls_parameters():
    """asyncpg.connect reads a DSN's ?sslmode=; a ?ssl= there it would send to the server
    as a setting, which refuses it, and the log writer could never connect."""
    assert asyncpg_dsn("postgresql+asyncpg://u:p@db/toolgate?ssl=verify-full") == \
        "postgresql://u:p@db/toolgate?sslmode=verify-full"
    assert asyncpg_dsn("postgresql+asyncpg://u@db/toolgate") == "postgresql://u@db/toolgate"
    assert asyncpg_dsn("sqlite+aiosqlite:///./toolgate.db") is None


@pytest.mark.parametrize(("given", "used"), [("info", "info"), ("WARNING", "warning"),
                                             (" Debug ", "debug"), ("trace", "trace")])
def test_log_levels_are_uvicorns(given, used):
    assert Settings(log_level=given).log_level == used


@pytest.mark.parametrize("level", ["bogus", "", "warn", "10"])
def test_a_log_level_uvicorn_does_not_know_is_refused_naming_the_field(level):
    """uvicorn looks the level up in its own table when it starts: before, an unknown one
    passed Settings and `toolgate serve` died there with a KeyError traceback."""
    with pytest.raises(ValidationError) as refused:
        Settings(log_level=level)
    assert refused.value.errors()[0]["loc"] == ("log_level",)
