"""The tool registry (SPEC §5): CRUD, strict validation, and a cache shared across replicas."""

from __future__ import annotations

import asyncio

import httpx

from app.config import Settings
from app.main import create_app
from app.registry.service import RegistryCache
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN

WRITER = {
    "capability": {"writes": True, "checkpointable": True, "unsafe": False},
    "safety_category": "destructive",
    "skill_category": "files",
    "path_args": ["output", "input", "output"],
}


async def test_tool_crud(client):
    r = await client.put("/v1/tools/fs.write", json=WRITER)
    assert r.status_code == 201
    body = r.json()
    assert body["name"] == "fs.write"
    assert body["capability"] == {"writes": True, "read_only": False,
                                  "checkpointable": True, "unsafe": False}
    assert body["safety_category"] == "destructive"
    assert body["skill_category"] == "files"
    assert body["path_args"] == ["output", "input"]

    r = await client.put("/v1/tools/fs.write", json={**WRITER, "safety_category": "safe"})
    assert r.status_code == 200 and r.json()["safety_category"] == "safe"
    assert (await client.put("/v1/tools/fs.write", json={**WRITER, "safety_category": "safe"})
            ).status_code == 200
    assert (await client.get("/v1/tools/fs.write")).json()["safety_category"] == "safe"

    await client.put("/v1/tools/fs.read", json={
        "capability": {"writes": False, "read_only": True, "checkpointable": True,
                       "unsafe": False}, "safety_category": "safe"})
    listed = (await client.get("/v1/tools")).json()["items"]
    assert [t["name"] for t in listed] == ["fs.read", "fs.write"]
    assert listed[0]["skill_category"] is None and listed[0]["path_args"] == []

    assert (await client.delete("/v1/tools/fs.write")).status_code == 204
    r = await client.get("/v1/tools/fs.write")
    assert r.status_code == 404 and r.json()["error"]["code"] == "not_found"
    assert "fs.write" in r.json()["error"]["message"]
    assert (await client.delete("/v1/tools/fs.write")).status_code == 404


def _fields(r: httpx.Response) -> set[str]:
    assert r.status_code == 422, r.text
    return {f["field"] for f in r.json()["error"]["details"]["fields"]}


async def test_tool_validation_names_fields_and_changes_nothing(client):
    cases = [
        ({"capability": {"writes": True, "checkpointable": True, "unsafe": False}},
         {"safety_category"}),
        ({**WRITER, "capability": {"writes": True, "unsafe": False}},
         {"capability.checkpointable"}),
        ({**WRITER, "capability": {"writes": "true", "checkpointable": True, "unsafe": False}},
         {"capability.writes"}),
        ({**WRITER, "capability": {"writes": True, "checkpointable": 1, "unsafe": False}},
         {"capability.checkpointable"}),
        ({**WRITER, "safety_category": "harmless"}, {"safety_category"}),
        ({**WRITER, "colour": "red"}, {"colour"}),
        ({**WRITER, "capability": {**WRITER["capability"], "extra": True}},
         {"capability.extra"}),
        ({**WRITER, "path_args": ["ok", ""]}, {"path_args.1"}),
        ({**WRITER, "skill_category": ""}, {"skill_category"}),
        ({**WRITER, "capability": {"writes": True, "read_only": True, "checkpointable": True,
                                   "unsafe": False}}, {"capability"}),
    ]
    for body, expected in cases:
        r = await client.put("/v1/tools/t1", json=body)
        assert _fields(r) == expected, (body, r.json())
    assert (await client.get("/v1/tools/t1")).status_code == 404
    assert (await client.put("/v1/tools/bad%20name", json=WRITER)).status_code == 422
    r = await client.put("/v1/tools/t1", content=b'{"capability": NaN}')
    assert r.status_code == 422 and r.json()["error"]["code"] == "invalid_json"


async def test_registry_settings(client):
    r = await client.get("/v1/projects/web/registry-settings")
    assert r.status_code == 200
    assert r.json() == {"project": "web", "deny_unregistered_tools": False, "updated_at": None}
    r = await client.put("/v1/projects/web/registry-settings",
                         json={"deny_unregistered_tools": True})
    assert r.status_code == 200 and r.json()["deny_unregistered_tools"] is True
    body = (await client.get("/v1/projects/web/registry-settings")).json()
    assert body["deny_unregistered_tools"] is True and body["updated_at"] is not None
    assert _fields(await client.put("/v1/projects/web/registry-settings",
                                     json={"deny_unregistered_tools": "yes"})) == {
        "deny_unregistered_tools"}
    assert _fields(await client.put("/v1/projects/web/registry-settings", json={})) == {
        "deny_unregistered_tools"}


