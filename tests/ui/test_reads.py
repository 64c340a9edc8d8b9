"""The operators' page's reads (app/ui/reads.py, docs/ui.md): who is behind a key id, the
deny an approval was asked by, who created a plan, the approvals waiting now and the
outcomes of a page of decisions; each within the key's projects."""

from __future__ import annotations

import httpx

WRITER = {"writes": True, "checkpointable": True, "unsafe": False}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _key(client: httpx.AsyncClient, role: str, principal: str,
               projects: list[str] | None = None) -> dict:
    r = await client.post("/v1/keys", json={"name": f"{principal}-key", "role": role,
                                            "projects": projects, "principal": principal})
    assert r.status_code == 201, r.text
    return r.json()


async def _held(client: httpx.AsyncClient, project: str = "ops") -> dict:
    """A plan in a server-mode project whose profile needs approval, created by an agent
    key, and one deploy it asked for: denied, with a pending approval."""
    await client.put("/v1/profiles/guard", json={"safety": {
        "require_human_approval": True, "require_sandbox": False,
        "require_checkpoints": False}})
    await client.put(f"/v1/projects/{project}", json={})
    await client.put(f"/v1/projects/{project}/settings", json={"approval_mode": "server"})
    await client.put(f"/v1/actions/release-{project}",
                     json={"project": project, "automation_profile": "guard"})
    agent = await _key(client, "agent", f"bot-{project}")
    plan = (await client.post("/v1/plans", json={"action_id": f"release-{project}"},
                              headers=bearer(agent["key"]))).json()
    call = {"plan_id": plan["plan_id"], "tool": {"name": "deploy", "capability": WRITER,
                                                  "args": {"version": "1.4.2"}},
            "context": {"metadata": {"token": "s3cret"}}}
    denied = (await client.post("/v1/authorize-tool", json=call,
                                headers=bearer(agent["key"]))).json()
    assert denied["deny"]["code"] == "human_approval_required", denied
    return {"agent": agent, "plan": plan, "call": call, "denied": denied,
            "approval_id": denied["deny"]["details"]["approval"]["approval_id"]}


async def test_principals_name_the_keys_behind_ids_and_never_their_secrets(client):
    agent = await _key(client, "agent", "release-bot")
    approver = await _key(client, "approver", "alice", ["ops"])
    r = await client.get("/v1/principals", params=[
        ("key_id", agent["id"]), ("key_id", "key_0000000000000000"), ("key_id", "admin-token")],
        headers=bearer(approver["key"]))
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert items == [
        {"key_id": agent["id"], "name": "release-bot-key", "principal": "release-bot",
         "role": "agent", "revoked": False},
        {"key_id": "admin-token", "name": "TOOLGATE_ADMIN_TOKEN", "principal": "admin-token",
         "role": "admin", "revoked": False}]
    assert agent["key"] not in r.text and agent["prefix"] not in r.text
    # A revoked key still names who made its records.
    await client.delete(f"/v1/keys/{agent['id']}")
    again = await client.get("/v1/principals", params={"key_id": agent["id"]})
    assert again.json()["items"][0]["revoked"] is True


async def test_principals_refuse_bad_ids_and_too_many(client):
    r = await client.get("/v1/principals", params={"key_id": "a b"})
    assert r.status_code == 422 and "key_id" in r.text
    r = await client.get("/v1/principals", params=[("key_id", f"k{i}") for i in range(101)])
    assert r.status_code == 422 and "key_id" in r.text
    assert (await client.get("/v1/principals")).status_code == 422


async def test_an_approval_opens_the_deny_that_asked_for_it(client):
    held = await _held(client)
    approver = await _key(client, "approver", "alice", ["ops"])
    r = await client.get(f"/v1/approvals/{held['approval_id']}/decision",
                         headers=bearer(approver["key"]))
    assert r.status_code == 200, r.text
    d = r.json()
    assert d["decision_id"] == held["denied"]["decision_id"]
    assert d["code"] == "human_approval_required" and d["tool"] == "deploy"
    assert d["key_id"] == held["agent"]["id"]
    assert d["detail"]["tool"]["args"] == {"version": "1.4.2"}
    assert d["detail"]["context"]["metadata"] == {"token": "[masked]"}
    assert "s3cret" not in r.text
    assert "requires human approval" in d["detail"]["message"]
    # The agent's retry while pending reuses the approval: still the first deny.
    await client.post("/v1/authorize-tool", json=held["call"],
                      headers=bearer(held["agent"]["key"]))
    again = await client.get(f"/v1/approvals/{held['approval_id']}/decision")
    assert again.json()["decision_id"] == held["denied"]["decision_id"]


