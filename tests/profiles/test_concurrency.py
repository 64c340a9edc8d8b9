"""Concurrent writers of one resource: never a 5xx, and the right answers."""

import asyncio


async def test_identical_plan_use_at_once_is_idempotent(client):
    await client.put("/v1/actions/a", json={"project": "p"})
    body = {"action_id": "a", "plan_id": "same"}
    answers = await asyncio.gather(*[client.post("/v1/plans", json=body) for _ in range(20)])
    codes = sorted(r.status_code for r in answers)
    assert codes == [200] * 19 + [201], codes
    assert len({r.json()["created_at"] for r in answers}) == 1


async def test_different_plan_use_at_once_conflicts(client):
    for n in range(10):
        await client.put(f"/v1/actions/a{n}", json={})
    answers = await asyncio.gather(*[
        client.post("/v1/plans", json={"action_id": f"a{n}", "plan_id": "contested"})
        for n in range(10)])
    codes = sorted(r.status_code for r in answers)
    assert codes == [201] + [409] * 9, codes


async def test_concurrent_configuration_writes_all_succeed(client):
    answers = await asyncio.gather(
        *[client.put("/v1/profiles/x", json={"safety": {"max_retries_per_step": n}})
          for n in range(10)],
        *[client.put("/v1/config", json={"automation_profile": None}) for _ in range(5)],
        *[client.put("/v1/projects/pj", json={}) for _ in range(5)],
        *[client.put("/v1/actions/ac", json={"project": "pj"}) for _ in range(5)],
    )
    assert all(r.status_code in (200, 201) for r in answers), [
        (r.status_code, r.text[:100]) for r in answers if r.status_code >= 300]
    versions = [v["version"] for v in
                (await client.get("/v1/profiles/x/versions")).json()["items"]]
    assert versions == list(range(1, len(versions) + 1)) and len(versions) == 10
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def _config_changes(client, resource: str, name: str) -> list[dict]:
    """The audit records of one resource, oldest first."""
    items = (await client.get("/v1/decisions",
                              params={"kind": "config", "limit": 1000})).json()["items"]
    return [r["detail"] for r in reversed(items)
            if r["detail"]["resource"] == resource and r["detail"]["name"] == name]


def _consistent(changes: list[dict]) -> None:
    """Each change starts from what the one before it left: no change recorded twice, none
    recorded from a state that had already been replaced."""
    for previous, change in zip(changes, changes[1:], strict=False):
        assert change["before"] == previous["after"], (previous, change)
        assert change["before"] != change["after"], change


async def test_identical_profile_puts_at_once_make_one_version(client):
    """50 identical PUTs at once: one new version, not one per request that read the old
    row before another's change committed (issue 22 item 5: v6 = v7 on Postgres)."""
    bodies = [{"description": f"round {n}", "safety": {"max_retries_per_step": n}}
              for n in range(4)]
    for round_, body in enumerate(bodies, start=1):
        answers = await asyncio.gather(*[client.put("/v1/profiles/same", json=body)
                                         for _ in range(50)])
        assert sorted(r.status_code for r in answers) == (
            [200] * 49 + [201] if round_ == 1 else [200] * 50)
        assert {r.json()["version"] for r in answers} == {round_}
    versions = (await client.get("/v1/profiles/same/versions")).json()["items"]
    assert [v["version"] for v in versions] == [1, 2, 3, 4]
    assert [v["description"] for v in versions] == [b["description"] for b in bodies]
    changes = await _config_changes(client, "profile", "same")
    assert [c["after"]["version"] for c in changes] == [1, 2, 3, 4]
    assert changes[0]["before"] is None
    _consistent(changes)


async def test_competing_profile_puts_version_every_real_change_once(client):
    """50 PUTs of 5 different bodies at once: versions grow by one per real change, no two
    neighbouring versions are the same, and each audit record's before is the version its
    change replaced."""
    await client.put("/v1/profiles/mixed", json={"description": "start"})
    answers = await asyncio.gather(*[
        client.put("/v1/profiles/mixed", json={"description": f"body {n % 5}"})
        for n in range(50)])
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    versions = (await client.get("/v1/profiles/mixed/versions")).json()["items"]
    assert [v["version"] for v in versions] == list(range(1, len(versions) + 1))
    for previous, version in zip(versions, versions[1:], strict=False):
        assert previous["description"] != version["description"], versions
    changes = await _config_changes(client, "profile", "mixed")
    assert [c["after"]["version"] for c in changes] == [v["version"] for v in versions]
    _consistent(changes)


async def test_competing_puts_of_other_resources_audit_what_they_replaced(client):
    """The same read-then-lock pattern elsewhere: each audit record's before is the state
    its change replaced (actions, projects, the global config, tools, skills, registry
    settings)."""
    for n in range(3):
        await client.put(f"/v1/profiles/p{n}", json={})
    cases = [
        ("action", "ac", "/v1/actions/ac", lambda n: {"read_only": n % 2 == 0}),
        ("project", "pj", "/v1/projects/pj", lambda n: {"automation_profile": f"p{n % 3}"}),
        ("config", None, "/v1/config", lambda n: {"automation_profile": f"p{n % 3}"}),
        ("tool", "tl", "/v1/tools/tl",
         lambda n: {"capability": {"writes": n % 2 == 0, "checkpointable": True,
                                   "unsafe": False}, "safety_category": "safe"}),
        ("skill", "sk", "/v1/skills/sk",
         lambda n: {"category": None, "unsafe_phrases": [f"phrase number {n % 3}"]}),
        ("registry_settings", "pj", "/v1/projects/pj/registry-settings",
         lambda n: {"deny_unregistered_tools": n % 2 == 0}),
    ]
    for resource, name, path, body in cases:
        answers = await asyncio.gather(*[client.put(path, json=body(n)) for n in range(30)])
        assert all(r.status_code in (200, 201) for r in answers), (resource, [
            r.text for r in answers if r.status_code >= 300])
        changes = await _config_changes(client, resource, name)
        assert changes, resource
        _consistent(changes)


async def test_competing_revocations_and_plan_transitions_audit_what_they_replaced(client):
    """A key revoked by many requests at once is revoked (and audited) once; a plan's
    transitions at once each audit the state they replaced."""
    created = await client.post("/v1/keys", json={"name": "k", "role": "agent", "projects": None})
    key = created.json()["id"]
    answers = await asyncio.gather(*[client.delete(f"/v1/keys/{key}") for _ in range(20)])
    assert {r.status_code for r in answers} == {204}
    revocations = [c for c in await _config_changes(client, "key", key)
                   if c["operation"] == "revoke"]
    assert len(revocations) == 1, revocations

    await client.put("/v1/actions/a", json={})
    await client.post("/v1/plans", json={"action_id": "a", "plan_id": "pl"})
    answers = await asyncio.gather(*[
        client.post(f"/v1/plans/pl/{'execute' if n % 2 else 'lifecycle-apply'}")
        for n in range(20)])
    assert {r.status_code for r in answers} == {200}
    changes = await _config_changes(client, "plan", "pl")
    assert len(changes) == 20
    assert changes[0]["before"] == {"state": "created"}
    for previous, change in zip(changes, changes[1:], strict=False):
        assert change["before"] == previous["after"], (previous, change)
