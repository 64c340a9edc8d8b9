"""The registry decides: requests only tighten, destructive tools need dry_run/confirmed,
path arguments stay in the sandbox, unregistered tools can be refused per project."""

import itertools

import pytest

SAFE_READER = {"capability": {"writes": False, "checkpointable": True, "unsafe": False},
               "safety_category": "safe"}
DELETE = {"capability": {"writes": True, "checkpointable": True, "unsafe": False},
          "safety_category": "destructive", "skill_category": "files", "path_args": ["path"]}
LAX = {"require_sandbox": False, "require_checkpoints": False}


async def _authorize(client, name, *, capability=None, context=None, profile=LAX, **tool):
    body = {"tool": {"name": name, **tool}, "context": context or {}, "safety_profile": profile}
    if capability is not None:
        body["tool"]["capability"] = capability
    r = await client.post("/v1/authorize-tool", json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def test_request_claiming_to_be_safer_than_the_registry_is_not_believed(client):
    await client.put("/v1/tools/sh", json={
        "capability": {"writes": True, "checkpointable": False, "unsafe": True},
        "safety_category": "safe"})
    claimed_safe = {"writes": False, "checkpointable": True, "unsafe": False}
    d = await _authorize(client, "sh", capability=claimed_safe,
                         context={"plan_read_only": True}, profile={})
    assert d["deny"]["code"] == "read_only"
    d = await _authorize(client, "sh", capability=claimed_safe, profile={})
    assert d["deny"]["code"] == "checkpoint_required"
    d = await _authorize(client, "sh", capability=claimed_safe,
                         profile={"require_checkpoints": False})
    assert d["deny"]["code"] == "unsafe_tool"
    d = await _authorize(client, "sh", safety_category="safe", profile={
        "require_checkpoints": False, "allow_unsafe_tools": True})
    assert d["deny"]["code"] == "sandbox_required"


async def test_request_may_tighten_the_registry(client):
    await client.put("/v1/tools/fs.read", json=SAFE_READER)
    assert (await _authorize(client, "fs.read"))["allowed"] is True
    d = await _authorize(client, "fs.read", capability={"unsafe": True})
    assert d["deny"]["code"] == "unsafe_tool"
    d = await _authorize(client, "fs.read", safety_category="destructive")
    assert d["deny"]["code"] == "confirmation_required"
    d = await _authorize(client, "fs.read", capability={"checkpointable": False},
                         profile={"require_checkpoints": True, "require_sandbox": False})
    assert d["deny"]["code"] == "checkpoint_required"


@pytest.mark.parametrize("dry_run,confirmed", list(itertools.product([False, True], repeat=2)))
async def test_destructive_tool_needs_dry_run_or_confirmed(client, dry_run, confirmed):
    await client.put("/v1/tools/fs.delete", json={**DELETE, "path_args": []})
    d = await _authorize(client, "fs.delete", safety_category="safe",
                         context={"dry_run": dry_run, "confirmed": confirmed})
    if dry_run or confirmed:
        assert d["allowed"] is True
    else:
        assert d["deny"]["code"] == "confirmation_required"
        assert d["deny"]["error"] == "ToolConfirmationRequiredError"
        assert d["deny"]["details"]["ways"] == ["dry_run", "confirmed"]
        assert "dry_run" in d["deny"]["message"] and "confirmed" in d["deny"]["message"]


@pytest.mark.parametrize("path,variables,allowed", [
    ("out/a.txt", {}, True),
    ("/sb/out/a.txt", {}, True),
    ("$OUT/a.txt", {"OUT": "out"}, True),
    ("${OUT}/a.txt", {"OUT": "/sb/x"}, True),
    ("../etc/passwd", {}, False),
    ("/etc/passwd", {}, False),
    ("out/../../etc", {}, False),
    ("$OUT/a.txt", {"OUT": "/etc"}, False),
    ("${OUT}", {"OUT": "../.."}, False),
    ("$MISSING/a", {}, False),
    ("a\x00b", {}, False),
    ("~/x", {}, False),
    ("%2e%2e/x", {}, False),
    ("..\\..\\etc", {}, False),
    ("$A", {"A": "$B", "B": "/etc"}, False),
    # Issue 22: double encoding, NFKC forms (full-width, the two-dot leader U+2025).
    ("%252e%252e/etc/passwd", {}, False),
    ("．．／etc/passwd", {}, False),
    ("‥/etc/passwd", {}, False),
    ("$OUT/x", {"OUT": "‥/‥"}, False),
    ("ｏｕｔ/%41.txt", {}, True),
])
async def test_sandbox_path_arguments(client, path, variables, allowed):
    await client.put("/v1/tools/fs.delete", json=DELETE)
    d = await _authorize(client, "fs.delete", args={"path": path}, context={
        "confirmed": True, "sandbox_root": "/sb", "variables": variables})
    assert d["allowed"] is allowed, d["deny"]
    if not allowed:
        assert d["deny"]["code"] == "sandbox_path_escape"
        assert d["deny"]["error"] == "ToolSandboxEscapeError"
        assert d["deny"]["details"]["argument"] == "path"


async def test_path_args_without_a_sandbox_root_fail_closed(client):
    await client.put("/v1/tools/fs.delete", json=DELETE)
    d = await _authorize(client, "fs.delete", args={"path": "a"}, context={"confirmed": True})
    assert d["deny"]["code"] == "sandbox_path_escape"
    assert "sandbox_root" in d["deny"]["message"]


async def test_registry_skill_category_wins(client):
    await client.put("/v1/tools/fs.delete", json={**DELETE, "path_args": []})
    profile = {**LAX, "allowed_skill_categories": ["files"]}
    d = await _authorize(client, "fs.delete", skill_category="network", profile=profile,
                         context={"confirmed": True})
    assert d["allowed"] is True


async def test_project_can_refuse_unregistered_tools(client):
    await client.put("/v1/actions/act", json={"project": "locked-down"})
    await client.post("/v1/plans", json={"action_id": "act", "plan_id": "p"})
    tool = {"name": "mystery", "capability": {"writes": False, "checkpointable": True,
                                              "unsafe": False}}
    r = await client.post("/v1/authorize-tool", json={"plan_id": "p", "tool": tool})
    assert r.json()["allowed"] is True
    await client.put("/v1/projects/locked-down/registry-settings",
                     json={"deny_unregistered_tools": True})
    r = await client.post("/v1/authorize-tool", json={"plan_id": "p", "tool": tool,
                                                      "explain": True})
    deny = r.json()["deny"]
    assert deny["code"] == "tool_not_activated" and deny["error"] == "ToolNotActivatedError"
    assert [c["check"] for c in r.json()["checks"]] == ["read_only", "registry"]
    # Even without a capability: the registry's absence is the answer.
    r = await client.post("/v1/authorize-tool", json={"plan_id": "p", "tool": {"name": "x"}})
    assert r.json()["deny"]["code"] == "tool_not_activated"
    await client.put("/v1/tools/mystery", json=SAFE_READER)
    r = await client.post("/v1/authorize-tool", json={"plan_id": "p", "tool": tool})
    assert r.json()["allowed"] is True


async def test_registry_changes_and_screens_are_recorded(client):
    await client.put("/v1/tools/t", json=SAFE_READER)
    await client.put("/v1/tools/t", json={**SAFE_READER, "safety_category": "destructive"})
    await client.delete("/v1/tools/t")
    await client.put("/v1/skills/files", json={"unsafe_phrases": ["rm -rf"]})
    changes = (await client.get("/v1/decisions", params={"kind": "config"})).json()["items"]
    ops = [(c["detail"]["resource"], c["detail"]["operation"]) for c in changes]
    assert ops == [("skill", "create"), ("tool", "delete"), ("tool", "update"),
                   ("tool", "create")]
    assert changes[2]["detail"]["before"]["safety_category"] == "safe"
    assert changes[2]["detail"]["after"]["safety_category"] == "destructive"
    r = await client.post("/v1/screen", json={"skill": "files", "text": "please RM -RF /"})
    screen = r.json()
    assert screen["rejected"] is True
    rec = (await client.get(f"/v1/decisions/{screen['decision_id']}")).json()
    assert rec["kind"] == "screen" and rec["allowed"] is False
    assert rec["code"] == "unsafe_phrase" and rec["error"] == "UnsafeRequestRejectedError"
    assert rec["detail"]["matched_phrase"] == "rm -rf"


async def test_registry_change_reaches_another_replica(client, settings, database_url):
    """On Postgres the change is pushed (LISTEN/NOTIFY), so even an hour-long TTL does not
    delay it; on SQLite the TTL bounds it."""
    import asyncio
    import time

    from tests.auth.test_auth import second_app

    postgres = database_url.startswith("postgresql")
    ttl = 3600.0 if postgres else 0.2
    tool = {"name": "fs.wipe", "capability": {"writes": False, "checkpointable": True,
                                              "unsafe": False}}
    body = {"tool": tool, "safety_profile": LAX}
    async with second_app(settings.model_copy(update={"registry_ttl_seconds": ttl})) as b:
        assert (await b.post("/v1/authorize-tool", json=body)).json()["allowed"] is True
        await client.put("/v1/tools/fs.wipe", json={**DELETE, "path_args": []})
        deadline = time.monotonic() + 5
        while True:
            decision = (await b.post("/v1/authorize-tool", json=body)).json()
            if decision["allowed"] is False:
                break
            assert time.monotonic() < deadline, "the other replica kept the old registry"
            await asyncio.sleep(0.05)
        assert decision["deny"]["code"] == "confirmation_required"


async def test_unregistered_refusal_keeps_check_one_and_the_layers(client):
    await client.put("/v1/actions/ro", json={"project": "strict-p", "read_only": True})
    await client.post("/v1/plans", json={"action_id": "ro", "plan_id": "ro-1"})
    await client.put("/v1/projects/strict-p/registry-settings",
                     json={"deny_unregistered_tools": True})
    writer = {"name": "unreg", "capability": {"writes": True, "checkpointable": False,
                                              "unsafe": True}}
    r = (await client.post("/v1/authorize-tool",
                           json={"plan_id": "ro-1", "tool": writer, "explain": True})).json()
    assert r["deny"]["code"] == "read_only"
    assert [c["check"] for c in r["checks"]] == ["read_only", "registry"]
    r = (await client.post("/v1/authorize-tool",
                           json={"plan_id": "ro-1", "tool": writer, "layer": "skill"})).json()
    assert r["deny"]["error"] == "SkillExecutionError"
    reader = {"name": "unreg", "capability": {"writes": False}}
    r = (await client.post("/v1/authorize-tool", json={"plan_id": "ro-1", "tool": reader})).json()
    assert r["deny"]["code"] == "tool_not_activated"
