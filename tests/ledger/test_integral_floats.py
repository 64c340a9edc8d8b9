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
