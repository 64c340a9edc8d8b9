"""Integer fields take integral floats, as the OpenAPI document's `integer` (JSON Schema)
says (SPEC §17), on SQLite and Postgres: `uses: 3.0`, `ttl_seconds: 60.0` and an
artifact's `bytes: 167.0` are the integers; 3.5, "3" and true stay 422 naming the field."""

from __future__ import annotations

import pytest

from tests.approvals.test_approvals import authorize as approval_authorize
from tests.approvals.test_approvals import call as approval_call
from tests.approvals.test_approvals import new_key as approval_key
from tests.approvals.test_approvals import setup
from tests.ledger.helpers import authorize, call, plan_with, report


async def test_an_integral_float_is_an_integer_in_an_outcome(client):
    plan = await plan_with(client)
    allowed = await authorize(client, call(plan))
    r = await report(client, allowed["decision_id"], {
        "status": "succeeded", "artifacts": [{"path": "out.txt", "bytes": 167.0}]})
    assert r.status_code == 201, r.text
    assert r.json()["artifacts"][0]["bytes"] == 167
    assert isinstance(r.json()["artifacts"][0]["bytes"], int)


@pytest.mark.parametrize("bad", [167.5, "167", True, 1e300])
async def test_other_numbers_stay_refused_in_an_outcome(client, bad):
    plan = await plan_with(client)
    allowed = await authorize(client, call(plan))
    r = await report(client, allowed["decision_id"], {
        "status": "succeeded", "artifacts": [{"path": "out.txt", "bytes": bad}]})
    assert r.status_code == 422 and "bytes" in r.text, r.text


async def test_an_integral_float_is_an_integer_in_a_grant(client):
    plan = await setup(client)
    agent = await approval_key(client, "agent", principal="bot")
    approver = await approval_key(client, "approver", principal="alice")
    pending = (await approval_authorize(client, agent, approval_call(plan)))
    approval_id = pending["deny"]["details"]["approval"]["approval_id"]
    r = await client.post(f"/v1/approvals/{approval_id}/grant",
                          json={"uses": 2.5}, headers=approver)
    assert r.status_code == 422 and "uses" in r.text
    r = await client.post(f"/v1/approvals/{approval_id}/grant",
                          json={"uses": 3.0, "ttl_seconds": 60.0}, headers=approver)
    assert r.status_code == 200, r.text
    assert r.json()["uses_left"] == 3


# The other integer fields of requests (found by walking the OpenAPI document's request
# bodies for `integer`): the retry count and limit, and replay's example count.

async def test_an_integral_float_is_an_integer_in_a_retry_count_and_its_limit(client):
    plan = await plan_with(client, max_retries_per_step=2.0)
    profile = (await client.get(f"/v1/plans/{plan}")).json()["safety_profile"]
    # Stored as the integer, shown as sent by no one. (On the field: the body also holds
    # timestamps and ids, and "...:28:12.072324Z" contains "2.0"; issue 45 item 15.)
    assert type(profile["max_retries_per_step"]) is int
    assert profile["max_retries_per_step"] == 2
    within = await authorize(client, call(plan, step_retry_count=2.0))
    assert within["allowed"], within
    past = await authorize(client, call(plan, step_retry_count=3.0))
    assert past["deny"]["code"] == "retry_limit_exceeded", past
    assert past["deny"]["details"]["step_retry_count"] == 3
    assert isinstance(past["deny"]["details"]["step_retry_count"], int)
    assert past["deny"]["details"]["max_retries_per_step"] == 2


@pytest.mark.parametrize("bad", [2.5, "2", True])
async def test_other_numbers_stay_refused_as_a_retry_count(client, bad):
    plan = await plan_with(client)
    r = await client.post("/v1/authorize-tool", json=call(plan, step_retry_count=bad))
    assert r.status_code == 422 and "context.step_retry_count" in r.text, r.text


async def test_an_integral_float_is_an_integer_in_a_profile_and_a_replay(client):
    r = await client.put("/v1/profiles/retries", json={
        "safety": {"max_retries_per_step": 5.0}})
    assert r.status_code in (200, 201), r.text
    stored = r.json()["safety"]["max_retries_per_step"]
    assert stored == 5 and isinstance(stored, int)
    r = await client.put("/v1/profiles/retries", json={"safety": {"max_retries_per_step": 5.5}})
    assert r.status_code == 422 and "max_retries_per_step" in r.text, r.text
    r = await client.post("/v1/replay", json={
        "since": "2020-01-01T00:00:00Z", "examples": 3.0,
        "candidate": {"profile": {"max_retries_per_step": 1.0}}})
    assert r.status_code == 200, r.text
    r = await client.post("/v1/replay", json={"since": "2020-01-01T00:00:00Z",
                                              "examples": 3.5, "candidate": {}})
    assert r.status_code == 422 and "examples" in r.text, r.text
