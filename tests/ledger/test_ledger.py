"""The ledger (SPEC §11) as checks 7 and 8 use it, on SQLite and Postgres: reported costs
deny past a plan's limit whatever the agent submits, holds count until settled, a step's
failed and unverified attempts count as retries, credits top a budget up, and plans
without limits keep deciding from memory."""

from __future__ import annotations

import pytest

from app.auth.keys import ADMIN
from app.authorize.schemas import AuthorizeIn
from app.authorize.service import NOBODY
from tests.ledger.helpers import authorize, call, new_key, plan_with, report


async def test_outcomes_adding_up_to_the_limit_deny_the_next_call(client):
    plan = await plan_with(client, max_cost_per_plan=5)
    for cost in (2.5, 2.5):
        allowed = await authorize(client, call(plan))
        assert allowed["allowed"] is True
        assert (await report(client, allowed["decision_id"],
                             {"status": "succeeded", "cost": cost})).status_code == 201
    # The agent claims it spent nothing: the ledger knows better.
    denied = await authorize(client, call(plan, accumulated_cost=0))
    assert denied["allowed"] is False
    assert denied["deny"]["code"] == "plan_cost_limit_exceeded"
    detail = (await client.get(f"/v1/decisions/{denied['decision_id']}")).json()["detail"]
    assert detail["effective"] == {"accumulated_cost": 5.0, "total_accumulated_cost": 5.0,
                                   "step_retry_count": 0}
    assert detail["context"]["accumulated_cost"] == 0  # what the agent sent, as sent
    # A credit tops the budget up.
    r = await client.post(f"/v1/plans/{plan}/ledger/credit",
                          json={"amount": 1, "reason": "approved overrun"})
    assert r.status_code == 200, r.text
    assert r.json()["spent"] == 4.0
    assert (await authorize(client, call(plan)))["allowed"] is True
    config = (await client.get("/v1/decisions?kind=config")).json()["items"]
    assert any(c["detail"]["resource"] == "ledger" for c in config)


async def test_an_agent_may_tighten_never_loosen(client):
    plan = await plan_with(client, max_cost_per_plan=5)
    denied = await authorize(client, call(plan, accumulated_cost=7))
    assert denied["deny"]["code"] == "plan_cost_limit_exceeded"


async def test_holds_count_until_settled(client):
    plan = await plan_with(client, max_cost_per_plan=3)
    held = [await authorize(client, call(plan, estimated_cost=1)) for _ in range(3)]
    assert all(h["allowed"] for h in held)
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["held"] == 3.0
    denied = await authorize(client, call(plan, estimated_cost=1))
    assert denied["deny"]["code"] == "plan_cost_limit_exceeded"
    # Reported cheaper than estimated: the hold goes, the cost stays.
    await report(client, held[0]["decision_id"], {"status": "succeeded", "cost": 0.25})
    ledger = (await client.get(f"/v1/plans/{plan}")).json()["ledger"]
    assert ledger["held"] == 2.0 and ledger["spent"] == 0.25
    assert (await authorize(client, call(plan, estimated_cost=1)))["allowed"] is True


async def test_project_totals_and_max_total_cost(client):
    first = await plan_with(client, project="team", max_total_cost=4)
    second = (await client.post("/v1/plans", json={"action_id": "run-team"})).json()["plan_id"]
    a = await authorize(client, call(first))
    await report(client, a["decision_id"], {"status": "succeeded", "cost": 4})
    denied = await authorize(client, call(second))
    assert denied["deny"]["code"] == "total_cost_limit_exceeded"
    r = await client.get("/v1/projects/team/ledger")
    assert r.json() == {"project": "team", "spent": 4.0, "held": 0.0}
    r = await client.post("/v1/projects/team/ledger/credit", json={"amount": 2, "reason": "x"})
    assert r.status_code == 200 and r.json()["spent"] == 2.0
    assert (await authorize(client, call(second)))["allowed"] is True


async def test_failed_and_unverified_attempts_of_a_step_count_as_retries(client):
    plan = await plan_with(client, max_retries_per_step=1)
    for body in ({"status": "execution_failed"}, {"status": "succeeded", "verified": False}):
        allowed = await authorize(client, call(plan, step_id="build"))
        assert allowed["allowed"] is True
        await report(client, allowed["decision_id"], body)
    denied = await authorize(client, call(plan, step_id="build", step_retry_count=0))
    assert denied["deny"]["code"] == "retry_limit_exceeded"
    assert (await authorize(client, call(plan, step_id="test")))["allowed"] is True
    # A verified success is no failure.
    ok = await authorize(client, call(plan, step_id="test"))
    await report(client, ok["decision_id"], {"status": "succeeded", "verified": True})
    ledger = (await client.get(f"/v1/plans/{plan}")).json()["ledger"]
    assert ledger["steps"] == {"build": {"failures": 2}, "test": {"failures": 0}}


