"""An approval is asked only for a call a grant would let through (SPEC §17, issue 35 item 3),
on SQLite and Postgres: when check 7, 8, 9 or 10 would still deny the call with the approval
granted, no approval is created, the deny stays `human_approval_required`, and
`details.approval` is `{"state": "not_requested", "would_fail": "<code>"}`. Before, a
`deploy` in a project already past `max_total_cost` created a pending approval, a person
granted it, and the retry was denied `total_cost_limit_exceeded`."""

from __future__ import annotations

import pytest

from tests.approvals.test_approvals import PROFILE, authorize, call, new_key, setup


@pytest.fixture
async def agent(client):
    return await new_key(client, "agent", principal="build-bot")


async def _nothing_pending(client) -> None:
    assert (await client.get("/v1/approvals")).json()["items"] == []


async def test_a_project_past_its_budget_asks_no_one(client, agent):
    # A plan of the same project that needs no approval spends the budget.
    await client.put("/v1/projects/ops", json={})
    r = await client.put("/v1/actions/spend", json={"project": "ops", "safety_profile": {
        **PROFILE, "require_human_approval": False, "max_total_cost": 1}})
    assert r.status_code in (200, 201), r.text
    spender = (await client.post("/v1/plans", json={"action_id": "spend"})).json()["plan_id"]
    spent = await authorize(client, agent, call(spender))
    assert spent["allowed"] is True
    r = await client.post(f"/v1/decisions/{spent['decision_id']}/outcome",
                          json={"status": "succeeded", "cost": 2}, headers=agent)
    assert r.status_code == 201, r.text
    plan = await setup(client, profile={**PROFILE, "max_total_cost": 1})
    denied = await authorize(client, agent, call(plan))
    assert denied["deny"]["code"] == "human_approval_required"
    assert denied["deny"]["details"]["approval"] == {
        "state": "not_requested", "would_fail": "total_cost_limit_exceeded"}
    assert "no approval was requested" in denied["deny"]["message"]
    await _nothing_pending(client)
    # A credit brings the project under its budget: now a person is asked.
    r = await client.post("/v1/projects/ops/ledger/credit", json={"amount": 2, "reason": "x"})
    assert r.status_code == 200, r.text
    asked = await authorize(client, agent, call(plan))
    assert asked["deny"]["details"]["approval"]["state"] == "pending"


@pytest.mark.parametrize(("profile", "tool", "context", "code"), [
    ({"max_cost_per_plan": 1}, {}, {"accumulated_cost": 1}, "plan_cost_limit_exceeded"),
    ({"max_retries_per_step": 0}, {}, {"step_retry_count": 1}, "retry_limit_exceeded"),
    ({}, {"safety_category": "destructive"}, {}, "confirmation_required"),
    ({}, {"args": {"path": "../../etc/passwd"}, "path_args": ["path"]},
     {"sandbox_root": "/srv/work"}, "sandbox_path_escape"),
])
async def test_each_later_check_that_would_fail_is_named(client, agent, profile, tool,
                                                          context, code):
    plan = await setup(client, profile={**PROFILE, **profile})
    body = call(plan, **context)
    body["tool"] = {**body["tool"], **tool}
    denied = await authorize(client, agent, body)
    assert denied["deny"]["code"] == "human_approval_required"
    assert denied["deny"]["details"]["approval"] == {"state": "not_requested",
                                                     "would_fail": code}
    await _nothing_pending(client)
    recorded = (await client.get(f"/v1/decisions/{denied['decision_id']}")).json()
    assert recorded["detail"]["deny_details"]["approval"]["would_fail"] == code
