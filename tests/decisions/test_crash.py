"""No record, no allow, through a SIGKILL: every decision a client received is in the log,
with the same outcome, after the server is killed mid-load."""

import asyncio
import os
import signal
import time

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from tests.serving import decision_log_writers, serve, stop

# End to end: real `toolgate serve` processes. `make test` runs these last.
pytestmark = pytest.mark.slow

TOKEN = "crash-test-admin-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
READ = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                          "unsafe": False}}
WRITE = {"name": "fs.write", "capability": {"writes": True, "checkpointable": True,
                                            "unsafe": False}}


async def _load(url: str, received: dict, stop_at: float) -> None:
    async with httpx.AsyncClient(base_url=url, headers=AUTH, timeout=5) as client:
        n = 0
        while time.monotonic() < stop_at:
            n += 1
            tool = READ if n % 2 else WRITE
            try:
                r = await client.post("/v1/authorize-tool",
                                      json={"plan_id": "p-1", "tool": tool})
            except httpx.HTTPError:
                return  # the server is gone
            if r.status_code == 200:
                body = r.json()
                received[body["decision_id"]] = body["allowed"]


async def _recorded(database_url: str) -> dict:
    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(text(
                "SELECT decision_id, allowed FROM decision_log WHERE kind = 'authorize'"))
            return {d: bool(a) for d, a in rows}
    finally:
        await engine.dispose()


def _serve_plan(database_url: str, tmp_path, workers: int = 1):  # type: ignore[no-untyped-def]
    """A real server with one plan, p-1, to authorize against."""
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": TOKEN},
                      tmp_path / "server.log", workers=workers)
    try:
        httpx.put(f"{url}/v1/actions/a", headers=AUTH, json={"project": "p"}).raise_for_status()
        httpx.post(f"{url}/v1/plans", headers=AUTH,
                   json={"action_id": "a", "plan_id": "p-1"}).raise_for_status()
    except BaseException:
        stop(proc)
        raise
    return proc, url


def _load_until(url: str, received: dict, count: int, then) -> None:  # type: ignore[no-untyped-def]
    """32 clients authorize until `count` answers arrived, then `then()`. The cap (120 s)
    only matters on a machine too loaded to answer `count` decisions at all: an idle one
    takes a second or two, and the load stops as soon as the count is reached."""

    async def run() -> None:
        stop_at = time.monotonic() + 120
        workers = [asyncio.create_task(_load(url, received, stop_at)) for _ in range(32)]
        while len(received) < count and time.monotonic() < stop_at:
            await asyncio.sleep(0.05)
        then()
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)

    asyncio.run(run())


def test_sigkill_mid_load_loses_no_answered_decision(database_url, tmp_path):
    proc, url = _serve_plan(database_url, tmp_path)
    received: dict[str, bool] = {}
    try:
        # Killed mid-load, with no chance to drain.
        _load_until(url, received, 300, lambda: os.kill(proc.pid, signal.SIGKILL))
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            stop(proc)
    assert len(received) >= 300
    recorded = asyncio.run(_recorded(database_url))
    missing = [d for d in received if d not in recorded]
    assert not missing, f"{len(missing)} answered decisions are not in the log"
    assert all(recorded[d] == allowed for d, allowed in received.items())

    # The chain is still whole after the crash.
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url,
                       "TOOLGATE_ADMIN_TOKEN": TOKEN}, tmp_path / "server.log")
    try:
        verify = httpx.get(f"{url}/v1/audit/verify", headers=AUTH, timeout=30).json()
        assert verify["ok"] is True, verify
    finally:
        stop(proc)


def test_two_workers_extend_one_verifiable_chain(database_url, tmp_path):
    """Several processes write decisions at once; the chain stays total and verifiable.
    The workers of one server share one writer process, which leaves with the server."""
    proc, url = _serve_plan(database_url, tmp_path, workers=2)
    received: dict[str, bool] = {}
    try:
        writers = decision_log_writers(proc.pid)
        assert len(writers) == 1 and "--listen" in next(iter(writers.values())), writers
        _load_until(url, received, 300, lambda: None)
        assert decision_log_writers(proc.pid) == writers  # no worker started its own
        assert len(received) >= 300
        verify = httpx.get(f"{url}/v1/audit/verify", headers=AUTH, timeout=30).json()
        assert verify["ok"] is True, verify
        assert verify["checked"] >= len(received)
    finally:
        stop(proc)
    (writer,) = writers
    deadline = time.monotonic() + 10
    while os.path.exists(f"/proc/{writer}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{writer}"), "the shared writer outlived its server"
    recorded = asyncio.run(_recorded(database_url))
    assert all(recorded[d] == allowed for d, allowed in received.items())
