"""Principals are one whatever their case or Unicode form, and the pending cap holds per
project as well as per plan (SPEC §17), on SQLite and Postgres."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app.approvals.tables import Approval
from tests.approvals.test_approvals import authorize, call, new_key, setup


@pytest.mark.parametrize("spelling", ["bot-x", "BOT-X", "Bot-x", "ＢＯＴ-ｘ"])
async def test_a_principal_in_another_case_or_form_may_not_decide(client, spelling):
    """`BOT-x` granted what `bot-x` asked, before."""
    plan = await setup(client)
    agent = await new_key(client, "agent", principal="BOT-x")
    approver = await new_key(client, "approver", principal=spelling)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=approver)
    assert r.status_code == 403, r.text
    assert r.json()["error"]["code"] == "self_approval_forbidden"


async def test_principals_are_stored_in_their_normal_form(client):
    r = await client.post("/v1/keys", json={"name": "k", "role": "agent", "projects": None,
                                            "principal": "ＢＯＴ-X"})
    assert r.status_code == 201, r.text
    assert r.json()["principal"] == "bot-x"
    [shown] = [k for k in (await client.get("/v1/keys")).json()["items"]
               if k["id"] == r.json()["id"]]
    assert shown["principal"] == "bot-x"
    bad = await client.post("/v1/keys", json={"name": "k", "role": "agent", "projects": None,
                                              "principal": "bot x"})
    assert bad.status_code == 422 and "principal" in bad.text


async def test_a_pending_approval_stored_before_the_rule_compares_the_same(client):
    """Rows written before principals were normalised keep their spelling: the comparison
    normalises both sides, so no migration is needed."""
    plan = await setup(client)
    agent = await new_key(client, "agent", principal="bot-x")
    approver = await new_key(client, "approver", principal="bot-x-approver")
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    async with client.app.state.sessions() as session, session.begin():
        await session.execute(update(Approval)
                              .where(Approval.approval_id == pending["approval_id"])
                              .values(requested_principal="BOT-X-APPROVER"))
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=approver)
    assert r.status_code == 403 and r.json()["error"]["code"] == "self_approval_forbidden"


@pytest.fixture
async def capped_client(settings):
    from tests.conftest import app_client
    async with app_client(settings.model_copy(update={
            "approval_max_pending_per_plan": 3,
            "approval_max_pending_per_project": 5})) as c:
        yield c


async def test_new_plans_do_not_multiply_the_pending_cap(capped_client):
    client = capped_client
    agent = await new_key(client, "agent", principal="bot")
    plans = [await setup(client) for _ in range(3)]
    states = []
    for plan in plans:
        for n in range(3):
            answer = await authorize(client, agent, call(plan, args={"n": n}))
            states.append(answer["deny"]["details"]["approval"])
    assert [s["state"] for s in states] == ["pending"] * 5 + ["too_many_pending"] * 4
    assert states[-1] == {"state": "too_many_pending", "scope": "project", "max_pending": 5}
    pending = (await client.get("/v1/approvals?state=pending")).json()["items"]
    assert len(pending) == 5
    # Another project has its own cap.
    other = await setup(client, project="other")
    answer = await authorize(client, agent, call(other))
    assert answer["deny"]["details"]["approval"]["state"] == "pending"