async def test_an_approval_elsewhere_or_unknown_is_404(client):
    held = await _held(client)
    elsewhere = await _key(client, "approver", "bob", ["other"])
    r = await client.get(f"/v1/approvals/{held['approval_id']}/decision",
                         headers=bearer(elsewhere["key"]))
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    r = await client.get("/v1/approvals/01a2365a-cd43-768f-8d3e-59557493418c/decision")
    assert r.status_code == 404


async def test_a_plan_names_the_key_that_created_it(client):
    held = await _held(client)
    approver = await _key(client, "approver", "alice", ["ops"])
    r = await client.get(f"/v1/plans/{held['plan']['plan_id']}/creator",
                         headers=bearer(approver["key"]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["key_id"] == held["agent"]["id"]
    assert body["who"]["principal"] == "bot-ops" and body["who"]["name"] == "bot-ops-key"
    elsewhere = await _key(client, "approver", "bob", ["other"])
    r = await client.get(f"/v1/plans/{held['plan']['plan_id']}/creator",
                         headers=bearer(elsewhere["key"]))
    assert r.status_code == 404


async def test_approval_stats_count_what_waits_within_the_keys_projects(client):
    empty = (await client.get("/v1/approval-stats")).json()
    assert empty == {"pending": 0, "oldest_requested_at": None}
    first = await _held(client, "ops")
    await _held(client, "lab")
    everything = (await client.get("/v1/approval-stats")).json()
    assert everything["pending"] == 2
    approval = (await client.get(f"/v1/approvals/{first['approval_id']}")).json()
    assert everything["oldest_requested_at"] == approval["requested_at"]
    auditor = await _key(client, "auditor", "carol", ["lab"])
    scoped = (await client.get("/v1/approval-stats", headers=bearer(auditor["key"]))).json()
    assert scoped["pending"] == 1
    assert (await client.get("/v1/approval-stats", params={"project": "ops"})
            ).json()["pending"] == 1
    # Decided approvals no longer wait.
    approver = await _key(client, "approver", "alice")
    await client.post(f"/v1/approvals/{first['approval_id']}/reject",
                      json={"reason": "no"}, headers=bearer(approver["key"]))
    assert (await client.get("/v1/approval-stats")).json()["pending"] == 1


async def test_outcomes_of_a_page_of_decisions(client):
    await client.put("/v1/projects/ops", json={})
    await client.put("/v1/actions/run", json={"project": "ops", "safety_profile": {
        "require_sandbox": False, "require_checkpoints": False}})
    agent = await _key(client, "agent", "bot")
    plan = (await client.post("/v1/plans", json={"action_id": "run"},
                              headers=bearer(agent["key"]))).json()["plan_id"]
    ids = []
    for _ in range(2):
        d = (await client.post("/v1/authorize-tool", headers=bearer(agent["key"]), json={
            "plan_id": plan, "tool": {"name": "build", "capability": WRITER}})).json()
        assert d["allowed"] is True, d
        ids.append(d["decision_id"])
    r = await client.post(f"/v1/decisions/{ids[0]}/outcome", headers=bearer(agent["key"]),
                          json={"status": "succeeded", "cost": 2.5})
    assert r.status_code == 201, r.text
    got = (await client.get("/v1/outcomes", params=[("decision_id", i) for i in ids])).json()
    assert list(got["items"]) == [ids[0]]
    assert got["items"][ids[0]]["status"] == "succeeded"
    assert got["items"][ids[0]]["cost"] == 2.5
    auditor = await _key(client, "auditor", "carol", ["other"])
    hidden = (await client.get("/v1/outcomes", params={"decision_id": ids[0]},
                               headers=bearer(auditor["key"]))).json()
    assert hidden["items"] == {}
    assert (await client.get("/v1/outcomes", params={"decision_id": "x'; drop"})
            ).status_code == 422
