"""API keys, roles, project isolation, revocation across processes, bootstrap, rate limit."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
import pytest
from sqlalchemy import select, text, update

from app.auth.bootstrap import bootstrap_admin_key, key_file_path
from app.auth.keys import KeyCache, Principal, hash_secret
from app.auth.ratelimit import RateLimiter
from app.auth.roles import Role, matrix_markdown
from app.auth.tables import ApiKey
from app.config import Settings
from app.edge.errors import RateLimited, Unauthorized
from app.log.tables import LogRecord
from app.main import create_app
from tests.conftest import ADMIN_HEADERS, ADMIN_TOKEN, PG_DSN
from tests.serving import serve, stop

DOCS = Path(__file__).resolve().parents[2] / "docs"
READER = {"writes": False, "checkpointable": True, "unsafe": False}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def new_key(client: httpx.AsyncClient, role: str, projects: list[str] | None = None,
                  **extra: object) -> dict:
    r = await client.post("/v1/keys", json={"name": f"{role} key", "role": role,
                                            "projects": projects, **extra})
    assert r.status_code == 201, r.text
    return r.json()


@asynccontextmanager
async def second_app(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """Another process on the same database, as far as caches go."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://replica", headers=ADMIN_HEADERS) as c:
            c.app = app  # type: ignore[attr-defined]
            yield c


# --- keys ---------------------------------------------------------------------------------

async def test_key_lifecycle(client):
    created = await new_key(client, "agent", ["web", "api", "web"])
    secret = created["key"]
    assert secret.startswith("tg_") and len(secret) == 3 + 43
    assert created["id"].startswith("key_") and created["prefix"] == secret[:10]
    assert created["projects"] == ["api", "web"] and created["role"] == "agent"
    assert created["created_by"] == "admin-token" and created["revoked_at"] is None
    assert "key_hash" not in created

    listed = (await client.get("/v1/keys")).json()["items"]
    assert [k["id"] for k in listed] == [created["id"]]
    assert "key" not in listed[0] and "key_hash" not in listed[0]
    assert secret not in orjson.dumps(listed).decode()

    assert (await client.get("/v1/errors", headers=bearer(secret))).status_code == 200
    assert (await client.delete(f"/v1/keys/{created['id']}")).status_code == 204
    r = await client.get("/v1/errors", headers=bearer(secret))
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"
    assert (await client.delete(f"/v1/keys/{created['id']}")).status_code == 204
    assert (await client.delete("/v1/keys/key_nope")).status_code == 404
    revoked = (await client.get("/v1/keys")).json()["items"][0]
    assert revoked["revoked_at"] is not None and revoked["revoked_by"] == "admin-token"


async def test_a_key_revoked_after_use_is_refused_on_the_hot_route(both_paths):
    """The hot route remembers which hash a header's key has; that must not outlive the
    key: revocation is the key cache's word, asked on every request."""
    client = both_paths
    secret = (await new_key(client, "agent", ["web"]))["key"]
    body = {"plan_id": "no-such-plan", "tool": {"name": "fs.read"}}
    for _ in range(2):  # the second request takes the remembered hash
        r = await client.post("/v1/authorize-tool", json=body, headers=bearer(secret))
        assert r.status_code == 404, r.text
    key_id = (await client.get("/v1/keys")).json()["items"][0]["id"]
    assert (await client.delete(f"/v1/keys/{key_id}")).status_code == 204
    r = await client.post("/v1/authorize-tool", json=body, headers=bearer(secret))
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    r = await client.post("/v1/authorize-tool", json=body,
                          headers={"Authorization": "Basic " + secret})
    assert r.status_code == 401


def test_the_hot_routes_hash_memory_is_bounded():
    from app.authorize import pipeline as fastpath

    headers = [f"Bearer tg_{n:040d}".encode() for n in range(fastpath._HASHES_MAX * 3)]
    for header in headers:
        key_hash = fastpath._key_hash(header)
        assert key_hash == hash_secret(header.decode()[7:])
        fastpath._remember_hash(header, key_hash)
        assert len(fastpath._HASHES) <= fastpath._HASHES_MAX
    with pytest.raises(Unauthorized):
        fastpath._key_hash(b"Bearer   ")


