"""Plan use: precedence across every level, the lock, idempotency, /v1/resolve."""

import itertools

import pytest

LEVELS = ["plan", "action", "project", "global"]


async def _setup_profiles(client):
    for name, retries in [("p-plan", 10), ("p-action", 20), ("p-project", 30), ("p-global", 40)]:
        r = await client.put(f"/v1/profiles/{name}",
                             json={"safety": {"max_retries_per_step": retries}})
        assert r.status_code == 201


@pytest.mark.parametrize("present", [
    combo for n in range(5) for combo in itertools.combinations(LEVELS, n)
])
async def test_first_non_empty_level_wins_as_a_whole(client, present):
    await _setup_profiles(client)
    await client.put("/v1/config",
                     json={"automation_profile": "p-global" if "global" in present else None})
    await client.put("/v1/projects/proj",
                     json={"automation_profile": "p-project" if "project" in present else None})
    action = {"project": "proj"}
    if "action" in present:
        action["automation_profile"] = "p-action"
    assert (await client.put("/v1/actions/act", json=action)).status_code in (200, 201)
    plan = {"action_id": "act", "plan_id": "pl-1"}
    if "plan" in present:
        plan["automation_profile"] = "p-plan"
    r = await client.post("/v1/plans", json=plan)
    assert r.status_code == 201, r.text
    body = r.json()
    if present:
        winner = present[0]
        assert body["provenance"] == winner
        assert body["name"] == f"p-{winner}"
        assert body["version"] == 1
        assert body["is_default"] is False
        assert body["safety_profile"]["max_retries_per_step"] == {
            "plan": 10, "action": 20, "project": 30, "global": 40}[winner]
    else:
        assert body["provenance"] == "global" and body["is_default"] is True
        assert body["name"] is None and body["version"] is None
        assert body["safety_profile"]["max_retries_per_step"] == 3


async def test_inline_levels_and_no_field_merge(client):
    await client.put("/v1/profiles/g", json={"safety": {"allow_unsafe_tools": True}})
    await client.put("/v1/config", json={"automation_profile": "g"})
    await client.put("/v1/actions/a", json={"safety_profile": {"require_sandbox": False}})
    r = await client.post("/v1/plans", json={"action_id": "a"})
    body = r.json()
    assert body["provenance"] == "action" and body["name"] is None
    # The action's inline profile wins whole: allow_unsafe_tools stays at its default.
    assert body["safety_profile"]["allow_unsafe_tools"] is False
    assert body["safety_profile"]["require_sandbox"] is False
    r = await client.post("/v1/plans", json={"action_id": "a", "safety_profile": {}})
    assert r.json()["provenance"] == "plan"
    assert r.json()["safety_profile"]["require_sandbox"] is True


async def test_lock_survives_every_later_change(client):
    await client.put("/v1/profiles/base", json={"safety": {"allow_unsafe_tools": False}})
    await client.put("/v1/projects/proj", json={"automation_profile": "base"})
    await client.put("/v1/actions/act", json={"project": "proj"})
    created = (await client.post("/v1/plans",
                                 json={"action_id": "act", "plan_id": "locked"})).json()
    assert created["provenance"] == "project" and created["version"] == 1
    unsafe_tool = {"name": "sh", "capability": {"writes": False, "checkpointable": True,
                                                "unsafe": True}}
    r = await client.post("/v1/authorize-tool", json={"plan_id": "locked", "tool": unsafe_tool})
    assert r.json()["deny"]["code"] == "unsafe_tool"

    # Change the named profile, the project, the global config and the action.
    await client.put("/v1/profiles/base", json={"safety": {"allow_unsafe_tools": True}})
    await client.put("/v1/profiles/other", json={"safety": {"allow_unsafe_tools": True}})
    await client.put("/v1/config", json={"automation_profile": "other"})
    await client.put("/v1/projects/proj", json={"automation_profile": "other"})
    await client.put("/v1/actions/act", json={"project": "proj", "read_only": True,
                                              "automation_profile": "other"})
    plan = (await client.get("/v1/plans/locked")).json()
    assert plan["safety_profile"] == created["safety_profile"]
    assert (plan["name"], plan["version"], plan["read_only"]) == ("base", 1, False)
    r = await client.post("/v1/authorize-tool", json={"plan_id": "locked", "tool": unsafe_tool})
    assert r.json()["deny"]["code"] == "unsafe_tool"
    assert r.json()["profile"] == {"provenance": "project", "name": "base", "version": 1,
                                   "is_default": False}
    resolved = (await client.post("/v1/resolve", json={"plan_id": "locked"})).json()
    assert resolved["name"] == "base" and resolved["version"] == 1
    # A new plan sees the new configuration.
    fresh = (await client.post("/v1/plans", json={"action_id": "act"})).json()
    assert fresh["provenance"] == "action" and fresh["name"] == "other"
    assert fresh["read_only"] is True


