"""The framework adapters (toolgate_client.adapters) against a served toolgate.

One `toolgate serve` per session (SQLite, an admin key); each test gets a plan of its own
whose profile refuses unsafe tools, and a registry in which `write_note` writes (safe) and
`run_shell` is unsafe. The frameworks run for real, with scripted models.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ADMIN_TOKEN
from tests.serving import free_port, serve, stop

CLIENT_SRC = Path(__file__).resolve().parents[2] / "clients" / "python" / "src"
if str(CLIENT_SRC) not in sys.path:  # this checkout's client, as tests/client does
    sys.path.insert(0, str(CLIENT_SRC))

from toolgate_client import Client  # noqa: E402

WRITE = {"capability": {"writes": True, "checkpointable": True, "unsafe": False},
         "safety_category": "safe"}
SHELL = {"capability": {"writes": True, "checkpointable": True, "unsafe": True},
         "safety_category": "safe"}


@pytest.fixture(scope="session")
def toolgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    folder = tmp_path_factory.mktemp("adapters")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{folder / 'tg.db'}",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN_TOKEN}, folder / "server.log")
    try:
        with Client(url, token=ADMIN_TOKEN, timeout=10) as admin:
            admin.request("PUT", "/v1/profiles/adapters-strict", {
                "safety": {"allow_unsafe_tools": False, "require_sandbox": False}})
            admin.request("PUT", "/v1/actions/adapters", {
                "project": "adapters", "read_only": False,
                "automation_profile": "adapters-strict"})
            # The Claude Agent SDK's tools by Claude Code's names (as examples/ maps them).
            for name, spec in (("write_note", WRITE), ("run_shell", SHELL), ("Write", WRITE),
                               ("Bash", SHELL)):
                admin.request("PUT", f"/v1/tools/{name}", spec)
        yield url
    finally:
        stop(proc)


@pytest.fixture
def client(toolgate: str) -> Iterator[Client]:
    with Client(toolgate, token=ADMIN_TOKEN, timeout=10) as c:
        yield c


@pytest.fixture
def plan(client: Client) -> str:
    return client.create_plan("adapters", plan_id=f"adapters-{uuid.uuid4().hex[:12]}")["plan_id"]


@pytest.fixture
def down() -> Iterator[Client]:
    """A client of a toolgate that is not there (a closed loopback port)."""
    with Client(f"http://127.0.0.1:{free_port()}", token=ADMIN_TOKEN, retries=0,
                timeout=2) as c:
        yield c


def decisions(client: Client, plan_id: str) -> list[dict[str, Any]]:
    """The plan's authorize decisions, oldest first, each with its outcome (or None)."""
    items = client.request("GET", "/v1/decisions", params={"plan_id": plan_id})["items"]
    return [client.request("GET", f"/v1/decisions/{d['decision_id']}")
            for d in reversed(items) if d["kind"] == "authorize"]