async def test_only_a_hash_of_the_secret_is_stored(client):
    created = await new_key(client, "auditor")
    state = client.app.state
    async with state.sessions() as session:
        row = (await session.execute(select(ApiKey))).scalar_one()
        log = (await session.execute(select(LogRecord.detail))).scalars().all()
    assert row.key_hash == hashlib.sha256(created["key"].encode()).hexdigest()
    stored = repr([getattr(row, c.key) for c in ApiKey.__table__.columns]) + repr(log)
    assert created["key"] not in stored
    assert row.key_hash not in repr(log)


@pytest.mark.parametrize("body, field", [
    ({"name": "a", "role": "admin", "projects": ["web"]}, ""),
    ({"name": "a", "role": "agent"}, "projects"),
    ({"name": "a", "role": "root", "projects": None}, "role"),
    ({"name": "", "role": "agent", "projects": None}, "name"),
    ({"name": "a", "role": "agent", "projects": []}, "projects"),
    ({"name": "a", "role": "agent", "projects": ["bad name"]}, "projects.0"),
    ({"name": "a", "role": "agent", "projects": None, "expires_at": "2001-01-01T00:00:00Z"},
     "expires_at"),
    ({"name": "a", "role": "agent", "projects": None, "expires_at": 4102444800}, "expires_at"),
    # RFC 3339 text only: not seconds since the epoch, nor a date alone
    ({"name": "a", "role": "agent", "projects": None, "expires_at": "4102444800"}, "expires_at"),
    ({"name": "a", "role": "agent", "projects": None, "expires_at": "2100-01-01"}, "expires_at"),
    ({"name": "a", "role": "agent", "projects": None, "expires_at": "soon"}, "expires_at"),
    ({"name": "a", "role": "agent", "projects": None, "extra": 1}, "extra"),
])
async def test_bad_key_requests_are_422_and_create_nothing(client, body, field):
    r = await client.post("/v1/keys", json=body)
    assert r.status_code == 422, r.text
    assert field in [f["field"] for f in r.json()["error"]["details"]["fields"]]
    assert (await client.get("/v1/keys")).json()["items"] == []


