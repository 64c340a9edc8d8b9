"""One `toolgate serve` (SQLite) for the conformance comparison: the gateway's fixture."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.gateway.conftest import toolgate  # noqa: F401 - the fixture, used by name


@pytest.fixture(scope="module")
def module_database(tmp_path_factory: pytest.TempPathFactory, sqlite_template) -> Iterator[str]:
    path = tmp_path_factory.mktemp("confdb") / "toolgate.db"
    shutil.copyfile(sqlite_template, path)
    yield f"sqlite+aiosqlite:///{path}"