async def test_lock_survives_a_new_app_instance(client, settings):
    """The lock is stored, not only cached: a second replica reads the same snapshot."""
    import httpx

    from app.main import create_app

    await client.put("/v1/profiles/base", json={"safety": {"require_sandbox": False}})
    await client.put("/v1/actions/act", json={"automation_profile": "base"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p"})
    await client.put("/v1/profiles/base", json={"safety": {"require_sandbox": True}})
    other = create_app(settings)
    async with other.router.lifespan_context(other):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=other),
                                     base_url="http://replica",
                                     headers=client.headers) as replica:
            r = await replica.post("/v1/authorize-tool", json={
                "plan_id": "p", "tool": {"name": "fs.write", "capability": {
                    "writes": True, "checkpointable": True, "unsafe": False}}})
            assert r.json()["allowed"] is True


async def test_requests_for_an_uncached_plan_share_one_read(client):
    """A worker that has just started gets 64 requests for one plan at once: one read of
    the plan between them. A plan that is not there is not shared: a caller that got
    NotFound reads again, so a plan created meanwhile is found by whoever asked after."""
    import asyncio

    from app.edge.errors import NotFound
    from app.plans.service import PlanCache

    state = client.app.state
    reads = [0]

    def sessions():  # counts database reads
        reads[0] += 1
        return state.sessions()

    await client.put("/v1/actions/act", json={"project": "web"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p1"})
    cache = PlanCache(16)
    locks = await asyncio.gather(*(cache.fetch(sessions, "p1") for _ in range(64)))
    assert reads[0] == 1 and {lock.plan_id for lock in locks} == {"p1"}
    assert await cache.fetch(sessions, "p1") is locks[0] and reads[0] == 1

    reads[0] = 0
    results = await asyncio.gather(*(cache.fetch(sessions, "p2") for _ in range(3)),
                                   return_exceptions=True)
    assert all(isinstance(r, NotFound) for r in results)
    assert reads[0] == 4  # the shared read, then each caller's own
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p2"})
    assert (await cache.fetch(sessions, "p2")).plan_id == "p2"


async def test_plan_use_is_idempotent_and_conflicts_on_a_different_body(client):
    await client.put("/v1/actions/a", json={})
    await client.put("/v1/actions/b", json={})
    first = await client.post("/v1/plans", json={"action_id": "a", "plan_id": "p",
                                                 "safety_profile": {}})
    assert first.status_code == 201
    # Same request after normalisation (defaults filled in) -> 200, same plan.
    again = await client.post("/v1/plans", json={"action_id": "a", "plan_id": "p",
                                                 "safety_profile": {"require_sandbox": True}})
    assert again.status_code == 200 and again.json() == first.json()
    for body in [{"action_id": "b", "plan_id": "p", "safety_profile": {}},
                 {"action_id": "a", "plan_id": "p"},
                 {"action_id": "a", "plan_id": "p", "safety_profile": {"require_sandbox": False}}]:
        r = await client.post("/v1/plans", json=body)
        assert r.status_code == 409, body
        assert r.json()["error"]["code"] == "plan_conflict"


async def test_generated_plan_ids_and_listing(client):
    await client.put("/v1/actions/a", json={"project": "x"})
    ids = [(await client.post("/v1/plans", json={"action_id": "a"})).json()["plan_id"]
           for _ in range(3)]
    assert len(set(ids)) == 3
    page = (await client.get("/v1/plans", params={"limit": 2})).json()
    assert len(page["items"]) == 2 and page["next_cursor"]
    params = {"limit": 2, "cursor": page["next_cursor"]}
    rest = (await client.get("/v1/plans", params=params)).json()
    assert len(rest["items"]) == 1 and rest["next_cursor"] is None
    seen = {p["plan_id"] for p in page["items"] + rest["items"]}
    assert seen == set(ids)
    assert (await client.get("/v1/plans", params={"cursor": "garbage!"})).status_code == 422


async def test_plan_errors(client):
    r = await client.post("/v1/plans", json={"action_id": "missing"})
    assert r.status_code == 404
    await client.put("/v1/actions/a", json={})
    r = await client.post("/v1/plans", json={"action_id": "a", "automation_profile": "ghost"})
    assert r.status_code == 422 and "ghost" in r.json()["error"]["message"]
    assert (await client.get("/v1/plans/nope")).status_code == 404
    assert (await client.get("/v1/plans")).json()["items"] == []


async def test_read_only_plan_transitions_are_refused_and_change_nothing(client):
    await client.put("/v1/actions/ro", json={"read_only": True})
    await client.put("/v1/actions/rw", json={})
    await client.post("/v1/plans", json={"action_id": "ro", "plan_id": "ro-1"})
    await client.post("/v1/plans", json={"action_id": "rw", "plan_id": "rw-1"})
    for transition in ("execute", "lifecycle-apply"):
        r = await client.post(f"/v1/plans/ro-1/{transition}")
        assert r.status_code == 409
        error = r.json()["error"]
        assert error["code"] == "plan_read_only"
        assert error["details"]["error"] == "PlanReadOnlyError"
        assert (await client.get("/v1/plans/ro-1")).json()["state"] == "created"
    r = await client.post("/v1/plans/rw-1/execute")
    assert r.status_code == 200 and r.json()["state"] == "executing"
    assert (await client.post("/v1/plans/missing/execute")).status_code == 404


async def test_resolve_without_side_effects(client):
    await client.put("/v1/profiles/proj-p", json={"safety": {"max_retries_per_step": 7}})
    await client.put("/v1/projects/web", json={"automation_profile": "proj-p"})
    await client.put("/v1/actions/a", json={"project": "web"})
    r = await client.post("/v1/resolve", json={"action_id": "a"})
    assert r.json()["provenance"] == "project" and r.json()["name"] == "proj-p"
    r = await client.post("/v1/resolve", json={"project": "web"})
    assert r.json()["safety_profile"]["max_retries_per_step"] == 7
    r = await client.post("/v1/resolve", json={})
    assert r.json()["is_default"] is True and r.json()["provenance"] == "global"
    r = await client.post("/v1/resolve", json={"action_id": "a", "safety_profile": {}})
    assert r.json()["provenance"] == "plan"
    assert (await client.post("/v1/resolve", json={"action_id": "a", "project": "other"})
            ).status_code == 422
    assert (await client.post("/v1/resolve", json={"plan_id": "p", "project": "web"})
            ).status_code == 422
    assert (await client.post("/v1/resolve", json={"plan_id": "p"})).status_code == 404
    assert (await client.post("/v1/resolve", json={"action_id": "zz"})).status_code == 404
    assert (await client.get("/v1/plans")).json()["items"] == []
