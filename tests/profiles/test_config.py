"""Named profiles with versions, global config, projects and actions."""

STRICT = {"require_sandbox": True, "allow_unsafe_tools": False, "max_retries_per_step": 1}


async def test_profile_versions_increase_and_identical_put_creates_none(client):
    r = await client.put("/v1/profiles/strict", json={"description": "d", "safety": STRICT})
    assert r.status_code == 201
    assert r.json()["version"] == 1
    assert r.json()["safety"]["max_retries_per_step"] == 1
    r = await client.put("/v1/profiles/strict", json={"description": "d", "safety": STRICT})
    assert r.status_code == 200 and r.json()["version"] == 1
    r = await client.put("/v1/profiles/strict",
                         json={"description": "d", "safety": {**STRICT, "max_retries_per_step": 5}})
    assert r.status_code == 200 and r.json()["version"] == 2
    versions = (await client.get("/v1/profiles/strict/versions")).json()["items"]
    assert [v["version"] for v in versions] == [1, 2]
    assert versions[0]["safety"]["max_retries_per_step"] == 1
    listed = (await client.get("/v1/profiles")).json()["items"]
    assert [p["name"] for p in listed] == ["strict"]


async def test_profile_defaults_are_filled(client):
    r = await client.put("/v1/profiles/empty", json={})
    assert r.status_code == 201
    assert r.json()["safety"] == {
        "require_sandbox": True, "require_checkpoints": True, "allow_unsafe_tools": False,
        "require_human_approval": False, "allowed_skill_categories": [],
        "max_cost_per_plan": None, "max_retries_per_step": 3, "max_total_cost": None,
    }


async def test_unknown_profile_is_404(client):
    r = await client.get("/v1/profiles/nope")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert (await client.get("/v1/profiles/nope/versions")).status_code == 404
    assert (await client.delete("/v1/profiles/nope")).status_code == 404


async def test_delete_profile_in_use_is_409_naming_users(client):
    await client.put("/v1/profiles/p1", json={})
    await client.put("/v1/config", json={"automation_profile": "p1"})
    await client.put("/v1/projects/proj", json={"automation_profile": "p1"})
    await client.put("/v1/actions/a1", json={"automation_profile": "p1"})
    r = await client.delete("/v1/profiles/p1")
    assert r.status_code == 409
    details = r.json()["error"]["details"]
    assert details["config"] is True
    assert details["projects"] == ["proj"]
    assert details["actions"] == ["a1"]
    assert (await client.get("/v1/profiles/p1")).status_code == 200

    await client.put("/v1/config", json={"automation_profile": None})
    await client.put("/v1/projects/proj", json={"automation_profile": None})
    await client.put("/v1/actions/a1", json={})
    assert (await client.delete("/v1/profiles/p1")).status_code == 204
    assert (await client.get("/v1/profiles/p1")).status_code == 404


async def test_delete_then_recreate_continues_versions(client):
    await client.put("/v1/profiles/p", json={})
    await client.delete("/v1/profiles/p")
    r = await client.put("/v1/profiles/p", json={"description": "again"})
    assert r.status_code == 201 and r.json()["version"] == 2
    # A re-created profile's history includes the versions before its deletion.
    versions = (await client.get("/v1/profiles/p/versions")).json()["items"]
    assert [v["version"] for v in versions] == [1, 2]


async def test_a_deleted_profile_has_no_versions_to_list(client):
    """Like GET /v1/profiles/{name}: a deleted profile does not exist (SPEC §4: 404), though
    its versions are kept for when it is created again."""
    await client.put("/v1/profiles/gone", json={})
    assert (await client.delete("/v1/profiles/gone")).status_code == 204
    r = await client.get("/v1/profiles/gone/versions")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"