async def test_expired_key_is_refused(client):
    soon = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    created = await new_key(client, "agent", None, expires_at=soon)
    assert created["expires_at"] is not None
    assert (await client.get("/v1/errors", headers=bearer(created["key"]))).status_code == 200
    state = client.app.state
    async with state.sessions() as session, session.begin():
        await session.execute(update(ApiKey).where(ApiKey.id == created["id"])
                              .values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    state.auth.key_cache.clear()
    r = await client.get("/v1/errors", headers=bearer(created["key"]))
    assert r.status_code == 401


def test_expiry_is_checked_on_cached_keys():
    past = datetime.now(UTC) - timedelta(seconds=1)
    principal = Principal("key_x", Role.AGENT, None, expires_at=past)
    assert principal.expired(datetime.now(UTC))
    assert not Principal("key_y", Role.AGENT, None).expired(datetime.now(UTC))


# --- roles ----------------------------------------------------------------------------------

async def test_each_role_can_do_its_own_work(client):
    await client.put("/v1/actions/act", json={"project": "web"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p"})
    agent, approver, auditor, admin = [
        bearer((await new_key(client, role))["key"])
        for role in ("agent", "approver", "auditor", "admin")]

    r = await client.post("/v1/plans", headers=agent, json={"action_id": "act", "plan_id": "q"})
    assert r.status_code == 201
    r = await client.post("/v1/authorize-tool", headers=agent,
                          json={"plan_id": "q", "tool": {"name": "t", "capability": READER}})
    assert r.status_code == 200 and r.json()["allowed"] is True
    assert (await client.post("/v1/resolve", headers=agent, json={"action_id": "act"})
            ).status_code == 200
    assert (await client.post("/v1/screen", headers=agent, json={"text": "hi"})).status_code == 200
    assert (await client.get("/v1/profiles", headers=agent)).status_code == 200
    assert (await client.put("/v1/profiles/x", headers=agent, json={})).status_code == 403

    assert (await client.get("/v1/plans/p", headers=approver)).status_code == 200
    assert (await client.get("/v1/plans", headers=approver)).status_code == 200
    assert (await client.post("/v1/plans", headers=approver,
                              json={"action_id": "act"})).status_code == 403

    assert (await client.get("/v1/decisions", headers=auditor)).status_code == 200
    assert (await client.get("/v1/decisions/stats", headers=auditor)).status_code == 200
    assert (await client.get("/v1/audit/verify", headers=auditor)).json()["ok"] is True
    assert (await client.get("/v1/audit/export", headers=auditor)).status_code == 200
    r = await client.post("/v1/authorize-tool", headers=auditor,
                          json={"plan_id": "p", "tool": {"name": "t", "capability": READER}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"

    assert (await client.post("/v1/keys", headers=admin, json={
        "name": "n", "role": "auditor", "projects": None})).status_code == 201


def test_the_docs_table_is_the_data():
    text_ = (DOCS / "auth.md").read_text()
    table = text_.split("<!-- role-matrix:start -->")[1].split("<!-- role-matrix:end -->")[0]
    assert table.strip() == matrix_markdown().strip(), (
        "docs/auth.md is stale: paste app.auth.roles.matrix_markdown()")


# --- isolation ------------------------------------------------------------------------------

async def _two_projects(client: httpx.AsyncClient) -> dict[str, str]:
    """Actions, plans and decisions in projects alpha and beta; returns decision ids."""
    ids = {}
    for project in ("alpha", "beta"):
        await client.put(f"/v1/projects/{project}", json={"automation_profile": None})
        await client.put(f"/v1/actions/{project}-act", json={"project": project})
        r = await client.post("/v1/plans", json={"action_id": f"{project}-act",
                                                 "plan_id": f"{project}-plan"})
        assert r.status_code == 201
        r = await client.post("/v1/authorize-tool", json={
            "plan_id": f"{project}-plan", "tool": {"name": "t", "capability": READER}})
        ids[project] = r.json()["decision_id"]
    return ids


def _same_error(hidden: httpx.Response, missing: httpx.Response, real: str, ghost: str) -> None:
    """The answer about another project's resource is the answer about a missing one."""
    assert hidden.status_code == missing.status_code == 404
    assert hidden.text.replace(real, "X") == missing.text.replace(ghost, "X")


async def test_an_agent_sees_only_its_projects(client):
    await _two_projects(client)
    agent = bearer((await new_key(client, "agent", ["alpha"]))["key"])
    tool = {"name": "t", "capability": READER}

    _same_error(await client.get("/v1/plans/beta-plan", headers=agent),
                await client.get("/v1/plans/ghost-plan", headers=agent), "beta-plan", "ghost-plan")
    assert (await client.get("/v1/plans/alpha-plan", headers=agent)).status_code == 200
    listed = (await client.get("/v1/plans", headers=agent)).json()["items"]
    assert [p["plan_id"] for p in listed] == ["alpha-plan"]
    listed = (await client.get("/v1/plans?project=beta", headers=agent)).json()["items"]
    assert listed == []

    _same_error(await client.get("/v1/actions/beta-act", headers=agent),
                await client.get("/v1/actions/ghost-act", headers=agent), "beta-act", "ghost-act")
    _same_error(await client.post("/v1/plans", headers=agent, json={"action_id": "beta-act"}),
                await client.post("/v1/plans", headers=agent, json={"action_id": "ghost-act"}),
                "beta-act", "ghost-act")
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "alpha-act", "plan_id": "beta-plan"})
    assert r.status_code == 409 and "beta" not in r.text.replace("beta-plan", "")
    assert (await client.get("/v1/projects/beta", headers=agent)).status_code == 404
    assert (await client.get("/v1/projects/alpha", headers=agent)).status_code == 200
    assert (await client.get("/v1/projects/beta/registry-settings", headers=agent)
            ).status_code == 404

    _same_error(
        await client.post("/v1/authorize-tool", headers=agent,
                          json={"plan_id": "beta-plan", "tool": tool}),
        await client.post("/v1/authorize-tool", headers=agent,
                          json={"plan_id": "ghost-plan", "tool": tool}), "beta-plan", "ghost-plan")
    r = await client.post("/v1/authorize-tools", headers=agent, json=[
        {"plan_id": "alpha-plan", "tool": tool}, {"plan_id": "beta-plan", "tool": tool}])
    assert r.status_code == 404 and r.json()["error"]["details"]["index"] == 1
    r = await client.post("/v1/authorize-tool", headers=agent, json={"tool": tool})
    assert r.status_code == 403, "a scoped key cannot be stateless (SPEC §9)"
    assert r.json()["error"]["code"] == "stateless_forbidden"
    r = await client.post("/v1/authorize-tool", headers=agent,
                          json={"plan_id": "alpha-plan", "tool": tool})
    assert r.status_code == 200

    for body in ({"plan_id": "beta-plan"}, {"action_id": "beta-act"}, {"project": "beta"}):
        r = await client.post("/v1/resolve", headers=agent, json=body)
        assert r.status_code == 404, body
    assert (await client.post("/v1/resolve", headers=agent, json={"project": "alpha"})
            ).status_code == 200

    r = await client.post("/v1/plans/beta-plan/execute", headers=agent)
    assert r.status_code == 404
    assert (await client.get("/v1/plans/beta-plan")).json()["state"] == "created"


async def test_an_auditor_reads_only_its_projects(client):
    ids = await _two_projects(client)
    auditor = bearer((await new_key(client, "auditor", ["alpha"]))["key"])

    items = (await client.get("/v1/decisions", headers=auditor)).json()["items"]
    assert items and {i["project"] for i in items} == {"alpha"}
    assert (await client.get("/v1/decisions?project=beta", headers=auditor)
            ).json()["items"] == []
    assert (await client.get("/v1/decisions?kind=config", headers=auditor)
            ).json()["items"] != []  # alpha's project and action changes
    _same_error(await client.get(f"/v1/decisions/{ids['beta']}", headers=auditor),
                await client.get("/v1/decisions/ghost", headers=auditor), ids["beta"], "ghost")
    assert (await client.get(f"/v1/decisions/{ids['alpha']}", headers=auditor)
            ).status_code == 200

    stats = (await client.get("/v1/decisions/stats?group_by=project", headers=auditor)).json()
    everything = (await client.get("/v1/decisions/stats?group_by=project")).json()
    assert [g["key"] for g in stats["groups"]] == ["alpha"]
    assert stats["total"]["count"] < everything["total"]["count"]

    exported = (await client.get("/v1/audit/export", headers=auditor)).text.splitlines()
    assert exported and {orjson.loads(line)["project"] for line in exported} == {"alpha"}
    r = await client.get("/v1/audit/verify", headers=auditor)
    assert r.status_code == 403 and r.json()["error"]["code"] == "forbidden"
    unscoped = bearer((await new_key(client, "auditor"))["key"])
    assert (await client.get("/v1/audit/verify", headers=unscoped)).json()["ok"] is True


async def test_plans_with_inline_profiles_are_reserved_to_admins_by_default(client, settings):
    """TOOLGATE_ALLOW_INLINE_PROFILES (default false) governs only plans created with an
    inline profile by a non-admin key; requests without plan_id are the key's property."""
    await client.put("/v1/actions/act", json={"project": "web"})
    agent = bearer((await new_key(client, "agent"))["key"])
    r = await client.post("/v1/plans", headers=agent,
                          json={"action_id": "act", "safety_profile": {}})
    assert r.status_code == 403 and r.json()["error"]["code"] == "inline_profile_forbidden"
    assert (await client.post("/v1/plans", headers=agent, json={"action_id": "act"})
            ).status_code == 201
    assert (await client.post("/v1/plans", json={"action_id": "act", "safety_profile": {}})
            ).status_code == 201  # an admin may
    stateless = bearer((await new_key(client, "agent", stateless=True))["key"])
    r = await client.post("/v1/plans", headers=stateless,
                          json={"action_id": "act", "safety_profile": {}})
    assert r.status_code == 403, "a stateless key is not allowed inline plans for that"
    lenient = settings.model_copy(update={"allow_inline_profiles": True})
    async with second_app(lenient) as replica:
        r = await replica.post("/v1/plans", headers=agent,
                               json={"action_id": "act", "safety_profile": {}})
        assert r.status_code == 201
        # The setting says nothing about requests without plan_id.
        r = await replica.post("/v1/authorize-tool", headers=agent,
                               json={"tool": {"name": "t", "capability": READER},
                                     "safety_profile": {}})
        assert r.status_code == 403 and r.json()["error"]["code"] == "stateless_forbidden"


# --- who did it -----------------------------------------------------------------------------

async def test_the_key_id_is_recorded_on_decisions_and_changes(client):
    await client.put("/v1/actions/act", json={"project": "web"})
    agent = await new_key(client, "agent")
    admin = await new_key(client, "admin")
    plan = (await client.post("/v1/plans", headers=bearer(agent["key"]),
                              json={"action_id": "act"})).json()
    decided = (await client.post("/v1/authorize-tool", headers=bearer(agent["key"]), json={
        "plan_id": plan["plan_id"], "tool": {"name": "t", "capability": READER}})).json()
    assert (await client.put("/v1/profiles/p", headers=bearer(admin["key"]),
                             json={})).status_code == 201
    await client.put("/v1/config", json={"automation_profile": "p"})

    record = (await client.get(f"/v1/decisions/{decided['decision_id']}")).json()
    assert record["key_id"] == agent["id"]
    items = (await client.get("/v1/decisions?kind=plan")).json()["items"]
    assert [i["key_id"] for i in items] == [agent["id"]]
    changes = (await client.get("/v1/decisions?kind=config")).json()["items"]
    by_resource = {(c["detail"]["resource"], c["detail"]["operation"]): c["key_id"]
                   for c in changes}
    assert by_resource[("profile", "create")] == admin["id"]
    assert by_resource[("config", "update")] == "admin-token"
    assert by_resource[("key", "create")] == "admin-token"


# --- revocation across processes ----------------------------------------------------------

async def _until(predicate, seconds: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.02)
    return await predicate()


async def test_revocation_reaches_another_instance(client, settings, database_url):
    """Postgres: LISTEN/NOTIFY, so B refuses the key although its cache TTL is an hour.
    SQLite: B refuses it once its (small) TTL has passed."""
    postgres = database_url.startswith("postgresql")
    ttl = 3600.0 if postgres else 0.2
    agent = await new_key(client, "agent")
    async with second_app(settings.model_copy(update={"key_cache_ttl_seconds": ttl})) as b:
        notifier = b.app.state.notifier
        if postgres:
            await asyncio.wait_for(notifier.listening.wait(), 10)
        assert (await b.get("/v1/errors", headers=bearer(agent["key"]))).status_code == 200
        assert len(b.app.state.auth.key_cache) == 1
        assert (await client.delete(f"/v1/keys/{agent['id']}")).status_code == 204
        # The revoking process refuses it at once.
        assert (await client.get("/v1/errors", headers=bearer(agent["key"]))).status_code == 401

        async def refused() -> bool:
            r = await b.get("/v1/errors", headers=bearer(agent["key"]))
            return r.status_code == 401

        assert await _until(refused, 10), "the other instance still accepts a revoked key"


async def test_the_listener_reconnects_and_still_invalidates(client, settings, database_url):
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    import asyncpg

    replica_settings = settings.model_copy(update={"key_cache_ttl_seconds": 3600.0})
    async with second_app(replica_settings) as b:
        notifier = b.app.state.notifier
        notifier.retry_seconds = 0.05
        await asyncio.wait_for(notifier.listening.wait(), 10)
        admin = await asyncpg.connect(PG_DSN)
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", notifier.server_pid)
        finally:
            await admin.close()

        async def relistening() -> bool:
            return notifier.listening.is_set() and notifier.connections > 1

        assert await _until(relistening, 10)
        agent = await new_key(client, "agent")
        assert (await b.get("/v1/errors", headers=bearer(agent["key"]))).status_code == 200
        await client.delete(f"/v1/keys/{agent['id']}")

        async def refused() -> bool:
            return (await b.get("/v1/errors", headers=bearer(agent["key"]))).status_code == 401

        assert await _until(refused, 10)


def test_a_lookup_racing_a_revocation_is_not_cached():
    now = [0.0]
    cache = KeyCache(ttl=10, clock=lambda: now[0])
    principal = Principal("key_a", Role.AGENT, None)
    generation = cache.generation  # a lookup starts reading the database...
    cache.clear()                   # ...a revocation lands meanwhile...
    cache.put("h", principal, generation=generation)
    assert cache.get("h") is None   # ...and the old answer is not kept
    cache.put("h", principal, generation=cache.generation)
    assert cache.get("h") == principal
    now[0] = 10.0
    assert cache.get("h") is None   # trusted for ttl seconds only



async def test_a_cached_key_is_renewed_in_the_background_before_it_expires(client):
    """Past half its ttl a cached key is still used at once and re-read meanwhile: a valid
    key never makes a request wait for the database, and a key revoked behind this cache's
    back (another process, no NOTIFY) is refused before the ttl runs out."""
    from app.auth.keys import Authenticator

    state = client.app.state
    reads = [0]

    def sessions():  # counts database reads
        reads[0] += 1
        return state.sessions()

    now = [0.0]
    auth = Authenticator(sessions=sessions, admin_token=None,
                         cache=KeyCache(ttl=10, clock=lambda: now[0]))
    secret = (await new_key(client, "agent"))["key"]
    principal = await auth.authenticate(secret)
    assert reads[0] == 1
    now[0] = 4.9
    assert await auth.authenticate(secret) == principal and reads[0] == 1
    now[0] = 5.0   # half the ttl: answered from memory, renewed meanwhile
    assert await auth.authenticate(secret) == principal
    await asyncio.gather(*auth._renewals)
    assert reads[0] == 2
    now[0] = 12.0  # past the first read's ttl: the renewal's answer, at once
    assert await auth.authenticate(secret) == principal and reads[0] == 2
    await asyncio.gather(*auth._renewals)  # (renewed again: 7 s old)
    assert reads[0] == 3

    async with state.sessions() as session:
        await session.execute(update(ApiKey).where(ApiKey.key_hash == hash_secret(secret))
                              .values(revoked_at=datetime.now(UTC)))
        await session.commit()
    now[0] = 17.0  # the next renewal finds the revocation...
    assert await auth.authenticate(secret) == principal
    await asyncio.gather(*auth._renewals)
    with pytest.raises(Unauthorized):  # ...so the key is refused 5 s before its ttl ran out
        await auth.authenticate(secret)


async def test_concurrent_lookups_of_one_key_share_one_read(client):
    """Requests resuming together after a pause longer than the ttl (an agent fleet waking
    up) find the key expired from the cache: they must make one database read between
    them, not one each. A revocation during that read is not joined: later requests read
    again and are refused."""
    from app.auth.keys import Authenticator

    state = client.app.state
    reads = [0]

    def sessions():  # counts database reads
        reads[0] += 1
        return state.sessions()

    auth = Authenticator(sessions=sessions, admin_token=None, cache=KeyCache(ttl=10))
    created = await new_key(client, "agent")
    key_hash = hash_secret(created["key"])
    principals = await asyncio.gather(*(auth.look_up(key_hash) for _ in range(64)))
    assert reads[0] == 1 and {p.key_id for p in principals} == {created["id"]}

    auth.cache.clear()
    first = asyncio.ensure_future(auth.look_up(key_hash))  # a read starts...
    await asyncio.sleep(0)
    async with state.sessions() as session:  # ...the key is revoked meanwhile...
        await session.execute(update(ApiKey).where(ApiKey.key_hash == key_hash)
                              .values(revoked_at=datetime.now(UTC)))
        await session.commit()
    auth.cache.clear()  # (what the revocation's commit does)
    with pytest.raises(Unauthorized):  # ...so a look-up after it reads again
        await auth.look_up(key_hash)
    assert reads[0] == 3
    await asyncio.gather(first, return_exceptions=True)


async def test_a_caller_going_away_does_not_cancel_the_shared_read(client):
    from app.auth.keys import Authenticator

    state = client.app.state
    auth = Authenticator(sessions=state.sessions, admin_token=None, cache=KeyCache(ttl=10))
    created = await new_key(client, "agent")
    key_hash = hash_secret(created["key"])
    leaving = asyncio.ensure_future(auth.look_up(key_hash))
    staying = asyncio.ensure_future(auth.look_up(key_hash))
    await asyncio.sleep(0)
    leaving.cancel()
    assert (await staying).key_id == created["id"]
    assert leaving.cancelled()


# --- rate limit -----------------------------------------------------------------------------

async def test_rate_limit_answers_429_with_retry_after(client, settings):
    agent = bearer((await new_key(client, "agent"))["key"])
    other = bearer((await new_key(client, "agent"))["key"])
    limited = settings.model_copy(update={"rate_limit_per_second": 0.01, "rate_limit_burst": 2})
    async with second_app(limited) as replica:
        for _ in range(2):  # a route that takes the principal too: still one token each
            assert (await replica.get("/v1/plans", headers=agent)).status_code == 200
        r = await replica.get("/v1/plans", headers=agent)
        assert r.status_code == 429 and r.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(r.headers["retry-after"]) <= 100
        assert (await replica.get("/v1/errors", headers=other)).status_code == 200
    # Off by default.
    for _ in range(5):
        assert (await client.get("/v1/errors", headers=agent)).status_code == 200


def test_token_bucket_refills_at_the_rate():
    now = [0.0]
    limiter = RateLimiter(rate=2.0, burst=2, clock=lambda: now[0])
    limiter.take("k")
    limiter.take("k")
    with pytest.raises(RateLimited) as refused:
        limiter.take("k")
    assert refused.value.headers == {"Retry-After": "1"}
    now[0] = 0.5
    limiter.take("k")
    with pytest.raises(RateLimited):
        limiter.take("k")
    limiter.take("other")


# --- bootstrap ------------------------------------------------------------------------------

def test_bootstrap_only_on_sqlite_without_an_admin_token(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"
    assert key_file_path(url) == tmp_path / "x.admin-key"
    assert key_file_path("sqlite+aiosqlite:///:memory:") is None
    assert key_file_path("postgresql+asyncpg://u@h/db") is None
    assert bootstrap_admin_key(Settings(database_url=url, admin_token="t")) is None
    assert bootstrap_admin_key(Settings(database_url="postgresql+asyncpg://u@h/db")) is None
    assert not (tmp_path / "x.admin-key").exists()


def _serve(tmp_path: Path, log: Path) -> tuple[subprocess.Popen, str]:
    return serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'toolgate.db'}"},
                 log)


def _cli(*args: str, token: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env["TOOLGATE_TOKEN"] = token
    return subprocess.run([sys.executable, "-m", "app.cli.main", "keys", *args], env=env,
                          capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[2])


def _keys_cli(url: str, admin: str) -> None:
    """`toolgate keys create|list|revoke` over HTTP (--url, token from TOOLGATE_TOKEN)."""
    made = _cli("create", "--name", "bot", "--role", "agent", "--project", "web",
                "--project", "api", "--url", url, token=admin)
    assert made.returncode == 0, made.stderr
    agent = made.stdout.strip()  # the secret alone on stdout
    assert agent.startswith("tg_") and "shown only now" in made.stderr
    assert httpx.get(f"{url}/v1/plans", headers=bearer(agent), timeout=10).status_code == 200

    listed = _cli("list", "--url", url, "--json", token=admin)
    keys = {k["name"]: k for k in orjson.loads(listed.stdout)["items"]}
    assert keys["bot"]["projects"] == ["api", "web"] and keys["bot"]["role"] == "agent"
    table = _cli("list", "--url", url, token=admin).stdout
    assert "bot" in table and "api,web" in table and agent not in table

    refused = _cli("revoke", keys["bootstrap"]["id"], "--url", url, token=agent)
    assert refused.returncode == 2 and "403" in refused.stderr
    revoked = _cli("revoke", keys["bot"]["id"], "--url", url, token=admin)
    assert revoked.returncode == 0, revoked.stderr
    assert httpx.get(f"{url}/v1/plans", headers=bearer(agent), timeout=10).status_code == 401
    assert "revoked" in _cli("list", "--url", url, token=admin).stdout


@pytest.mark.slow  # two real `toolgate serve` processes, one after the other
def test_first_serve_creates_an_admin_key_file_readable_only_by_its_owner(tmp_path):
    key_file = tmp_path / "toolgate.admin-key"
    proc, url = _serve(tmp_path, tmp_path / "first.log")
    try:
        secret = key_file.read_text().strip()
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        log = (tmp_path / "first.log").read_text()
        # Its standard output is a file, not a terminal: the log names the file, never the key.
        assert secret.startswith("tg_") and secret not in log and str(key_file) in log
        r = httpx.get(f"{url}/v1/keys", headers=bearer(secret), timeout=10)
        assert r.status_code == 200
        assert [(k["name"], k["role"]) for k in r.json()["items"]] == [("bootstrap", "admin")]
        assert httpx.get(f"{url}/v1/keys", timeout=10).status_code == 401
        _keys_cli(url, secret)
    finally:
        stop(proc)
    proc, url = _serve(tmp_path, tmp_path / "second.log")
    try:
        assert key_file.read_text().strip() == secret
        assert "admin key" not in (tmp_path / "second.log").read_text()
        items = httpx.get(f"{url}/v1/keys", headers=bearer(secret), timeout=10).json()["items"]
        assert [k["name"] for k in items] == ["bootstrap", "bot"]  # no second bootstrap key
    finally:
        stop(proc)


def test_the_first_key_is_printed_only_on_a_terminal(tmp_path, sqlite_template, capsys,
                                                    monkeypatch):
    from app.cli.main import _bootstrap_admin_key

    for name, terminal in (("log", False), ("tty", True)):
        shutil.copyfile(sqlite_template, tmp_path / f"{name}.db")
        monkeypatch.setattr(sys.stdout, "isatty", lambda terminal=terminal: terminal)
        _bootstrap_admin_key(Settings(database_url=f"sqlite+aiosqlite:///{tmp_path}/{name}.db"))
        out = capsys.readouterr().out
        secret = (tmp_path / f"{name}.admin-key").read_text().strip()
        assert str(tmp_path / f"{name}.admin-key") in out
        assert (secret in out) is terminal, out


async def test_the_admin_token_is_an_admin(client):
    r = await client.get("/v1/keys", headers=bearer(ADMIN_TOKEN))
    assert r.status_code == 200
    r = await client.get("/v1/keys", headers=bearer(ADMIN_TOKEN + "x"))
    assert r.status_code == 401


async def test_direct_sql_sees_no_secret_column(client):
    """Nothing in the schema could hold a secret: only the hash and a short prefix."""
    state = client.app.state
    async with state.engine.connect() as conn:
        row = (await conn.execute(text("SELECT * FROM api_keys"))).keys()
    assert set(row) == {"id", "name", "role", "projects", "key_hash", "prefix", "created_at",
                        "created_by", "expires_at", "revoked_at", "revoked_by", "stateless",
                        "principal"}
