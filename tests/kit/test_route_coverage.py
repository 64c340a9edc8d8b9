"""Every route the app exposes needs a key, and the role its row in app/auth/roles.py gives.

Driven by the app itself (its routes), not by a list kept here, so a new route cannot slip
in unprotected: without a key, with a revoked or an expired key it answers 401; with a key
of a role the table does not allow, 403; with the right role but another project's scope,
404 for a request about one project's resource. None of those requests changes anything.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from sqlalchemy import select, update

from app.auth.roles import PERMISSIONS, PUBLIC, ROUTES, Role, rule_for
from app.auth.tables import ApiKey
from app.main import create_app
from app.tables import metadata
from tests.conftest import ADMIN_TOKEN

WRITER = {"capability": {"writes": True, "checkpointable": True, "unsafe": False},
          "safety_category": "safe"}
AUTHORIZE = {"plan_id": "plan-1", "tool": {"name": "probe", "capability": {
    "writes": False, "checkpointable": True, "unsafe": False}}}

# A body that would change something if the request were let through; routes not listed
# get {} (a new route is still checked for 401/403: those come before the body).
BODIES: dict[tuple[str, str], object] = {
    ("PUT", "/v1/profiles/{name}"): {"safety": {"require_sandbox": False}},
    ("PUT", "/v1/config"): {"automation_profile": "probe"},
    ("PUT", "/v1/projects/{project}"): {"automation_profile": "probe"},
    ("PUT", "/v1/actions/{action_id}"): {"project": "proj", "read_only": True},
    ("POST", "/v1/plans"): {"action_id": "act-1", "plan_id": "plan-2"},
    ("POST", "/v1/resolve"): {"action_id": "act-1"},
    ("POST", "/v1/authorize-tool"): AUTHORIZE,
    ("POST", "/v1/authorize-tools"): {"requests": [AUTHORIZE]},
    ("POST", "/v1/test"): [{"request": AUTHORIZE, "expect": {"allowed": True}}],
    ("POST", "/v1/screen"): {"text": "hello"},
    ("POST", "/v1/skills/{name}/safety-test"): ["rm -rf /"],
    ("PUT", "/v1/tools/{name}"): {**WRITER, "safety_category": "destructive"},
    ("PUT", "/v1/skills/{name}"): {"unsafe_phrases": ["drop the table"]},
    ("PUT", "/v1/projects/{project}/registry-settings"): {"deny_unregistered_tools": True},
    ("PUT", "/v1/projects/{project}/settings"): {"deny_unregistered_tools": True,
                                                  "approval_mode": "server",
                                                  "shadow_profile": "probe"},
    ("POST", "/v1/keys"): {"name": "sneaky", "role": "admin", "projects": None},
    ("POST", "/v1/replay"): {"since": "2020-01-01T00:00:00Z"},  # writes its audit record
}

# Requests about one project's resource: a key of the right role scoped elsewhere gets 404.
ONE_PROJECT = {
    ("GET", "/v1/projects/{project}"), ("GET", "/v1/projects/{project}/registry-settings"),
    ("GET", "/v1/projects/{project}/settings"), ("PUT", "/v1/projects/{project}/settings"),
    ("GET", "/v1/actions/{action_id}"), ("GET", "/v1/plans/{plan_id}"),
    ("POST", "/v1/plans/{plan_id}/execute"), ("POST", "/v1/plans/{plan_id}/lifecycle-apply"),
    ("GET", "/v1/decisions/{decision_id}"), ("POST", "/v1/plans"), ("POST", "/v1/resolve"),
    ("POST", "/v1/authorize-tool"), ("POST", "/v1/authorize-tools"),
}

# Routes whose refusals are a 200 answer with a deny naming the refusal's code: Claude Code
# runs a call whose hook answers an error (app/hooks/routes.py, SPEC §15).
REFUSED_AS_DENY = {("POST", "/v1/hooks/claude-code"): {
    401: "(unauthorized)", 403: "(forbidden)", 404: "(not_found)"}}


def app_routes() -> list[tuple[str, str]]:
    app = create_app()
    found = set()
    for route in iter_route_contexts(app.routes):
        for method in route.methods or ():
            if method != "HEAD":
                found.add((method, route.path_format))
    return sorted(found)


ROUTES_OF_THE_APP = app_routes()
PROTECTED = [r for r in ROUTES_OF_THE_APP if r not in PUBLIC]


def test_every_route_is_in_the_role_table_or_public():
    missing = [r for r in PROTECTED if r not in ROUTES]
    assert not missing, f"add these routes to app/auth/roles.py ROUTES: {missing}"
    stale = [r for r in ROUTES if r not in ROUTES_OF_THE_APP]
    assert not stale, f"ROUTES names routes the app does not have: {stale}"
    assert set(ROUTES.values()) <= set(PERMISSIONS)
    assert all(Role.ADMIN in rule.roles for rule in PERMISSIONS.values())


def test_the_openapi_document_asks_for_a_key_on_every_protected_operation():
    doc = create_app().openapi()
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            needs = (method.upper(), path) not in PUBLIC
            assert bool(operation.get("security")) == needs, (method, path)


async def test_public_routes_need_no_key(client):
    bare = {"Authorization": ""}
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/redoc"):
        r = await client.get(path, headers=bare)
        assert r.status_code == 200, (path, r.status_code)
    for path in ("/healthz", "/readyz"):  # what load balancers and probes send
        r = await client.head(path, headers=bare)
        assert r.status_code == 200, (path, r.status_code)


def _fill(path: str, values: dict[str, str]) -> str:
    for name, value in values.items():
        path = path.replace("{" + name + "}", value)
    assert "{" not in path, f"no plausible value for a parameter of {path}: add one"
    return path


async def _snapshot(sessions) -> dict[str, list]:  # type: ignore[no-untyped-def]
    """Every row of every table, for "nothing changes". Not the webhook outbox's cursor:
    the background loop moves it over records made before the snapshot, on its own time."""
    out = {}
    async with sessions() as session:
        for table in metadata.sorted_tables:
            if table.name == "webhook_cursor":
                continue
            rows = (await session.execute(select(table))).all()
            out[table.name] = sorted(repr(tuple(row)) for row in rows)
    return out


async def _key(client: httpx.AsyncClient, role: str, projects: list[str] | None) -> dict:
    r = await client.post("/v1/keys", json={"name": f"{role}-{projects}", "role": role,
                                            "projects": projects})
    assert r.status_code == 201, r.text
    return r.json()


async def test_every_route_refuses_missing_revoked_expired_and_wrong_keys(client):
    state = client.app.state
    # Something for every parameter to point at, in project "proj".
    assert (await client.put("/v1/profiles/probe", json={"safety": {}})).status_code == 201
    await client.put("/v1/projects/proj", json={"automation_profile": None})
    await client.put("/v1/actions/act-1", json={"project": "proj"})
    assert (await client.post("/v1/plans", json={"action_id": "act-1", "plan_id": "plan-1"})
            ).status_code == 201
    await client.put("/v1/tools/probe", json=WRITER)
    await client.put("/v1/skills/probe", json={"unsafe_phrases": ["rm -rf"]})
    decision = (await client.post("/v1/authorize-tool", json=AUTHORIZE)).json()

    keys = {role: await _key(client, role.value, None) for role in Role}
    scoped = {role: await _key(client, role.value, ["elsewhere"])
              for role in Role if role is not Role.ADMIN}
    revoked = await _key(client, "admin", None)
    assert (await client.delete(f"/v1/keys/{revoked['id']}")).status_code == 204
    expired = await _key(client, "admin", None)
    async with state.sessions() as session, session.begin():
        await session.execute(update(ApiKey).where(ApiKey.id == expired["id"])
                              .values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))

    values = {"name": "probe", "project": "proj", "action_id": "act-1", "plan_id": "plan-1",
              "decision_id": decision["decision_id"], "key_id": keys[Role.AGENT]["id"],
              "approval_id": "01a2365a-cd43-768f-8d3e-59557493418c",
              "server": "probe", "tool": "probe",  # a gateway pin (SPEC §19)
              "rule_id": "probe"}
    before = await _snapshot(state.sessions)
    failures: list[str] = []

    async def expect(method: str, template: str, headers: dict | list, status: int,
                     why: str) -> None:
        body = BODIES.get((method, template), {})
        kwargs = {} if method in ("GET", "DELETE") else {"json": body}
        r = await client.request(method, _fill(template, values), headers=headers, **kwargs)
        if (method, template) in REFUSED_AS_DENY:
            code = REFUSED_AS_DENY[method, template][status]
            out = r.json().get("hookSpecificOutput") or {} if r.status_code == 200 else {}
            if out.get("permissionDecision") != "deny" or code not in out.get(
                    "permissionDecisionReason", ""):
                failures.append(f"{method} {template} {why}: not a deny {code}: "
                                f"{r.status_code} {r.text[:200]}")
        elif r.status_code != status:
            failures.append(f"{method} {template} {why}: {r.status_code} {r.text[:200]}")
        elif status == 401 and r.headers.get("www-authenticate") != "Bearer":
            failures.append(f"{method} {template} {why}: 401 without WWW-Authenticate")

    def bearer(secret: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}

    for method, template in PROTECTED:
        await expect(method, template, {"Authorization": ""}, 401, "without a key")
        await expect(method, template, bearer("tg_" + "x" * 43), 401, "with an unknown key")
        await expect(method, template, {"Authorization": "Basic dXNlcjpwdw=="}, 401,
                     "with another scheme")
        await expect(method, template, bearer(revoked["key"]), 401, "with a revoked key")
        await expect(method, template, bearer(expired["key"]), 401, "with an expired key")
        for pair in ([ADMIN_TOKEN, "tg_" + "x" * 43], ["tg_" + "x" * 43, ADMIN_TOKEN]):
            await expect(method, template, [("Authorization", f"Bearer {k}") for k in pair],
                         401, "with two Authorization headers")
        _, rule = rule_for(method, template)
        for role in Role:
            if role not in rule.roles:
                await expect(method, template, bearer(keys[role]["key"]), 403,
                             f"with role {role}")
        allowed = [role for role in rule.roles if role in scoped]
        if allowed and rule.unscoped_only:
            await expect(method, template, bearer(scoped[allowed[0]]["key"]), 403,
                         "with a scoped key on a route spanning every project")
        elif allowed and (method, template) in ONE_PROJECT:
            await expect(method, template, bearer(scoped[allowed[0]]["key"]), 404,
                         "with a key scoped to another project")

    assert not failures, "\n".join(failures)
    assert await _snapshot(state.sessions) == before, "a refused request changed something"

    # The bodies above are not trivially refused: with the admin key they are accepted.
    for method, template in sorted(PROTECTED, key=lambda r: r[0] == "DELETE"):
        if (method, template) not in BODIES:
            continue
        r = await client.request(method, _fill(template, values), json=BODIES[method, template])
        assert r.status_code < 300, (method, template, r.status_code, r.text[:300])


@pytest.mark.parametrize("route", PROTECTED, ids=lambda r: f"{r[0]} {r[1]}")
def test_each_route_names_a_known_permission(route):
    permission, _ = rule_for(*route)
    assert permission in PERMISSIONS, f"{route} has no permission in app/auth/roles.py"
