"""Approvals held by the service (SPEC §10), through the API as agents and approvers use
it, on SQLite and Postgres: created once per binding, granted by another principal, used
once, bound to the exact request, rejected for good, expired, and audited in the chain."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from app.store.base import utcnow
from tests.waiting import until

WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
PROFILE = {"require_human_approval": True, "require_sandbox": False,
           "require_checkpoints": False}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def new_key(client: httpx.AsyncClient, role: str, *, projects: list[str] | None = None,
                  principal: str | None = None) -> dict[str, str]:
    body: dict = {"name": role, "role": role, "projects": projects}
    if principal is not None:
        body["principal"] = principal
    r = await client.post("/v1/keys", json=body)
    assert r.status_code == 201, r.text
    return bearer(r.json()["key"])


async def setup(client: httpx.AsyncClient, *, mode: str = "server", project: str = "ops",
                profile: dict | None = None) -> str:
    await client.put(f"/v1/projects/{project}", json={})
    r = await client.put(f"/v1/projects/{project}/settings", json={"approval_mode": mode})
    assert r.status_code == 200, r.text
    r = await client.put(f"/v1/actions/deploy-{project}", json={
        "project": project, "safety_profile": profile or PROFILE})
    assert r.status_code in (200, 201), r.text
    r = await client.post("/v1/plans", json={"action_id": f"deploy-{project}"})
    assert r.status_code == 201, r.text
    return r.json()["plan_id"]


def call(plan_id: str, *, args: dict | None = None, **context) -> dict:
    return {"plan_id": plan_id,
            "tool": {"name": "deploy", "capability": WRITER,
                     "args": args if args is not None else {"service": "web", "replicas": 3}},
            "context": context}


async def authorize(client, headers, body) -> dict:
    r = await client.post("/v1/authorize-tool", json=body, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture
async def people(client):
    """An agent key, and an approver key of another principal."""
    return (await new_key(client, "agent", principal="build-bot"),
            await new_key(client, "approver", principal="alice"))


async def test_the_whole_flow_deny_grant_allowed_once(client, people):
    agent, approver = people
    plan = await setup(client)
    first = await authorize(client, agent, call(plan))
    assert first["allowed"] is False
    assert first["deny"]["code"] == "human_approval_required"
    pending = first["deny"]["details"]["approval"]
    assert pending["state"] == "pending" and pending["approval_id"]

    # The approver sees it in the queue, with the bound request.
    listed = (await client.get("/v1/approvals?state=pending", headers=approver)).json()
    assert [a["approval_id"] for a in listed["items"]] == [pending["approval_id"]]
    shown = listed["items"][0]
    assert shown["request"]["args"] == {"service": "web", "replicas": 3}
    assert shown["tool"] == "deploy" and shown["plan_id"] == plan
    assert len(shown["request_sha256"]) == 64 and len(shown["args_sha256"]) == 64

    # Repeating the call reuses the pending approval: never a second one.
    again = await authorize(client, agent, call(plan))
    assert again["deny"]["details"]["approval"]["approval_id"] == pending["approval_id"]

    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant",
                          json={"note": "ok for web"}, headers=approver)
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "granted" and r.json()["uses_left"] == 1

    allowed = await authorize(client, agent, call(plan))
    assert allowed["allowed"] is True, allowed
    seen = (await client.get(f"/v1/decisions/{allowed['decision_id']}")).json()["detail"]
    assert seen["effective"] == {"approval": "granted"}
    assert seen["approval"]["approval_id"] == pending["approval_id"]
    # Used once: the same call again is denied and asks anew.
    after = await authorize(client, agent, call(plan))
    assert after["allowed"] is False
    assert after["deny"]["details"]["approval"]["approval_id"] != pending["approval_id"]
    used = (await client.get(f"/v1/approvals/{pending['approval_id']}", headers=agent)).json()
    assert used["state"] == "used" and used["decision_ids"] == [allowed["decision_id"]]


async def test_any_difference_in_the_request_is_denied(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={"uses": 5},
                      headers=approver)
    for different in (call(plan, args={"service": "web", "replicas": 4}),
                      call(plan, args={"service": "web", "replicas": 3, "force": True}),
                      call(plan, dry_run=True),
                      call(plan, confirmed=True),
                      {**call(plan), "tool": {"name": "deploy", "args": {"service": "web",
                                                                          "replicas": 3},
                                              "capability": {**WRITER, "checkpointable": False}}}):
        answer = await authorize(client, agent, different)
        assert answer["allowed"] is False, different
        assert answer["deny"]["code"] == "human_approval_required"
    # Key order and number spelling are not differences (RFC 8785).
    same = call(plan, args={"replicas": 3.0, "service": "web"})
    assert (await authorize(client, agent, same))["allowed"] is True
    left = (await client.get(f"/v1/approvals/{pending['approval_id']}", headers=agent)).json()
    assert left["uses_left"] == 4


async def test_the_agents_own_flag_is_ignored_in_server_mode(client, people):
    agent, _ = people
    plan = await setup(client)
    answer = await authorize(client, agent, call(plan, metadata={"human_approved": True}))
    assert answer["allowed"] is False
    assert answer["deny"]["code"] == "human_approval_required"
    record = (await client.get(f"/v1/decisions/{answer['decision_id']}")).json()
    assert record["detail"]["context"]["metadata"] == {"human_approved": True}
    # What check 6 saw is recorded apart from what the agent sent, for replay (SPEC §12).
    assert record["detail"]["effective"] == {"approval": "absent"}


async def test_client_flag_mode_creates_nothing(client, people):
    agent, _ = people
    plan = await setup(client, mode="client_flag")
    denied = await authorize(client, agent, call(plan))
    assert denied["allowed"] is False and "approval" not in denied["deny"]["details"]
    allowed = await authorize(client, agent, call(plan, metadata={"human_approved": True}))
    assert allowed["allowed"] is True
    assert (await client.get("/v1/approvals")).json()["items"] == []


async def test_rejected_binding_stays_rejected_with_its_reason(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/reject",
                          json={"reason": "not on a Friday"}, headers=approver)
    assert r.status_code == 200 and r.json()["state"] == "rejected"
    again = await authorize(client, agent, call(plan))
    assert again["deny"]["details"]["approval"] == {
        "approval_id": pending["approval_id"], "state": "rejected",
        "expires_at": r.json()["expires_at"], "reason": "not on a Friday"}
    assert "not on a Friday" in again["deny"]["message"]
    # Deciding a decided approval is 409, and changes nothing.
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=approver)
    assert r.status_code == 409 and r.json()["error"]["code"] == "approval_decided"
    got = (await client.get(f"/v1/approvals/{pending['approval_id']}", headers=agent)).json()
    assert got["state"] == "rejected"


async def test_no_key_of_the_requesting_principal_may_decide(client):
    plan = await setup(client)
    agent = await new_key(client, "agent", principal="team-a")
    same_principal = await new_key(client, "approver", principal="team-a")
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    for path, body in (("grant", {}), ("reject", {"reason": "x"}), ("cancel", {})):
        r = await client.post(f"/v1/approvals/{pending['approval_id']}/{path}", json=body,
                              headers=same_principal)
        assert r.status_code == 403, r.text
        assert r.json()["error"]["code"] == "self_approval_forbidden"
    # An agent key may not decide at all; the admin who did not request may.
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=agent)
    assert r.status_code == 403
    got = (await client.get(f"/v1/approvals/{pending['approval_id']}", headers=agent)).json()
    assert got["state"] == "pending"
    assert (await client.post(f"/v1/approvals/{pending['approval_id']}/grant",
                              json={})).status_code == 200


async def test_an_admin_that_requested_cannot_grant_its_own(client):
    plan = await setup(client)
    pending = (await authorize(client, {}, call(plan)))["deny"]["details"]["approval"]
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={})
    assert r.status_code == 403 and r.json()["error"]["code"] == "self_approval_forbidden"


async def test_approvals_outside_the_keys_projects_are_not_found(client, people):
    agent, _ = people
    plan = await setup(client, project="ops")
    await setup(client, project="other")
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    stranger = await new_key(client, "approver", projects=["other"], principal="bob")
    r = await client.get(f"/v1/approvals/{pending['approval_id']}", headers=stranger)
    assert r.status_code == 404
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=stranger)
    assert r.status_code == 404
    assert (await client.get("/v1/approvals", headers=stranger)).json()["items"] == []


async def test_cancel_withdraws_a_grant(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                      headers=approver)
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/cancel",
                          json={"reason": "changed my mind"}, headers=approver)
    assert r.status_code == 200 and r.json()["state"] == "cancelled"
    denied = await authorize(client, agent, call(plan))
    assert denied["allowed"] is False
    assert denied["deny"]["details"]["approval"]["state"] == "pending"
    assert denied["deny"]["details"]["approval"]["approval_id"] != pending["approval_id"]


async def test_expired_grants_and_pending_requests_stop_counting(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant",
                      json={"ttl_seconds": 1}, headers=approver)
    # Let it lapse (waiting on the clock here is the behaviour under test, not a race:
    # the grant's own expiry is one second, and nothing is asserted before it).
    await asyncio.sleep(1.2)
    denied = await authorize(client, agent, call(plan))
    assert denied["allowed"] is False
    fresh = denied["deny"]["details"]["approval"]
    assert fresh["approval_id"] != pending["approval_id"] and fresh["state"] == "pending"
    got = (await client.get(f"/v1/approvals/{pending['approval_id']}", headers=agent)).json()
    assert got["state"] == "expired"
    # Expiry is written once, in the chain.
    await client.app.state.background.run_once()
    await client.app.state.background.run_once()
    events = await approval_events(client, pending["approval_id"])
    assert events == ["requested", "granted", "expired"]


async def approval_events(client, approval_id: str) -> list[str]:
    items = (await client.get("/v1/decisions?kind=approval&limit=1000")).json()["items"]
    return [i["detail"]["event"] for i in reversed(items)
            if i["detail"]["approval"]["approval_id"] == approval_id]


async def test_every_event_is_in_the_chain_and_the_chain_verifies(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={"uses": 2},
                      headers=approver)
    await authorize(client, agent, call(plan))
    await authorize(client, agent, call(plan))
    assert await approval_events(client, pending["approval_id"]) == [
        "requested", "granted", "used", "used"]
    verified = (await client.get("/v1/audit/verify")).json()
    assert verified["ok"] is True, verified
    exported = (await client.get("/v1/audit/export")).text
    assert exported.count('"kind":"approval"') == 4
    # /v1/decisions without kind= lists what it listed before approvals existed.
    kinds = {i["kind"] for i in (await client.get("/v1/decisions?limit=1000")).json()["items"]}
    assert "approval" not in kinds


async def test_concurrent_denied_calls_create_one_approval(client, people):
    agent, _ = people
    plan = await setup(client)
    answers = await asyncio.gather(*(authorize(client, agent, call(plan)) for _ in range(50)))
    ids = {a["deny"]["details"]["approval"]["approval_id"] for a in answers}
    assert len(ids) == 1
    assert len((await client.get("/v1/approvals")).json()["items"]) == 1


async def test_concurrent_retries_on_a_one_use_grant_give_one_allow(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                      headers=approver)
    answers = await asyncio.gather(*(authorize(client, agent, call(plan)) for _ in range(20)))
    assert sum(a["allowed"] for a in answers) == 1


async def test_too_many_pending_creates_nothing(settings, people_free_client):
    client = people_free_client
    agent = await new_key(client, "agent", principal="bot")
    plan = await setup(client)
    for n in range(3):
        answer = await authorize(client, agent, call(plan, args={"n": n}))
        assert answer["deny"]["details"]["approval"]["state"] == "pending"
    answer = await authorize(client, agent, call(plan, args={"n": 99}))
    assert answer["deny"]["details"]["approval"]["state"] == "too_many_pending"
    assert len((await client.get("/v1/approvals")).json()["items"]) == 3


@pytest.fixture
async def people_free_client(settings):
    from tests.conftest import app_client
    async with app_client(settings.model_copy(
            update={"approval_max_pending_per_plan": 3})) as c:
        yield c


async def test_wait_answers_when_the_approval_is_decided(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    waiting = asyncio.create_task(
        client.get(f"/v1/approvals/{pending['approval_id']}?wait=30", headers=agent))
    waiters = client.app.state.approvals._waiters
    await until(lambda: waiters.get(pending["approval_id"]), "the request waits")
    assert not waiting.done()
    started = utcnow()
    await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                      headers=approver)
    answer = await asyncio.wait_for(waiting, 10)
    assert answer.json()["state"] == "granted"
    assert (utcnow() - started).total_seconds() < 10


async def test_wait_on_a_decided_approval_answers_at_once_and_bad_waits_are_422(client, people):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    await client.post(f"/v1/approvals/{pending['approval_id']}/reject",
                      json={"reason": "no"}, headers=approver)
    r = await asyncio.wait_for(
        client.get(f"/v1/approvals/{pending['approval_id']}?wait=60", headers=agent), 5)
    assert r.json()["state"] == "rejected"
    for bad in ("0", "61", "x"):
        r = await client.get(f"/v1/approvals/{pending['approval_id']}?wait={bad}")
        assert r.status_code == 422 and "wait" in r.text


@pytest.mark.parametrize(("path", "body", "field"), [
    ("grant", {"ttl_seconds": 0}, "ttl_seconds"),
    ("grant", {"ttl_seconds": 86401}, "ttl_seconds"),
    ("grant", {"uses": 0}, "uses"),
    ("grant", {"uses": 101}, "uses"),
    ("grant", {"uses": "2"}, "uses"),
    ("grant", {"surprise": 1}, "surprise"),
    ("reject", {}, "reason"),
    ("reject", {"reason": ""}, "reason"),
    ("reject", {"reason": "x" * 2001}, "reason"),
])
async def test_bad_decisions_are_422_naming_the_field_and_change_nothing(client, people, path,
                                                                         body, field):
    agent, approver = people
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/{path}", json=body,
                          headers=approver)
    assert r.status_code == 422, r.text
    assert field in r.text
    got = (await client.get(f"/v1/approvals/{pending['approval_id']}", headers=agent)).json()
    assert got["state"] == "pending"


async def test_unknown_approvals_are_404_and_bad_filters_422(client):
    assert (await client.get("/v1/approvals/nope")).status_code == 404
    assert (await client.post("/v1/approvals/nope/grant", json={})).status_code == 404
    r = await client.get("/v1/approvals?state=maybe")
    assert r.status_code == 422 and "state" in r.text
    r = await client.get("/v1/approvals?cursor=%%%")
    assert r.status_code == 422 and "cursor" in r.text


async def test_list_pages_newest_first(client, people):
    agent, _ = people
    plan = await setup(client)
    for n in range(5):
        await authorize(client, agent, call(plan, args={"n": n}))
    first = (await client.get("/v1/approvals?limit=2")).json()
    second = (await client.get(f"/v1/approvals?limit=2&cursor={first['next_cursor']}")).json()
    third = (await client.get(f"/v1/approvals?limit=2&cursor={second['next_cursor']}")).json()
    args = [a["request"]["args"]["n"] for page in (first, second, third)
            for a in page["items"]]
    assert args == [4, 3, 2, 1, 0] and third["next_cursor"] is None


async def test_decision_tests_count_no_grant_and_take_no_use(client):
    """POST /v1/test (docs/registry.md) neither reads nor changes live state: in server
    mode check 6 counts no grant, however many exist, and no use of a grant is taken."""
    agent = await new_key(client, "agent", principal="bot")
    approver = await new_key(client, "approver", principal="alice")
    plan = await setup(client)
    pending = (await authorize(client, agent, call(plan)))["deny"]["details"]["approval"]
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=approver)
    assert r.status_code == 200, r.text
    case = {"request": call(plan, metadata={"human_approved": True}),
            "expect": {"allowed": False, "code": "human_approval_required"}}
    r = await client.post("/v1/test", json=[case])
    assert r.status_code == 200, r.text
    assert r.json()["ok"] is True, r.text
    approval = (await client.get(f"/v1/approvals/{pending['approval_id']}",
                                 headers=approver)).json()
    assert approval["state"] == "granted" and approval["uses_left"] == 1
    assert (await authorize(client, agent, call(plan)))["allowed"] is True