async def test_config_project_action_roundtrip(client):
    assert (await client.get("/v1/config")).json()["automation_profile"] is None
    await client.put("/v1/profiles/base", json={})
    r = await client.put("/v1/config", json={"automation_profile": "base"})
    assert r.status_code == 200 and r.json()["automation_profile"] == "base"
    r = await client.put("/v1/projects/web", json={"automation_profile": "base"})
    assert r.status_code == 201
    assert (await client.put("/v1/projects/web", json={})).status_code == 200
    assert (await client.get("/v1/projects/web")).json()["automation_profile"] is None
    assert (await client.get("/v1/projects/other")).status_code == 404
    r = await client.put("/v1/actions/deploy", json={
        "project": "web", "read_only": True, "safety_profile": {"require_sandbox": False}})
    assert r.status_code == 201
    body = (await client.get("/v1/actions/deploy")).json()
    assert body["read_only"] is True and body["project"] == "web"
    assert body["safety_profile"]["require_sandbox"] is False
    assert (await client.get("/v1/actions/missing")).status_code == 404


async def test_naming_a_missing_profile_is_422_and_changes_nothing(client):
    for path, body in [
        ("/v1/config", {"automation_profile": "ghost"}),
        ("/v1/projects/p", {"automation_profile": "ghost"}),
        ("/v1/actions/a", {"automation_profile": "ghost"}),
    ]:
        r = await client.put(path, json=body)
        assert r.status_code == 422, path
        assert "ghost" in r.json()["error"]["message"]
        assert r.json()["error"]["details"]["profile"] == "ghost"
    assert (await client.get("/v1/config")).json()["automation_profile"] is None
    assert (await client.get("/v1/projects/p")).status_code == 404
    assert (await client.get("/v1/actions/a")).status_code == 404


async def test_action_with_both_profile_kinds_is_422(client):
    await client.put("/v1/profiles/x", json={})
    r = await client.put("/v1/actions/a", json={"automation_profile": "x", "safety_profile": {}})
    assert r.status_code == 422


async def test_list_projects_and_actions(client):
    await client.put("/v1/projects/web", json={})
    await client.put("/v1/projects/api", json={})
    await client.put("/v1/actions/b", json={"project": "web"})
    await client.put("/v1/actions/a", json={"project": "api"})
    await client.put("/v1/actions/c", json={})
    projects = (await client.get("/v1/projects")).json()["items"]
    assert [p["project"] for p in projects] == ["api", "web"]
    actions = (await client.get("/v1/actions")).json()["items"]
    assert [a["action_id"] for a in actions] == ["a", "b", "c"]
    web = (await client.get("/v1/actions", params={"project": "web"})).json()["items"]
    assert [a["action_id"] for a in web] == ["b"]


async def test_delete_profile_named_by_one_kind_of_user_only(client):
    """Each kind of reference alone blocks the delete (a 409, never a 500)."""
    await client.put("/v1/profiles/p", json={})
    for path, body, key in [("/v1/config", {"automation_profile": "p"}, "config"),
                            ("/v1/projects/x", {"automation_profile": "p"}, "projects"),
                            ("/v1/actions/y", {"automation_profile": "p"}, "actions")]:
        await client.put(path, json=body)
        r = await client.delete("/v1/profiles/p")
        assert r.status_code == 409, r.text
        assert set(r.json()["error"]["details"]) == {"profile", key}
        await client.put(path, json={"automation_profile": None} if key != "actions" else {})
    assert (await client.delete("/v1/profiles/p")).status_code == 204


async def test_huge_costs_round_trip_through_every_backend(client):
    """JSONB keeps 1e20 as an integer; it must come back (and be audited) as the float."""
    safety = {"max_cost_per_plan": 1e20, "max_total_cost": 1.5e300}
    r = await client.put("/v1/profiles/rich", json={"safety": safety})
    assert r.status_code == 201
    await client.put("/v1/actions/a", json={"automation_profile": "rich"})
    plan = (await client.post("/v1/plans", json={"action_id": "a", "plan_id": "p"})).json()
    assert plan["safety_profile"]["max_cost_per_plan"] == 1e20
    again = await client.post("/v1/plans", json={"action_id": "a", "plan_id": "p"})
    assert again.status_code == 200
    r = await client.put("/v1/profiles/rich", json={"safety": {"max_cost_per_plan": 2e20}})
    assert r.status_code == 200 and r.json()["version"] == 2
    await client.put("/v1/actions/a", json={})
    assert (await client.delete("/v1/profiles/rich")).status_code == 204
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True
