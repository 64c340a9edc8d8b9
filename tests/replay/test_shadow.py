"""Shadow profiles (SPEC §12): every decision of a project's plans is evaluated under its
shadow profile too, recorded beside the answer, which never changes."""

from __future__ import annotations

import orjson

WRITER = {"name": "fs.write", "capability": {"writes": True, "checkpointable": True,
                                             "unsafe": False}}
READER = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}
LOOSE = {"require_sandbox": False}


async def _setup(client, project="web", shadow="loose"):
    await client.put("/v1/profiles/strict", json={"safety": {}})
    await client.put("/v1/profiles/loose", json={"safety": LOOSE})
    await client.put(f"/v1/actions/act-{project}", json={"project": project})
    r = await client.post("/v1/plans", json={"action_id": f"act-{project}",
                                             "plan_id": f"p-{project}",
                                             "automation_profile": "strict"})
    assert r.status_code == 201, r.text
    r = await client.put(f"/v1/projects/{project}/settings", json={"shadow_profile": shadow})
    assert r.status_code == 200, r.text


async def _decide(client, plan_id, tool):
    r = await client.post("/v1/authorize-tool", json={"plan_id": plan_id, "tool": tool})
    assert r.status_code == 200, r.text
    return r.json()


def _answer(decision):
    return {k: v for k, v in decision.items() if k != "decision_id"}


async def test_the_shadow_verdict_is_recorded_and_the_answer_unchanged(client):
    await _setup(client)
    await _setup(client, project="plain", shadow=None)
    denied = await _decide(client, "p-web", WRITER)
    same_without_shadow = await _decide(client, "p-plain", WRITER)
    assert denied["deny"]["code"] == "sandbox_required"
    # The same answer as in a project without a shadow (but for the plan's name).
    assert _answer(denied) == orjson.loads(orjson.dumps(_answer(same_without_shadow))
                                           .replace(b"p-plain", b"p-web"))
    record = (await client.get(f"/v1/decisions/{denied['decision_id']}")).json()
    assert record["shadow"] == {"profile": "loose", "version": 1, "allowed": True,
                                "code": None}
    assert record["allowed"] is False and record["code"] == "sandbox_required"
    plain = (await client.get(f"/v1/decisions/{same_without_shadow['decision_id']}")).json()
    assert plain["shadow"] is None
    allowed = await _decide(client, "p-web", READER)
    record = (await client.get(f"/v1/decisions/{allowed['decision_id']}")).json()
    assert record["shadow"]["allowed"] is True and record["allowed"] is True

    r = await client.get("/v1/decisions", params={"shadow_changed": "true"})
    assert [d["decision_id"] for d in r.json()["items"]] == [denied["decision_id"]]
    assert r.json()["items"][0]["shadow"]["profile"] == "loose"
    r = await client.get("/v1/decisions", params={"shadow_changed": "false"})
    assert [d["decision_id"] for d in r.json()["items"]] == [allowed["decision_id"]]
    r = await client.get("/v1/decisions/stats", params={"group_by": "shadow_code"})
    assert r.json()["groups"] == [{"key": None, "count": 2, "allowed": 1, "denied": 1}]
    assert r.json()["total"]["count"] == 3  # the decision without a shadow counts here
    # The records verify as before: the shadow is in the hashed detail.
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_a_new_version_of_the_shadow_profile_is_used_at_once(client):
    await _setup(client)
    r = await client.put("/v1/profiles/loose", json={"safety": {**LOOSE,
                                                                "require_checkpoints": False,
                                                                "max_retries_per_step": 0}})
    assert r.json()["version"] == 2
    r = await client.post("/v1/authorize-tool", json={
        "plan_id": "p-web", "tool": READER, "context": {"step_retry_count": 1}})
    record = (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
    assert record["allowed"] is True
    assert record["shadow"] == {"profile": "loose", "version": 2, "allowed": False,
                                "code": "retry_limit_exceeded"}
    r = await client.get("/v1/decisions/stats", params={"group_by": "shadow_code"})
    assert r.json()["groups"] == [{"key": "retry_limit_exceeded", "count": 1, "allowed": 1,
                                   "denied": 0}]
    # Turned off: no shadow any more.
    await client.put("/v1/projects/web/settings", json={})
    decision = await _decide(client, "p-web", READER)
    record = (await client.get(f"/v1/decisions/{decision['decision_id']}")).json()
    assert record["shadow"] is None and "shadow" not in record["detail"]


async def test_a_shadow_in_server_mode_needs_a_grant(client):
    await client.put("/v1/profiles/approve", json={"safety": {"require_sandbox": False,
                                                              "require_human_approval": True}})
    await _setup(client, shadow="approve")
    await client.put("/v1/projects/web/settings", json={"shadow_profile": "approve",
                                                        "approval_mode": "server"})
    r = await client.post("/v1/authorize-tool", json={
        "plan_id": "p-web", "tool": READER, "context": {"metadata": {"human_approved": True}}})
    record = (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
    assert record["allowed"] is True
    # The agent's own flag is not evidence in server mode, for the shadow either.
    assert record["shadow"]["code"] == "human_approval_required"


async def test_stateless_decisions_have_no_shadow(client):
    await _setup(client)
    r = await client.post("/v1/authorize-tool", json={"tool": WRITER,
                                                      "safety_profile": {}})
    record = (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
    assert record["shadow"] is None
