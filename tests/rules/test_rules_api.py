"""PUT/GET/DELETE /v1/rules (SPEC §18) on SQLite and Postgres: versions, the stored body,
422 naming the field of a rule that does not compile (nothing stored), limits, audit,
project scope of reads."""

from __future__ import annotations

from tests.approvals.test_approvals import new_key

SECRETS = {"tools": ["*"], "when": {"paths": ["**/.env"]}, "effect": "deny",
           "message": "secrets stay put"}


async def test_create_update_version_delete(client):
    r = await client.put("/v1/rules/no-secrets", json=SECRETS)
    assert r.status_code == 201, r.text
    rule = r.json()
    assert rule["rule_id"] == "no-secrets" and rule["version"] == 1
    assert rule["project"] is None and rule["mode"] == "enforce"
    assert rule["when"]["paths"] == ["**/.env"] and rule["message"] == "secrets stay put"
    assert rule["updated_at"]
    # The same body again: 200, nothing changes.
    again = await client.put("/v1/rules/no-secrets", json=SECRETS)
    assert again.status_code == 200 and again.json()["version"] == 1
    changed = await client.put("/v1/rules/no-secrets",
                               json={**SECRETS, "message": "no .env, ever"})
    assert changed.status_code == 200 and changed.json()["version"] == 2
    got = await client.get("/v1/rules/no-secrets")
    assert got.status_code == 200 and got.json()["message"] == "no .env, ever"
    listed = (await client.get("/v1/rules")).json()["items"]
    assert [r["rule_id"] for r in listed] == ["no-secrets"]
    assert (await client.delete("/v1/rules/no-secrets")).status_code == 204
    assert (await client.get("/v1/rules/no-secrets")).status_code == 404
    assert (await client.delete("/v1/rules/no-secrets")).status_code == 404
    assert (await client.get("/v1/rules")).json()["items"] == []
    # Created again, the id continues its versions: (id, version) names one body.
    recreated = await client.put("/v1/rules/no-secrets", json=SECRETS)
    assert recreated.status_code == 201 and recreated.json()["version"] == 3


async def test_a_rule_that_does_not_compile_is_422_naming_the_field(client):
    await client.put("/v1/rules/keep", json=SECRETS)
    bad_bodies = {
        "when.colour": {**SECRETS, "when": {"colour": ["red"]}},
        "capability": {**SECRETS, "capability": {"unsafe": False}},  # not a classify rule
        "when.expr": {**SECRETS, "when": {"expr": "size(tool.args.files >"}},
        "effect": {**SECRETS, "effect": "maybe"},
        "tools": {**SECRETS, "tools": []},
        "when.paths.0": {**SECRETS, "when": {"paths": ["x" * 1001]}},
    }
    for field, body in bad_bodies.items():
        r = await client.put("/v1/rules/keep", json=body)
        assert r.status_code == 422, (field, r.text)
        fields = [f["field"] for f in r.json()["error"]["details"]["fields"]]
        assert any(f == field or f.startswith(field) for f in fields), (field, r.text)
        stored = (await client.get("/v1/rules/keep")).json()
        assert stored["version"] == 1 and stored["when"] == SECRETS["when"]
    r = await client.put("/v1/rules/fresh", json={**SECRETS, "effect": "maybe"})
    assert r.status_code == 422
    assert (await client.get("/v1/rules/fresh")).status_code == 404
    r = await client.put("/v1/rules/nul", json={**SECRETS, "when": {"paths": ["a\x00"]}})
    assert r.status_code == 422
    assert r.json()["error"]["details"]["fields"][0]["field"].startswith("when.paths")


async def test_changes_are_audited(client):
    await client.put("/v1/rules/no-secrets", json=SECRETS)
    await client.put("/v1/rules/no-secrets", json={**SECRETS, "mode": "shadow"})
    await client.delete("/v1/rules/no-secrets")
    items = (await client.get("/v1/decisions",
                              params={"kind": "config", "limit": 100})).json()["items"]
    changes = [c for c in items if c["detail"]["resource"] == "rule"]
    assert [c["detail"]["operation"] for c in changes] == ["delete", "update", "create"]
    assert changes[1]["detail"]["after"]["version"] == 2
    assert changes[1]["detail"]["after"]["body"]["mode"] == "shadow"


async def test_project_rules_and_scoped_reads(client):
    await client.put("/v1/rules/global", json=SECRETS)
    r = await client.put("/v1/rules/ops-only", json={**SECRETS, "project": "ops"})
    assert r.status_code == 201 and r.json()["project"] == "ops"
    await client.put("/v1/rules/web-only", json={**SECRETS, "project": "web"})
    ids = [r["rule_id"] for r in (await client.get("/v1/rules?project=ops")).json()["items"]]
    assert ids == ["global", "ops-only"]
    agent = await new_key(client, "agent", projects=["ops"])
    seen = (await client.get("/v1/rules", headers=agent)).json()["items"]
    assert [r["rule_id"] for r in seen] == ["global", "ops-only"]
    assert (await client.get("/v1/rules/web-only", headers=agent)).status_code == 404
    assert (await client.get("/v1/rules/global", headers=agent)).status_code == 200
    # Only admins write rules.
    r = await client.put("/v1/rules/mine", json=SECRETS, headers=agent)
    assert r.status_code == 403


async def test_at_most_1000_rules_per_scope(client, monkeypatch):
    from app.rules import routes
    monkeypatch.setattr(routes, "MAX_RULES_PER_SCOPE", 2)
    for n in range(2):
        assert (await client.put(f"/v1/rules/r{n}", json=SECRETS)).status_code == 201
    r = await client.put("/v1/rules/r2", json=SECRETS)
    assert r.status_code == 409 and r.json()["error"]["code"] == "too_many_rules"
    assert (await client.get("/v1/rules/r2")).status_code == 404
    # Another scope has its own count; an existing rule may still change.
    r = await client.put("/v1/rules/r2", json={**SECRETS, "project": "ops"})
    assert r.status_code == 201
    r = await client.put("/v1/rules/r1", json={**SECRETS, "message": "x"})
    assert r.status_code == 200
