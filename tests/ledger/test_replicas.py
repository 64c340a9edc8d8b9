"""One budget across replicas (SPEC §11), end to end: two `toolgate serve` processes on one
Postgres, 64 concurrent calls with an estimated cost on one plan near its limit, spread
over both. Spend and holds never pass the limit by more than one call's estimate, and the
number of allows is exactly what the budget held."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.serving import replicas as two_replicas

pytestmark = pytest.mark.slow

TOKEN = "ledger-replica-admin-token"
ADMIN = {"Authorization": f"Bearer {TOKEN}"}
WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
LIMIT, ESTIMATE, SPENT = 10.0, 0.75, 6.0


@pytest.fixture
def replicas(postgres_url, tmp_path):
    env = {"TOOLGATE_DATABASE_URL": postgres_url, "TOOLGATE_ADMIN_TOKEN": TOKEN}
    with two_replicas(env, tmp_path) as urls:
        yield urls


def _setup(url: str) -> str:
    with httpx.Client(base_url=url, headers=ADMIN, timeout=10) as c:
        c.put("/v1/projects/ops", json={}).raise_for_status()
        c.put("/v1/actions/spend", json={"project": "ops", "safety_profile": {
            "require_human_approval": False, "require_sandbox": False,
            "require_checkpoints": False, "max_cost_per_plan": LIMIT}}).raise_for_status()
        plan = c.post("/v1/plans", json={"action_id": "spend"}).json()["plan_id"]
        # Near the limit: spent by earlier calls, reported.
        first = c.post("/v1/authorize-tool", json=_call(plan)).json()
        c.post(f"/v1/decisions/{first['decision_id']}/outcome",
               json={"status": "succeeded", "cost": SPENT}).raise_for_status()
    return plan


def _call(plan: str) -> dict:
    return {"plan_id": plan, "tool": {"name": "llm", "capability": WRITER, "args": {}},
            "context": {"estimated_cost": ESTIMATE}}


async def _race(urls: tuple[str, str], plan: str, n: int) -> list[dict]:
    async with httpx.AsyncClient(headers=ADMIN, timeout=60) as c:
        async def one(i: int) -> dict:
            r = await c.post(f"{urls[i % 2]}/v1/authorize-tool", json=_call(plan))
            assert r.status_code == 200, r.text
            return r.json()
        return list(await asyncio.gather(*(one(i) for i in range(n))))


def test_spend_and_holds_pass_the_limit_by_at_most_one_estimate(replicas):
    a, _ = replicas
    plan = _setup(a)
    answers = asyncio.run(_race(replicas, plan, 64))
    allowed = [x for x in answers if x["allowed"]]
    denied = [x for x in answers if not x["allowed"]]
    assert {x["deny"]["code"] for x in denied} == {"plan_cost_limit_exceeded"}
    with httpx.Client(base_url=a, headers=ADMIN, timeout=10) as c:
        ledger = c.get(f"/v1/plans/{plan}").json()["ledger"]
    assert ledger["spent"] == SPENT
    assert ledger["held"] == len(allowed) * ESTIMATE
    assert ledger["spent"] + ledger["held"] < LIMIT + ESTIMATE
    # Every hold granted while under the limit: (10 - 6) / 0.75 -> 6 allows, no fewer.
    assert len(allowed) == 6, len(allowed)