@pytest.mark.parametrize("limits", [{}, {"max_cost_per_plan": 5}])
async def test_every_reported_step_is_listed_with_or_without_limits(client, limits):
    """docs/ledger.md's example (issue 45 item 2): a step whose outcome was reported is in
    the plan's ledger, failures 0 after a verified success, on plans with and without a
    limit (it showed `"steps": {}`)."""
    plan = await plan_with(client, **limits)
    allowed = await authorize(client, call(plan, step_id="summarise", estimated_cost=0.5))
    await report(client, allowed["decision_id"],
                 {"status": "succeeded", "cost": 0.42, "verified": True})
    ledger = (await client.get(f"/v1/plans/{plan}")).json()["ledger"]
    assert ledger["steps"] == {"summarise": {"failures": 0}}
    assert ledger["spent"] == 0.42 and ledger["held"] == 0.0


async def test_bad_context_fields_are_named_and_change_nothing(client):
    plan = await plan_with(client, max_cost_per_plan=5)
    for context, field in (({"estimated_cost": -1}, "estimated_cost"),
                           ({"estimated_cost": "1"}, "estimated_cost"),
                           ({"step_id": ""}, "step_id"),
                           ({"step_id": 3}, "step_id")):
        r = await client.post("/v1/authorize-tool", json=call(plan, **context))
        assert r.status_code == 422, r.text
        assert field in r.text
    r = await client.post(f"/v1/plans/{plan}/ledger/credit", json={"amount": 0, "reason": "x"})
    assert r.status_code == 422 and "amount" in r.text
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"] == {
        "spent": 0.0, "held": 0.0, "steps": {}}


async def test_roles_readers_read_only_admins_credit(client):
    plan = await plan_with(client)
    auditor = await new_key(client, "auditor", projects=["ops"])
    agent = await new_key(client, "agent", projects=["ops"])
    assert (await client.get("/v1/projects/ops/ledger", headers=auditor)).status_code == 200
    assert (await client.get("/v1/projects/other/ledger", headers=auditor)).status_code == 404
    r = await client.post(f"/v1/plans/{plan}/ledger/credit",
                          json={"amount": 1, "reason": "x"}, headers=agent)
    assert r.status_code == 403


async def test_plans_without_limits_decide_from_memory(client):
    plan = await plan_with(client)
    authorizer = client.app.state.authorizer  # type: ignore[attr-defined]
    assert (await authorize(client, call(plan)))["allowed"] is True  # the lock is cached
    assert authorizer.from_memory(AuthorizeIn.model_validate(call(plan)), ADMIN,
                                  NOBODY) is not None
    assert authorizer.from_memory(AuthorizeIn.model_validate(call(plan, estimated_cost=2)),
                                  ADMIN, NOBODY) is not None
    # A step to count reads the ledger: without awaiting on SQLite, awaited on Postgres.
    stepped = authorizer.from_memory(AuthorizeIn.model_validate(call(plan, step_id="s")),
                                     ADMIN, NOBODY)
    sqlite = client.app.state.settings.is_sqlite
    assert (stepped is not None) is sqlite
    if sqlite:
        assert stepped[1]["detail"]["effective"]["step_retry_count"] == 0
    limited = await plan_with(client, project="limited", max_cost_per_plan=5)
    assert (await authorize(client, call(limited)))["allowed"] is True
    assert (authorizer.from_memory(AuthorizeIn.model_validate(call(limited)), ADMIN,
                                   NOBODY) is not None) is sqlite
    # An estimate is held when allowed: a write, never from memory.
    assert authorizer.from_memory(AuthorizeIn.model_validate(
        call(limited, estimated_cost=1)), ADMIN, NOBODY) is None


async def test_a_lapsed_hold_is_charged_and_a_late_report_replaces_the_charge(client):
    from sqlalchemy import update

    from app.ledger.tables import Hold
    from app.store.base import utcnow

    plan = await plan_with(client, max_cost_per_plan=5)
    held = await authorize(client, call(plan, estimated_cost=2))
    state = client.app.state  # type: ignore[attr-defined]
    async with state.sessions() as session, session.begin():
        await session.execute(update(Hold).values(expires_at=utcnow()))
    # The background round may notice first: either way it is charged exactly once.
    await state.ledger.sweep()
    await state.ledger.sweep()
    ledger = (await client.get(f"/v1/plans/{plan}")).json()["ledger"]
    assert (ledger["spent"], ledger["held"]) == (2.0, 0.0)
    await report(client, held["decision_id"], {"status": "succeeded", "cost": 0.5})
    ledger = (await client.get(f"/v1/plans/{plan}")).json()["ledger"]
    assert (ledger["spent"], ledger["held"]) == (0.5, 0.0)


async def granted_plan(client, body_of, *, uses: int) -> tuple[str, dict, dict, str]:
    """A plan with max_cost_per_plan 1 that needs a person's approval (server mode), and a
    grant of `uses` for the call `body_of(plan)`: (plan, agent, approver, approval id)."""
    plan = await plan_with(client, project="gated", max_cost_per_plan=1,
                           require_human_approval=True)
    r = await client.put("/v1/projects/gated/settings", json={"approval_mode": "server"})
    assert r.status_code == 200, r.text
    agent = await new_key(client, "agent")
    approver = await new_key(client, "approver")
    asked = await authorize(client, body_of(plan), agent)
    approval = asked["deny"]["details"]["approval"]["approval_id"]
    r = await client.post(f"/v1/approvals/{approval}/grant", json={"uses": uses},
                          headers=approver)
    assert r.status_code == 200, r.text
    return plan, agent, approver, approval


