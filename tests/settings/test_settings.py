"""Project settings (SPEC §9): PUT/GET /v1/projects/{project}/settings, the registry-settings
route as a part of them, audit, roles, other replicas, profile deletion."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from app.main import create_app
from app.registry.service import ProjectConfig

DEFAULTS = {"deny_unregistered_tools": False, "approval_mode": "client_flag",
            "shadow_profile": None}
READER = {"writes": False, "checkpointable": True, "unsafe": False}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def new_key(client: httpx.AsyncClient, role: str,
                  projects: list[str] | None = None) -> dict[str, str]:
    r = await client.post("/v1/keys", json={"name": role, "role": role, "projects": projects})
    assert r.status_code == 201, r.text
    return bearer(r.json()["key"])


def _values(body: dict) -> dict:
    return {k: body[k] for k in DEFAULTS}


async def _changes(client: httpx.AsyncClient, resource: str) -> list[dict]:
    items = (await client.get("/v1/decisions?kind=config&limit=1000")).json()["items"]
    return [i["detail"] for i in reversed(items) if i["detail"]["resource"] == resource]


async def test_put_replaces_the_whole_settings_and_get_serves_them(client):
    r = await client.get("/v1/projects/web/settings")
    assert r.status_code == 200
    assert r.json() == {"project": "web", **DEFAULTS, "updated_at": None}
    await client.put("/v1/profiles/candidate", json={})

    body = {"deny_unregistered_tools": True, "approval_mode": "server",
            "shadow_profile": "candidate"}
    r = await client.put("/v1/projects/web/settings", json=body)
    assert r.status_code == 200, r.text
    assert _values(r.json()) == body and r.json()["project"] == "web"
    assert r.json()["updated_at"] is not None
    assert _values((await client.get("/v1/projects/web/settings")).json()) == body

    # Absent fields take their defaults: a PUT is the whole settings, never a patch.
    r = await client.put("/v1/projects/web/settings", json={"approval_mode": "server"})
    assert _values(r.json()) == {**DEFAULTS, "approval_mode": "server"}
    r = await client.put("/v1/projects/web/settings", json={})
    assert _values(r.json()) == DEFAULTS
    assert _values((await client.get("/v1/projects/web/settings")).json()) == DEFAULTS
    # Other projects are untouched.
    assert (await client.get("/v1/projects/api/settings")).json()["updated_at"] is None


async def test_registry_settings_change_only_deny_unregistered_tools(client):
    await client.put("/v1/profiles/candidate", json={})
    await client.put("/v1/projects/web/settings",
                     json={"approval_mode": "server", "shadow_profile": "candidate"})
    r = await client.put("/v1/projects/web/registry-settings",
                         json={"deny_unregistered_tools": True})
    assert r.status_code == 200
    assert set(r.json()) == {"project", "deny_unregistered_tools", "updated_at"}  # part one's
    assert r.json()["deny_unregistered_tools"] is True
    assert _values((await client.get("/v1/projects/web/settings")).json()) == {
        "deny_unregistered_tools": True, "approval_mode": "server",
        "shadow_profile": "candidate"}
    # And the other way round: /settings is what registry-settings reads.
    await client.put("/v1/projects/web/settings", json={"approval_mode": "server"})
    r = await client.get("/v1/projects/web/registry-settings")
    assert r.json()["deny_unregistered_tools"] is False
    # A project first set through registry-settings has the other defaults.
    await client.put("/v1/projects/api/registry-settings", json={"deny_unregistered_tools": True})
    assert _values((await client.get("/v1/projects/api/settings")).json()) == {
        **DEFAULTS, "deny_unregistered_tools": True}


@pytest.mark.parametrize("body, field", [
    ({"shadow_profile": "nope"}, "shadow_profile"),          # names no profile
    ({"shadow_profile": "Not A Name"}, "shadow_profile"),
    ({"shadow_profile": 3}, "shadow_profile"),
    ({"approval_mode": "manual"}, "approval_mode"),
    ({"approval_mode": None}, "approval_mode"),
    ({"deny_unregistered_tools": "yes"}, "deny_unregistered_tools"),
    ({"deny_unregistered_tools": 1}, "deny_unregistered_tools"),
    ({"approval": "server"}, "approval"),
])
async def test_bad_settings_are_422_naming_the_field_and_change_nothing(client, body, field):
    await client.put("/v1/projects/web/settings", json={"approval_mode": "server"})
    before = (await client.get("/v1/projects/web/settings")).json()
    changes = len(await _changes(client, "project_settings"))
    r = await client.put("/v1/projects/web/settings",
                         json={"deny_unregistered_tools": True, **body})
    assert r.status_code == 422, r.text
    assert field in [f["field"] for f in r.json()["error"]["details"]["fields"]]
    if body == {"shadow_profile": "nope"}:
        assert r.json()["error"]["code"] == "unknown_profile"
    assert (await client.get("/v1/projects/web/settings")).json() == before
    assert len(await _changes(client, "project_settings")) == changes


async def test_bad_project_names_and_bodies(client):
    assert (await client.put("/v1/projects/bad%20name/settings", json={})).status_code == 422
    assert (await client.get("/v1/projects/bad%20name/settings")).status_code == 422
    r = await client.put("/v1/projects/web/settings", content=b'{"approval_mode": NaN}')
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_json"
    r = await client.put("/v1/projects/web/settings", json=["server"])
    assert r.status_code == 422
    assert (await client.get("/v1/project-settings")).json()["items"] == []


async def test_changes_are_audited_and_an_identical_put_records_nothing(client):
    await client.put("/v1/profiles/candidate", json={})
    await client.put("/v1/projects/web/settings", json={"approval_mode": "server"})
    await client.put("/v1/projects/web/settings", json={"approval_mode": "server"})
    await client.put("/v1/projects/web/settings",
                     json={"approval_mode": "server", "shadow_profile": "candidate"})
    changes = await _changes(client, "project_settings")
    assert [(c["operation"], c["name"]) for c in changes] == [("create", "web"),
                                                              ("update", "web")]
    assert changes[0]["before"] is None
    assert changes[0]["after"] == {**DEFAULTS, "approval_mode": "server"}
    assert changes[1]["before"] == changes[0]["after"]
    assert changes[1]["after"]["shadow_profile"] == "candidate"
    items = (await client.get("/v1/decisions?kind=config&project=web")).json()["items"]
    assert len([i for i in items if i["detail"]["resource"] == "project_settings"]) == 2
    # registry-settings keeps recording as it did.
    await client.put("/v1/projects/web/registry-settings", json={"deny_unregistered_tools": True})
    (change,) = await _changes(client, "registry_settings")
    assert (change["before"], change["after"]) == ({"deny_unregistered_tools": False},
                                                   {"deny_unregistered_tools": True})
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_decisions_follow_deny_unregistered_tools_set_through_settings(client):
    await client.put("/v1/actions/act", json={"project": "locked"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p"})
    body = {"plan_id": "p", "tool": {"name": "mystery", "capability": READER}}
    assert (await client.post("/v1/authorize-tool", json=body)).json()["allowed"] is True
    await client.put("/v1/projects/locked/settings", json={"deny_unregistered_tools": True})
    r = await client.post("/v1/authorize-tool", json=body)
    assert r.json()["deny"]["code"] == "tool_not_activated"
    # approval_mode and shadow_profile are stored only: decisions are part one's.
    await client.put("/v1/profiles/strict", json={"safety": {"require_sandbox": True}})
    await client.put("/v1/projects/locked/settings",
                     json={"approval_mode": "server", "shadow_profile": "strict"})
    r = await client.post("/v1/authorize-tool", json=body)
    assert r.json()["allowed"] is True and r.json().get("shadow") is None


async def _until(predicate, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.02)
    return await predicate()


async def test_settings_reach_another_replica(client, settings, database_url):
    """Postgres: NOTIFY on the registry channel, so the replica sees the change although its
    registry ttl is an hour. SQLite: within the ttl (0 here)."""
    postgres = database_url.startswith("postgresql")
    other = create_app(settings.model_copy(
        update={"registry_ttl_seconds": 3600.0 if postgres else 0.0}))
    async with other.router.lifespan_context(other):
        state = other.state
        if postgres:
            await asyncio.wait_for(state.notifier.listening.wait(), 10)
        cache = state.registry
        await cache.ensure_fresh(state.sessions)
        assert cache.project("p") == ProjectConfig() and cache.project(None) == ProjectConfig()
        await client.put("/v1/profiles/candidate", json={})
        await client.put("/v1/projects/p/settings", json={
            "deny_unregistered_tools": True, "approval_mode": "server",
            "shadow_profile": "candidate"})

        async def seen() -> bool:
            await cache.ensure_fresh(state.sessions)
            return cache.project("p").approval_mode == "server"

        assert await _until(seen, 10), "the other replica never saw the settings"
        assert cache.project("p") == ProjectConfig(True, "server", "candidate")
        assert cache.deny_unregistered("p") and not cache.deny_unregistered("q")
        assert cache.project("q") == ProjectConfig()
        await client.put("/v1/projects/p/registry-settings",
                         json={"deny_unregistered_tools": False})

        async def registry_seen() -> bool:
            await cache.ensure_fresh(state.sessions)
            return not cache.deny_unregistered("p")

        assert await _until(registry_seen, 10)
        assert cache.project("p") == ProjectConfig(False, "server", "candidate")


async def test_the_process_that_changes_them_sees_them_at_once(client):
    state = client.app.state
    cache = state.registry
    cache.ttl = 3600.0  # only the invalidation at commit can make the change visible
    await cache.ensure_fresh(state.sessions)
    await client.put("/v1/projects/p/settings", json={"approval_mode": "server"})
    await cache.ensure_fresh(state.sessions)
    assert cache.project("p").approval_mode == "server"


async def test_roles_readers_of_the_project_read_admins_write(client):
    for project in ("alpha", "beta"):
        await client.put(f"/v1/projects/{project}/settings", json={"approval_mode": "server"})
    for role in ("agent", "approver", "auditor"):
        scoped = await new_key(client, role, ["alpha"])
        r = await client.get("/v1/projects/alpha/settings", headers=scoped)
        assert r.status_code == 200 and r.json()["approval_mode"] == "server", role
        r = await client.get("/v1/projects/beta/settings", headers=scoped)
        hidden = await client.get("/v1/projects/ghost/settings", headers=scoped)
        assert r.status_code == hidden.status_code == 404, role
        assert r.text.replace("beta", "X") == hidden.text.replace("ghost", "X")
        listed = (await client.get("/v1/project-settings", headers=scoped)).json()["items"]
        assert [i["project"] for i in listed] == ["alpha"], role
        r = await client.put("/v1/projects/alpha/settings", headers=scoped, json={})
        assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden", role
        everywhere = await new_key(client, role)
        listed = (await client.get("/v1/project-settings", headers=everywhere)).json()["items"]
        assert [i["project"] for i in listed] == ["alpha", "beta"], role
    assert (await client.get("/v1/projects/alpha/settings")).json()["approval_mode"] == "server"
    admin = await new_key(client, "admin")
    assert (await client.put("/v1/projects/alpha/settings", headers=admin, json={})
            ).status_code == 200


async def test_a_shadow_profile_in_use_cannot_be_deleted(client):
    await client.put("/v1/profiles/candidate", json={})
    await client.put("/v1/projects/web/settings", json={"shadow_profile": "candidate"})
    r = await client.delete("/v1/profiles/candidate")
    assert r.status_code == 409 and r.json()["error"]["code"] == "profile_in_use"
    assert r.json()["error"]["details"]["shadow_projects"] == ["web"]
    assert "shadow_profile" in r.json()["error"]["message"]
    await client.put("/v1/projects/web/settings", json={})
    assert (await client.delete("/v1/profiles/candidate")).status_code == 204


async def test_the_list_holds_projects_whose_settings_were_set(client):
    await client.put("/v1/projects/b/settings", json={"approval_mode": "server"})
    await client.put("/v1/projects/a/registry-settings", json={"deny_unregistered_tools": True})
    items = (await client.get("/v1/project-settings")).json()["items"]
    assert [(i["project"], i["approval_mode"], i["deny_unregistered_tools"]) for i in items] == [
        ("a", "client_flag", True), ("b", "server", False)]

