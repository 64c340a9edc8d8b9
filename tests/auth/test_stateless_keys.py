"""Stateless requests and key principals (SPEC §9): only admin keys and keys created with
`"stateless": true` may send an authorize request without plan_id; keys name the person or
service behind them."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import ADMIN_TOKEN

READER = {"writes": False, "checkpointable": True, "unsafe": False}
TOOL = {"name": "t", "capability": READER}


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def new_key(client: httpx.AsyncClient, role: str, projects: list[str] | None = None,
                  **extra: object) -> dict:
    r = await client.post("/v1/keys", json={"name": f"{role} key", "role": role,
                                            "projects": projects, **extra})
    assert r.status_code == 201, r.text
    return r.json()


async def _recorded_by(client: httpx.AsyncClient, key_id: str) -> int:
    items = (await client.get("/v1/decisions?kind=authorize&limit=1000")).json()["items"]
    return sum(i["key_id"] == key_id for i in items)


async def test_only_admin_and_stateless_keys_may_leave_out_plan_id(both_paths):
    """On every way the hot route is served (uvicorn plug-in, plain ASGI, FastAPI)."""
    client = both_paths
    await client.put("/v1/actions/act", json={"project": "web"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p"})
    agent = await new_key(client, "agent")
    stateless = await new_key(client, "agent", stateless=True)
    admin = await new_key(client, "admin")
    assert (agent["stateless"], stateless["stateless"]) == (False, True)
    for body in ({"tool": TOOL}, {"tool": TOOL, "safety_profile": {}},
                 {"tool": TOOL, "context": {"plan_id": "label-only"}}):
        for _ in range(2):  # the second time with the key in every cache
            r = await client.post("/v1/authorize-tool", headers=bearer(agent["key"]), json=body)
            assert r.status_code == 403, (body, r.text)
            error = r.json()["error"]
            assert error["code"] == "stateless_forbidden" and "plan_id" in error["message"]
        for key in (stateless["key"], admin["key"], ADMIN_TOKEN):
            r = await client.post("/v1/authorize-tool", headers=bearer(key), json=body)
            assert r.status_code == 200 and r.json()["allowed"] is True, (body, r.text)
    # Naming a plan is what a non-stateless key does.
    r = await client.post("/v1/authorize-tool", headers=bearer(agent["key"]),
                          json={"plan_id": "p", "tool": TOOL})
    assert r.status_code == 200 and r.json()["allowed"] is True
    assert await _recorded_by(client, agent["id"]) == 1  # the refusals recorded nothing
    assert await _recorded_by(client, stateless["id"]) == 3


async def test_a_batch_with_one_request_without_plan_id_is_refused_whole(client):
    await client.put("/v1/actions/act", json={"project": "web"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p"})
    agent = await new_key(client, "agent", ["web"])
    with_plan = {"plan_id": "p", "tool": TOOL}
    r = await client.post("/v1/authorize-tools", headers=bearer(agent["key"]),
                          json={"requests": [with_plan, with_plan, {"tool": TOOL}, with_plan]})
    assert r.status_code == 403, r.text
    error = r.json()["error"]
    assert error["code"] == "stateless_forbidden" and error["details"]["index"] == 2
    assert await _recorded_by(client, agent["id"]) == 0
    r = await client.post("/v1/authorize-tools", headers=bearer(agent["key"]),
                          json=[with_plan, with_plan])
    assert r.status_code == 200 and len(r.json()["items"]) == 2

    stateless = await new_key(client, "agent", stateless=True)
    r = await client.post("/v1/authorize-tools", headers=bearer(stateless["key"]),
                          json=[with_plan, {"tool": TOOL}])
    assert r.status_code == 200 and [i["allowed"] for i in r.json()["items"]] == [True, True]


@pytest.mark.parametrize("body, field", [
    ({"role": "agent", "projects": ["web"], "stateless": True}, "stateless"),
    ({"role": "agent", "projects": None, "stateless": "yes"}, "stateless"),
    ({"role": "agent", "projects": None, "stateless": 1}, "stateless"),
    ({"role": "agent", "projects": None, "principal": "alice smith"}, "principal"),
    ({"role": "agent", "projects": None, "principal": ""}, "principal"),
    ({"role": "agent", "projects": None, "principal": 7}, "principal"),
    ({"role": "agent", "projects": None, "principal": "a" * 201}, "principal"),
])
async def test_bad_stateless_or_principal_is_422_and_creates_nothing(client, body, field):
    r = await client.post("/v1/keys", json={"name": "k", **body})
    assert r.status_code == 422, r.text
    assert field in [f["field"] for f in r.json()["error"]["details"]["fields"]]
    assert (await client.get("/v1/keys")).json()["items"] == []


async def test_a_key_names_its_principal_or_stands_for_itself(client):
    plain = await new_key(client, "agent")
    alice = await new_key(client, "approver", ["web"], principal="alice@example.com")
    bot = await new_key(client, "agent", stateless=True, principal="ci:deploy-bot")
    assert plain["principal"] == plain["id"] and plain["stateless"] is False
    assert alice["principal"] == "alice@example.com"
    assert (bot["principal"], bot["stateless"]) == ("ci:deploy-bot", True)
    listed = {k["id"]: k for k in (await client.get("/v1/keys")).json()["items"]}
    assert listed[plain["id"]]["principal"] == plain["id"]
    assert listed[alice["id"]]["principal"] == "alice@example.com"
    assert listed[bot["id"]]["stateless"] is True
    # Recorded with the key's creation (never the secret).
    changes = (await client.get("/v1/decisions?kind=config")).json()["items"]
    created = {c["detail"]["name"]: c["detail"]["after"] for c in changes
               if c["detail"]["resource"] == "key"}
    assert created[bot["id"]]["principal"] == "ci:deploy-bot"
    assert created[bot["id"]]["stateless"] is True

    # What the hot path reads: decided once, when the key is read.
    auth = client.app.state.auth.authenticator
    for key, stateless, name in ((plain, False, plain["id"]), (alice, False, "alice@example.com"),
                                 (bot, True, "ci:deploy-bot")):
        principal = await auth.authenticate(key["key"])
        assert (principal.stateless, principal.principal_name) == (stateless, name)
    admin = await new_key(client, "admin")
    assert (await auth.authenticate(admin["key"])).stateless is True
    assert (await auth.authenticate(ADMIN_TOKEN)).stateless is True


def test_keys_create_sends_stateless_and_principal(monkeypatch):
    from typer.testing import CliRunner

    from app.cli import keys as keys_cli
    from app.cli.main import cli

    sent: list[dict] = []

    def call(method, url, path, *, token=None, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(kwargs.get("json"))
        return {"id": "key_1", "key": "tg_secret", "role": "agent", "projects": None,
                "expires_at": None, "stateless": True, "principal": "ci-bot"}

    monkeypatch.setattr(keys_cli, "call", call)
    runner = CliRunner()
    done = runner.invoke(cli, ["keys", "create", "--name", "bot", "--role", "agent",
                               "--stateless", "--principal", "ci-bot", "--token", "t"])
    assert done.exit_code == 0, done.output
    assert sent[-1] == {"name": "bot", "role": "agent", "projects": None, "stateless": True,
                        "principal": "ci-bot"}
    assert done.stdout.strip().endswith("tg_secret")
    done = runner.invoke(cli, ["keys", "create", "--name", "bot", "--role", "agent",
                               "--project", "web", "--token", "t"])
    assert done.exit_code == 0, done.output
    assert sent[-1] == {"name": "bot", "role": "agent", "projects": ["web"]}
