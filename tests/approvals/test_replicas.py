"""Approvals across replicas (SPEC §10), end to end: two `toolgate serve` processes on one
Postgres. A binding gets one pending approval whichever replica is asked; a one-use grant
gives exactly one allow to concurrent retries spread over both; a waiter on one replica
hears a grant made on the other."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.serving import replicas as two_replicas

pytestmark = pytest.mark.slow

TOKEN = "replica-test-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
CALL = {"tool": {"name": "deploy", "capability": WRITER, "args": {"service": "web"}}}


@pytest.fixture
def replicas(postgres_url, tmp_path):
    env = {"TOOLGATE_DATABASE_URL": postgres_url, "TOOLGATE_ADMIN_TOKEN": TOKEN}
    with two_replicas(env, tmp_path) as urls:
        yield urls


def _setup(url: str) -> tuple[str, dict, dict]:
    with httpx.Client(base_url=url, headers=ADMIN, timeout=10) as c:
        c.put("/v1/projects/ops", json={}).raise_for_status()
        c.put("/v1/projects/ops/settings", json={"approval_mode": "server"}).raise_for_status()
        c.put("/v1/actions/deploy", json={"project": "ops", "safety_profile": {
            "require_human_approval": True, "require_sandbox": False,
            "require_checkpoints": False}}).raise_for_status()
        plan = c.post("/v1/plans", json={"action_id": "deploy"}).json()["plan_id"]
        agent = c.post("/v1/keys", json={"name": "bot", "role": "agent", "projects": None,
                                         "principal": "bot"}).json()["key"]
        approver = c.post("/v1/keys", json={"name": "alice", "role": "approver",
                                            "projects": None, "principal": "alice"}).json()["key"]
    return plan, {"Authorization": f"Bearer {agent}"}, {"Authorization": f"Bearer {approver}"}


async def _calls(urls: tuple[str, str], headers: dict, plan: str, n: int) -> list[dict]:
    async with httpx.AsyncClient(headers=headers, timeout=30) as c:
        async def one(i: int) -> dict:
            r = await c.post(f"{urls[i % 2]}/v1/authorize-tool", json={"plan_id": plan, **CALL})
            assert r.status_code == 200, r.text
            return r.json()
        return list(await asyncio.gather(*(one(i) for i in range(n))))


async def _waiting_on(c: httpx.AsyncClient, url: str, seconds: float = 30.0) -> None:
    """Until `url`'s GET /metrics shows a request waiting on an approval."""
    deadline = time.monotonic() + seconds
    while True:
        scrape = (await c.get(f"{url}/metrics", headers=ADMIN)).text
        if any(line.startswith("toolgate_approval_waits ") and float(line.split()[1]) >= 1
               for line in scrape.splitlines()):
            return
        assert time.monotonic() < deadline, "no wait on the approval within 30 s"
        await asyncio.sleep(0.02)


def test_one_pending_one_allow_and_waits_across_replicas(replicas):
    a, b = replicas
    plan, agent, approver = _setup(a)
    # 50 concurrent denied calls over both replicas: one approval.
    answers = asyncio.run(_calls(replicas, agent, plan, 50))
    ids = {x["deny"]["details"]["approval"]["approval_id"] for x in answers}
    assert len(ids) == 1, ids
    (approval_id,) = ids

    async def wait_on_b_grant_on_a() -> tuple[dict, float]:
        async with httpx.AsyncClient(timeout=40) as c:
            waiting = asyncio.create_task(
                c.get(f"{b}/v1/approvals/{approval_id}?wait=30", headers=agent))
            await _waiting_on(c, b)  # b holds the wait: what follows must wake it
            assert not waiting.done()
            granted_at = time.monotonic()
            r = await c.post(f"{a}/v1/approvals/{approval_id}/grant", json={},
                             headers=approver)
            assert r.status_code == 200, r.text
            answer = await waiting
            return answer.json(), time.monotonic() - granted_at

    seen, after = asyncio.run(wait_on_b_grant_on_a())
    assert seen["state"] == "granted"
    assert after < 10  # woken by the NOTIFY, not by the 30 s bound

    # 32 concurrent retries over both replicas on a one-use grant: exactly one allow.
    answers = asyncio.run(_calls(replicas, agent, plan, 32))
    assert sum(x["allowed"] for x in answers) == 1
    with httpx.Client(headers=ADMIN, timeout=30) as c:
        got = c.get(f"{b}/v1/approvals/{approval_id}").json()
        assert got["state"] == "used" and len(got["decision_ids"]) == 1
        assert c.get(f"{a}/v1/audit/verify").json()["ok"] is True
