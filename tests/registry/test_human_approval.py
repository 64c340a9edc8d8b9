"""A registry entry can require human approval for its tool (SPEC §17, issue 35 item 9), on
SQLite and Postgres: with `"human_approval": "required"` check 6 applies to that tool in
every plan with a profile, even one whose profile does not require approval (server mode:
a person grants the exact call; client_flag mode: the agent's flag), without a second plan;
other tools are unchanged; the default is "profile"; replay honours candidate entries."""

from __future__ import annotations

from tests.approvals.test_approvals import authorize, call, new_key, setup

WRITER = {"writes": True, "checkpointable": True, "unsafe": False}
OPEN = {"require_human_approval": False, "require_sandbox": False,
        "require_checkpoints": False}


async def _register(client, name: str, **extra) -> dict:
    r = await client.put(f"/v1/tools/{name}", json={
        "capability": WRITER, "safety_category": "safe", **extra})
    assert r.status_code in (200, 201), r.text
    return r.json()


async def test_the_entry_takes_it_and_refuses_anything_else(client):
    assert (await _register(client, "deploy"))["human_approval"] == "profile"
    assert (await _register(client, "deploy", human_approval="required"))[
        "human_approval"] == "required"
    assert (await client.get("/v1/tools/deploy")).json()["human_approval"] == "required"
    for bad in ("yes", True, None):
        r = await client.put("/v1/tools/deploy", json={
            "capability": WRITER, "safety_category": "safe", "human_approval": bad})
        assert r.status_code == 422 and "human_approval" in r.text, r.text
    assert (await client.get("/v1/tools/deploy")).json()["human_approval"] == "required"


async def test_server_mode_asks_a_person_for_that_tool_only(client):
    agent = await new_key(client, "agent", principal="build-bot")
    approver = await new_key(client, "approver", principal="alice")
    plan = await setup(client, profile=OPEN)  # the plan's profile needs no approval
    assert (await authorize(client, agent, call(plan)))["allowed"] is True  # not registered
    await _register(client, "deploy", human_approval="required")
    denied = await authorize(client, agent, call(plan))
    assert denied["deny"]["code"] == "human_approval_required"
    pending = denied["deny"]["details"]["approval"]
    assert pending["state"] == "pending"
    other = call(plan)
    other["tool"] = {**other["tool"], "name": "status"}
    assert (await authorize(client, agent, other))["allowed"] is True
    r = await client.post(f"/v1/approvals/{pending['approval_id']}/grant", json={},
                          headers=approver)
    assert r.status_code == 200, r.text
    allowed = await authorize(client, agent, call(plan))
    assert allowed["allowed"] is True
    assert (await authorize(client, agent, call(plan)))["allowed"] is False  # used once
    # Back to "profile": as before.
    await _register(client, "deploy")
    assert (await authorize(client, agent, call(plan)))["allowed"] is True


async def test_client_flag_mode_needs_the_agents_flag(client):
    agent = await new_key(client, "agent", principal="build-bot")
    plan = await setup(client, mode="client_flag", profile=OPEN)
    await _register(client, "deploy", human_approval="required")
    denied = await authorize(client, agent, call(plan))
    assert denied["deny"]["code"] == "human_approval_required"
    assert "approval" not in denied["deny"]["details"]
    flagged = call(plan, metadata={"human_approved": True})
    assert (await authorize(client, agent, flagged))["allowed"] is True
    assert (await client.get("/v1/approvals")).json()["items"] == []


async def test_replay_honours_candidate_and_recorded_entries(client):
    agent = await new_key(client, "agent", principal="build-bot")
    plan = await setup(client, mode="client_flag", profile=OPEN)
    await _register(client, "deploy")
    assert (await authorize(client, agent, call(plan)))["allowed"] is True
    await _register(client, "release", human_approval="required")
    released = call(plan)
    released["tool"] = {**released["tool"], "name": "release"}
    assert (await authorize(client, agent, released))["allowed"] is False
    since = "2020-01-01T00:00:00Z"
    r = await client.post("/v1/replay", json={"since": since, "candidate": {}})
    assert r.status_code == 200, r.text
    assert r.json()["checked"] == 2 and r.json()["changed"] == 0
    r = await client.post("/v1/replay", json={"since": since, "candidate": {"tools": {
        "deploy": {"capability": WRITER, "safety_category": "safe",
                   "human_approval": "required"},
        "release": {"capability": WRITER, "safety_category": "safe"}}}})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["allow_to_deny"], answer["deny_to_allow"]) == (1, 1), answer