async def test_change_through_this_process_is_seen_at_once(client):
    state = client.app.state
    cache: RegistryCache = state.registry
    cache.ttl = 3600.0  # only the invalidation can make the change visible
    await cache.ensure_fresh(state.sessions)
    assert cache.get("fs.write") is None
    await client.put("/v1/tools/fs.write", json=WRITER)
    await cache.ensure_fresh(state.sessions)
    tool = cache.get("fs.write")
    assert tool is not None and tool.destructive and tool.path_args == ("output", "input")
    assert tool.writes and tool.checkpointable and not tool.unsafe
    assert tool.skill_category == "files"

    assert not cache.deny_unregistered("web")
    await client.put("/v1/projects/web/registry-settings", json={"deny_unregistered_tools": True})
    await cache.ensure_fresh(state.sessions)
    assert cache.deny_unregistered("web")
    assert not cache.deny_unregistered("other")
    assert not cache.deny_unregistered(None)

    await client.delete("/v1/tools/fs.write")
    await cache.ensure_fresh(state.sessions)
    assert cache.get("fs.write") is None


async def test_a_second_replica_sees_changes_within_ttl(client, database_url):
    """Two app instances on one database: B's cache follows A's changes (ttl 0)."""
    other = create_app(Settings(database_url=database_url, registry_ttl_seconds=0))
    async with other.router.lifespan_context(other):
        state = other.state
        cache: RegistryCache = state.registry
        await cache.ensure_fresh(state.sessions)
        assert cache.get("fs.write") is None
        version = cache.version

        await client.put("/v1/tools/fs.write", json=WRITER)
        await cache.ensure_fresh(state.sessions)
        assert cache.get("fs.write") is not None and cache.get("fs.write").destructive
        assert cache.version == version + 1

        await client.put("/v1/tools/fs.write", json={**WRITER, "safety_category": "safe"})
        await cache.ensure_fresh(state.sessions)
        assert not cache.get("fs.write").destructive

        await client.put("/v1/projects/p/registry-settings", json={"deny_unregistered_tools": True})
        await cache.ensure_fresh(state.sessions)
        assert cache.deny_unregistered("p")

        await client.delete("/v1/tools/fs.write")
        await cache.ensure_fresh(state.sessions)
        assert cache.get("fs.write") is None


async def test_identical_put_does_not_bump_the_version(client):
    state = client.app.state
    cache: RegistryCache = state.registry
    await client.put("/v1/tools/t", json=WRITER)
    await cache.ensure_fresh(state.sessions)
    version = cache.version
    await client.put("/v1/tools/t", json=WRITER)
    cache.invalidate()
    await cache.ensure_fresh(state.sessions)
    assert cache.version == version


async def _cache_then_change_elsewhere(client, database_url):  # type: ignore[no-untyped-def]
    """A cache loaded at t=0 (a fake clock), then a tool registered by another app on the
    same database (another process or replica, as far as caches go)."""
    now = [0.0]
    cache = RegistryCache(ttl=1.0, clock=lambda: now[0])
    sessions = client.app.state.sessions
    await cache.ensure_fresh(sessions)
    other = create_app(Settings(database_url=database_url, admin_token=ADMIN_TOKEN))
    async with other.router.lifespan_context(other):
        transport = httpx.ASGITransport(app=other)
        async with httpx.AsyncClient(transport=transport, base_url="http://b",
                                     headers=ADMIN_HEADERS) as b:
            assert (await b.put("/v1/tools/t", json=WRITER)).status_code == 201
    return cache, sessions, now


async def test_staleness_is_bounded_by_ttl(client, database_url):
    """Within ttl the cache answers from memory; once ttl has passed it checks the version."""
    cache, sessions, now = await _cache_then_change_elsewhere(client, database_url)
    now[0] = 0.4
    await cache.ensure_fresh(sessions)
    assert cache.get("t") is None  # stale, as documented, within the ttl
    now[0] = 1.0
    await cache.ensure_fresh(sessions)
    assert cache.get("t") is not None


async def test_past_half_its_ttl_the_registry_is_renewed_without_waiting(client, database_url):
    """Past half the ttl a decision still answers from memory at once, and the version is
    re-read meanwhile, so a change elsewhere shows before the ttl runs out."""
    cache, sessions, now = await _cache_then_change_elsewhere(client, database_url)
    now[0] = 0.49
    await cache.ensure_fresh(sessions)
    assert cache._renewal is None and cache.get("t") is None
    now[0] = 0.5
    await cache.ensure_fresh(sessions)  # returns at once: no read on the request's path
    assert cache.get("t") is None
    assert cache._renewal is not None
    await cache._renewal
    assert cache.get("t") is not None  # seen at 0.5 s, not at 1.0 s


async def test_racing_creates_of_one_tool_do_not_fail(client):
    """Registry writers are serialised by the registry lock: one create, the rest updates."""
    bodies = [{**WRITER, "skill_category": f"c{i}"} for i in range(5)]
    answers = await asyncio.gather(*(client.put("/v1/tools/race", json=b) for b in bodies))
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 200, 201]
    answers = await asyncio.gather(*(client.put(f"/v1/skills/race{i % 2}",
                                                json={"unsafe_phrases": [f"p {i}"]})
                                     for i in range(4)))
    assert sorted(r.status_code for r in answers) == [200, 200, 201, 201]