async def test_with_server_approvals_a_spent_budget_denies_and_takes_no_grant(client):
    plan, agent, approver, approval = await granted_plan(client, call, uses=2)
    first = await authorize(client, call(plan), agent)
    assert first["allowed"] is True
    detail = (await client.get(f"/v1/decisions/{first['decision_id']}")).json()["detail"]
    assert detail["effective"]["approval"] == "granted"
    assert detail["effective"]["accumulated_cost"] == 0
    await report(client, first["decision_id"], {"status": "succeeded", "cost": 1}, agent)
    second = await authorize(client, call(plan), agent)
    assert second["deny"]["code"] == "plan_cost_limit_exceeded"
    left = (await client.get(f"/v1/approvals/{approval}", headers=approver)).json()
    assert left["uses_left"] == 1  # the deny took no use


async def test_a_refused_hold_takes_no_use_of_the_grant(client):
    """The race between reading the totals and holding the estimate, on a plan that needs
    an approval: another call's hold lands in between (made here by reading stale totals
    once). The hold is refused, the call is decided again and denied on the new totals,
    and the grant keeps its use: the hold is taken before the use, never after."""
    from app.ledger.service import Known

    plan, agent, approver, approval = await granted_plan(
        client, lambda p: call(p, estimated_cost=1), uses=1)
    body = call(plan, estimated_cost=1)
    ledger = client.app.state.ledger
    assert await ledger.hold(decision_id="another-call", plan_id=plan, project="gated",
                             amount=1, plan_limit=1, total_limit=None)
    real, stale = ledger.known, [Known()]

    async def known_once_stale(**kwargs):
        return stale.pop() if stale else await real(**kwargs)

    ledger.known = known_once_stale
    try:
        denied = await authorize(client, body, agent)
    finally:
        ledger.known = real
    assert denied["deny"]["code"] == "plan_cost_limit_exceeded"
    left = (await client.get(f"/v1/approvals/{approval}", headers=approver)).json()
    assert left["uses_left"] == 1 and left["state"] == "granted"
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["held"] == 1.0
    # The budget back: the same call is allowed, on the grant's one use.
    await ledger.release("another-call")
    allowed = await authorize(client, body, agent)
    assert allowed["allowed"] is True
    left = (await client.get(f"/v1/approvals/{approval}", headers=approver)).json()
    assert left["uses_left"] == 0
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["held"] == 1.0


async def test_decision_tests_run_on_the_cases_own_values(client):
    """POST /v1/test (docs/registry.md) reads no ledger and holds nothing: a spent plan's
    case is decided on the values it submits."""
    plan = await plan_with(client, max_cost_per_plan=5)
    paid = await authorize(client, call(plan))
    await report(client, paid["decision_id"], {"status": "succeeded", "cost": 5})
    assert (await authorize(client, call(plan)))["deny"]["code"] == \
        "plan_cost_limit_exceeded"
    cases = [{"request": call(plan, accumulated_cost=1, estimated_cost=2),
              "expect": {"allowed": True}},
             {"request": call(plan, accumulated_cost=5),
              "expect": {"allowed": False, "code": "plan_cost_limit_exceeded"}}]
    r = await client.post("/v1/test", json=cases)
    assert r.status_code == 200 and r.json()["ok"] is True, r.text
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["held"] == 0.0


async def test_a_projects_held_is_the_sum_over_its_plans(client):
    """docs/ledger.md: a project's spent and held are over its plans (issue 30 item 14: a
    project once read held 0 while a plan held 1). Plans limited per plan, per project, and
    by a profile of the plan's own all add their holds to the project's."""
    per_plan = await plan_with(client, project="sums", max_cost_per_plan=10)
    per_project = await plan_with(client, project="sums", max_total_cost=10)
    r = await client.post("/v1/plans", json={"action_id": "run-sums", "safety_profile": {
        "require_human_approval": False, "require_sandbox": False,
        "require_checkpoints": False, "max_cost_per_plan": 10}})
    assert r.status_code == 201, r.text
    own = r.json()["plan_id"]
    held = {}
    for plan, estimate in ((per_plan, 1.0), (per_project, 2.0), (own, 4.0)):
        allowed = await authorize(client, call(plan, estimated_cost=estimate))
        assert allowed["allowed"], allowed
        held[plan] = allowed["decision_id"]
        assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["held"] == estimate
    r = await client.get("/v1/projects/sums/ledger")
    assert r.json() == {"project": "sums", "spent": 0.0, "held": 7.0}
    await report(client, held[own], {"status": "succeeded", "cost": 0.5})
    r = await client.get("/v1/projects/sums/ledger")
    assert r.json() == {"project": "sums", "spent": 0.5, "held": 3.0}
