"""Numbers the ledger can book (SPEC §17, docs/ledger.md "Bounds"), on SQLite and Postgres:
costs, estimates, submitted totals and credits past 1e12 are 422 naming the field and change
nothing; a ledger row that is already damaged (written before the bound, or by hand) is
never read as 0: metered decisions on it and its totals answer 503 `ledger_invalid` (or
`storage_unavailable` where Postgres cannot even add it up); the hold sweep charges the
other holds, and the other background jobs keep running (issue 30, item 3)."""

from __future__ import annotations

import pytest
from sqlalchemy import update

from app.ledger.tables import Hold, PlanLedger, ProjectLedger
from app.store.base import utcnow
from tests.ledger.helpers import authorize, call, plan_with, report
from tests.webhooks.receiver import Receiver
from tests.webhooks.test_webhooks import attempted, rounds

HUGE = 1.7e308  # the red team's estimate: two of them overflow a double


@pytest.fixture
def settings(settings):
    # The background round runs by hand here (run_once), never half done by its timer.
    return settings.model_copy(update={"webhook_poll_seconds": 60,
                                       "webhook_allow_hosts": ["127.0.0.1"]}
                               if "webhook_allow_hosts" in type(settings).model_fields
                               else {"webhook_poll_seconds": 60})


async def test_numbers_past_the_bound_are_named_and_change_nothing(client):
    plan = await plan_with(client)
    limited = await plan_with(client, project="capped", max_total_cost=100)
    for context, field in (({"estimated_cost": HUGE}, "estimated_cost"),
                           ({"estimated_cost": 1e12 * 1.0000001}, "estimated_cost"),
                           ({"accumulated_cost": 1e13}, "accumulated_cost"),
                           ({"total_accumulated_cost": 1e13}, "total_accumulated_cost")):
        for body in (call(plan, **context), call(limited, **context)):
            r = await client.post("/v1/authorize-tool", json=body)
            assert r.status_code == 422, r.text
            assert r.json()["error"]["code"] == "invalid_input"
            assert field in r.json()["error"]["message"], r.text
        r = await client.post("/v1/authorize-tools", json={"requests": [call(plan, **context)]})
        assert r.status_code == 422 and field in r.text, r.text
    allowed = await authorize(client, call(limited, estimated_cost=1e12))  # the bound itself
    assert allowed["allowed"] is True
    r = await report(client, allowed["decision_id"], {"status": "succeeded", "cost": 1e13})
    assert r.status_code == 422 and "cost" in r.json()["error"]["message"], r.text
    r = await client.post("/v1/outcomes", json={"outcomes": [
        {"decision_id": allowed["decision_id"], "status": "succeeded", "cost": HUGE}]})
    assert r.status_code in (200, 422), r.text
    assert "cost" in r.text and r.json().get("items", [{}])[0].get("status_code", 422) == 422
    for path in (f"/v1/plans/{plan}/ledger/credit", "/v1/projects/ops/ledger/credit"):
        r = await client.post(path, json={"amount": HUGE, "reason": "x"})
        assert r.status_code == 422 and "amount" in r.json()["error"]["message"], r.text
    assert (await client.get(f"/v1/plans/{limited}")).json()["ledger"] == {
        "spent": 0.0, "held": 1e12, "steps": {}}
    r = await client.get("/v1/projects/ops/ledger")
    assert r.json() == {"project": "ops", "spent": 0.0, "held": 0.0}


async def _damage(client, model, key, **values) -> None:
    async with client.app.state.sessions() as session, session.begin():
        column = PlanLedger.plan_id if model is PlanLedger else ProjectLedger.project
        await session.execute(update(model).where(column == key).values(**values))


