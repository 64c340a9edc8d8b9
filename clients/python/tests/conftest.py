"""Fixtures for the toolgate client tests.

Unit tests use a scripted fake (httpx.MockTransport, see _toolgate_client_testkit.py).

Integration hook
----------------
Integration tests against a real service should request the ``toolgate_base_url``
fixture (and ``toolgate_token`` / ``live_client`` / ``live_async_client``). By default
it reads ``TOOLGATE_CLIENT_TEST_URL`` (and ``TOOLGATE_CLIENT_TEST_TOKEN``) and skips
when unset -- unless ``TOOLGATE_CLIENT_REQUIRE_LIVE=1``, which turns the skip into a
failure (use it in CI). A suite that starts the service itself (``toolgate serve`` on a
free port, or uvicorn in a thread) should simply override ``toolgate_base_url`` and
``toolgate_token`` in its own conftest.

The package is imported from ``../src`` (put first on ``sys.path`` here), so the suite
always tests this checkout's client, even when another copy is installed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

# Test the source beside these tests, whichever copy of the package is installed (several
# checkouts may share one virtual environment with another checkout's editable install).
SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from toolgate_client import AsyncClient, Client  # noqa: E402


@pytest.fixture(scope="session")
def toolgate_base_url() -> str:
    url = os.environ.get("TOOLGATE_CLIENT_TEST_URL")
    if not url:
        if os.environ.get("TOOLGATE_CLIENT_REQUIRE_LIVE") == "1":
            pytest.fail("TOOLGATE_CLIENT_REQUIRE_LIVE=1 but TOOLGATE_CLIENT_TEST_URL is unset")
        pytest.skip("no live toolgate: set TOOLGATE_CLIENT_TEST_URL or override toolgate_base_url")
    return url


@pytest.fixture(scope="session")
def toolgate_token() -> str | None:
    return os.environ.get("TOOLGATE_CLIENT_TEST_TOKEN") or None


@pytest.fixture
def live_client(toolgate_base_url: str, toolgate_token: str | None) -> Iterator[Client]:
    with Client(toolgate_base_url, token=toolgate_token, timeout=5.0) as client:
        yield client


@pytest_asyncio.fixture
async def live_async_client(
    toolgate_base_url: str, toolgate_token: str | None
) -> AsyncIterator[AsyncClient]:
    async with AsyncClient(toolgate_base_url, token=toolgate_token, timeout=5.0) as client:
        yield client
