"""A non-admin key may choose its plan's profile only to tighten it (SPEC §17), on SQLite and
Postgres: naming a profile looser than what the action resolves to, in any field, is 403
`profile_loosening_forbidden` naming the first looser field, and no plan is created; a
profile as strict or stricter is accepted; an admin may do either."""

from __future__ import annotations

import pytest

from tests.auth.test_auth import bearer, new_key, second_app

STRICT = {"require_sandbox": True, "require_checkpoints": True, "allow_unsafe_tools": False,
          "require_human_approval": True, "allowed_skill_categories": ["read", "search"],
          "max_cost_per_plan": 10.0, "max_retries_per_step": 2, "max_total_cost": 100.0}

LOOSER = [
    ("require_sandbox", {"require_sandbox": False}),
    ("require_checkpoints", {"require_checkpoints": False}),
    ("allow_unsafe_tools", {"allow_unsafe_tools": True}),
    ("require_human_approval", {"require_human_approval": False}),
    ("allowed_skill_categories", {"allowed_skill_categories": []}),
    ("allowed_skill_categories", {"allowed_skill_categories": ["read", "write"]}),
    ("max_cost_per_plan", {"max_cost_per_plan": None}),
    ("max_cost_per_plan", {"max_cost_per_plan": 10.5}),
    ("max_retries_per_step", {"max_retries_per_step": 3}),
    ("max_total_cost", {"max_total_cost": None}),
    ("max_total_cost", {"max_total_cost": 1000.0}),
]


async def _setup(client, action_profile: dict | str) -> dict:
    await client.put("/v1/profiles/strict", json={"safety": STRICT})
    body = ({"automation_profile": action_profile} if isinstance(action_profile, str)
            else {"safety_profile": action_profile})
    r = await client.put("/v1/actions/deploy", json={"project": "web", **body})
    assert r.status_code in (200, 201), r.text
    return bearer((await new_key(client, "agent", ["web"]))["key"])


@pytest.mark.parametrize(("field", "change"), LOOSER)
async def test_a_looser_named_profile_is_refused(client, field, change):
    agent = await _setup(client, "strict")
    await client.put("/v1/profiles/mine", json={"safety": {**STRICT, **change}})
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "deploy", "automation_profile": "mine",
                                "plan_id": "p-1"})
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "profile_loosening_forbidden"
    assert error["details"]["field"] == field and field in error["message"]
    assert (await client.get("/v1/plans/p-1")).status_code == 404
    # An admin may choose it.
    r = await client.post("/v1/plans", json={"action_id": "deploy",
                                             "automation_profile": "mine"})
    assert r.status_code == 201, r.text


async def test_the_issue_reproduction_lax_profile_for_an_approval_action(client):
    """`lax` on an action that requires approval: before, 201 and the plan ran on `lax`."""
    await client.put("/v1/profiles/lax", json={"safety": {
        "require_sandbox": False, "require_checkpoints": False, "allow_unsafe_tools": True}})
    agent = await _setup(client, {"require_human_approval": True})
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "deploy", "automation_profile": "lax"})
    assert r.status_code == 403, r.text
    # Defaults of the action's inline profile: require_sandbox true, first in order.
    assert r.json()["error"]["details"]["field"] == "require_sandbox"


async def test_the_first_looser_field_is_named(client):
    agent = await _setup(client, "strict")
    await client.put("/v1/profiles/mine", json={"safety": {
        **STRICT, "allow_unsafe_tools": True, "max_total_cost": None}})
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "deploy", "automation_profile": "mine"})
    assert r.json()["error"]["details"]["field"] == "allow_unsafe_tools"


async def test_a_tighter_or_equal_profile_is_accepted(client):
    agent = await _setup(client, "strict")
    await client.put("/v1/profiles/tighter", json={"safety": {
        **STRICT, "allowed_skill_categories": ["read"], "max_cost_per_plan": 5.0,
        "max_retries_per_step": 0, "max_total_cost": 50.0}})
    for name in ("strict", "tighter"):
        r = await client.post("/v1/plans", headers=agent,
                              json={"action_id": "deploy", "automation_profile": name})
        assert r.status_code == 201, r.text
        assert r.json()["provenance"] == "plan" and r.json()["name"] == name


async def test_any_categories_tighten_an_empty_list(client):
    """An empty allow-list allows every category: any list is a tightening."""
    agent = await _setup(client, {**STRICT, "allowed_skill_categories": []})
    await client.put("/v1/profiles/cats", json={"safety": {
        **STRICT, "allowed_skill_categories": ["anything"]}})
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "deploy", "automation_profile": "cats"})
    assert r.status_code == 201, r.text


async def test_the_baseline_is_what_the_action_resolves_to(client):
    """No action profile: the project's (then the global one) is the baseline."""
    await client.put("/v1/profiles/strict", json={"safety": STRICT})
    await client.put("/v1/projects/web", json={"automation_profile": "strict"})
    await client.put("/v1/actions/deploy", json={"project": "web"})
    await client.put("/v1/profiles/default-ish", json={"safety": {}})
    agent = bearer((await new_key(client, "agent", ["web"]))["key"])
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "deploy", "automation_profile": "default-ish"})
    assert r.status_code == 403 and r.json()["error"]["details"]["field"] \
        == "require_human_approval"


async def test_inline_profiles_are_held_to_the_same_rule(client, settings):
    await _setup(client, "strict")
    lenient = settings.model_copy(update={"allow_inline_profiles": True})
    async with second_app(lenient) as replica:
        agent = bearer((await new_key(replica, "agent", ["web"]))["key"])
        r = await replica.post("/v1/plans", headers=agent, json={
            "action_id": "deploy", "safety_profile": {**STRICT, "max_retries_per_step": 9}})
        assert r.status_code == 403
        assert r.json()["error"]["details"]["field"] == "max_retries_per_step"
        r = await replica.post("/v1/plans", headers=agent, json={
            "action_id": "deploy", "safety_profile": STRICT})
        assert r.status_code == 201, r.text