@pytest.mark.parametrize("damage", ["infinite", "not-a-number", "overflowing"])
async def test_a_damaged_ledger_row_denies_and_never_reads_as_zero(client, damage):
    """The red team's SQLite end state: the project's held read null, then 0, and a new plan
    with max_total_cost 100 was allowed."""
    first = await plan_with(client, project="team", max_total_cost=100)
    allowed = await authorize(client, call(first, estimated_cost=1))  # the rows exist
    assert allowed["allowed"] is True
    values = {"infinite": {"held": float("inf")},  # shown as "held": null
              "not-a-number": {"spent": float("inf"), "held": float("-inf")},
              "overflowing": {"spent": HUGE, "held": HUGE}}[damage]
    await _damage(client, ProjectLedger, "team", **values)
    second = (await client.post("/v1/plans", json={"action_id": "run-team"})).json()["plan_id"]
    for body in (call(second), call(second, estimated_cost=1), call(first, step_id="s")):
        r = await client.post("/v1/authorize-tool", json=body)
        assert r.status_code == 503, r.text
        assert r.json()["error"]["code"] in ("ledger_invalid", "storage_unavailable")
    r = await client.get("/v1/projects/team/ledger")
    assert r.status_code == 503 and r.json()["error"]["code"] == "ledger_invalid", r.text
    r = await client.post("/v1/projects/team/ledger/credit", json={"amount": 1, "reason": "x"})
    assert r.status_code == 503, r.text
    # Other projects decide as before.
    other = await plan_with(client, project="other", max_total_cost=100)
    assert (await authorize(client, call(other, estimated_cost=1)))["allowed"] is True
    # The operator's repair (docs/ledger.md) brings the project back.
    await _damage(client, ProjectLedger, "team", spent=0.0, held=1.0)
    assert (await authorize(client, call(second)))["allowed"] is True


async def test_a_damaged_plan_row_is_503_on_its_plan_page(client):
    plan = await plan_with(client, max_cost_per_plan=5)
    await authorize(client, call(plan, estimated_cost=1))
    await _damage(client, PlanLedger, plan, held=float("inf"))
    r = await client.get(f"/v1/plans/{plan}")
    assert r.status_code == 503 and r.json()["error"]["code"] == "ledger_invalid", r.text
    r = await client.post("/v1/authorize-tool", json=call(plan))
    assert r.status_code == 503 and r.json()["error"]["code"] == "ledger_invalid", r.text


async def test_one_hold_that_cannot_be_charged_stops_no_other_job(client):
    """Postgres raised `value out of range: overflow` charging the red team's hold, on every
    round, and the webhook cursor never moved again for any project."""
    with Receiver() as receiver:
        r = await client.put("/v1/webhooks/ops", json={
            "url": receiver.url, "events": ["decision.denied"], "secret": "s" * 20})
        assert r.status_code == 201, r.text
        bad = await plan_with(client, project="bad", max_cost_per_plan=1e300)
        good = await plan_with(client, project="good", max_cost_per_plan=5)
        assert (await authorize(client, call(bad, estimated_cost=1e12)))["allowed"] is True
        assert (await authorize(client, call(good, estimated_cost=2)))["allowed"] is True
        # A hold and spend from before the bound: charging the hold overflows on Postgres
        # (and reads infinite on SQLite).
        await _damage(client, PlanLedger, bad, spent=HUGE, held=HUGE)
        await _damage(client, ProjectLedger, "bad", spent=HUGE, held=HUGE)
        async with client.app.state.sessions() as session, session.begin():
            await session.execute(update(Hold).where(Hold.plan_id == bad).values(amount=HUGE))
            await session.execute(update(Hold).values(expires_at=utcnow()))
        denied = await authorize(client, call(good, accumulated_cost=6))
        assert denied["allowed"] is False
        await rounds(client, attempted(client, "ops", 1))
        assert receiver.events()[0]["data"]["decision_id"] == denied["decision_id"]
    ledger = (await client.get(f"/v1/plans/{good}")).json()["ledger"]
    assert (ledger["spent"], ledger["held"]) == (2.0, 0.0)  # charged despite the bad one
