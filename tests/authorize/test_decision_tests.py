"""Decision tests (`POST /v1/test`, `toolgate test`): replayed, reported, never recorded."""

from pathlib import Path

import orjson

from app.policyfile.document import load_policy

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "decision-tests.jsonl"


async def test_example_file_passes_on_the_example_registry_and_is_not_recorded(client):
    """The example cases test examples/policy.yaml's registry (tests/test_examples.py runs
    them through `toolgate apply` and `toolgate test` against a server)."""
    for name, body in load_policy((EXAMPLES / "policy.yaml").read_text()).sections[
            "tools"].items():
        assert (await client.put(f"/v1/tools/{name}", json=body)).status_code == 201
    r = await client.post("/v1/test", content=EXAMPLE.read_bytes(),
                          headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 200, r.text
    report = r.json()
    total = len(EXAMPLE.read_text().splitlines())
    assert report["ok"] is True and report["total"] == total and report["failed"] == 0, report
    assert (await client.get("/v1/decisions")).json()["items"] == []


async def test_failures_are_reported_per_case_against_current_configuration(client):
    await client.put("/v1/tools/fs.delete", json={
        "capability": {"writes": True, "checkpointable": True, "unsafe": False},
        "safety_category": "destructive"})
    await client.put("/v1/actions/a", json={"read_only": True})
    await client.post("/v1/plans", json={"action_id": "a", "plan_id": "ro"})
    cases = [
        {"name": "registry says destructive", "request": {"tool": {"name": "fs.delete"}},
         "expect": {"allowed": True}},
        {"name": "plan is read-only", "request": {"plan_id": "ro", "tool": {"name": "fs.delete"}},
         "expect": {"allowed": False, "code": "read_only"}},
        {"request": {"plan_id": "missing", "tool": {"name": "fs.delete"}},
         "expect": {"allowed": False}},
        {"request": {"tool": {"name": "x", "capability": {"writes": "yes"}}},
         "expect": {"allowed": True}},
    ]
    report = (await client.post("/v1/test", json=cases)).json()
    assert [r["ok"] for r in report["results"]] == [False, True, False, False]
    assert report["results"][0]["actual"]["code"] == "confirmation_required"
    assert "not_found" in report["results"][2]["problem"]
    assert "tool.capability.writes" in report["results"][3]["problem"]
    assert report["ok"] is False and report["failed"] == 3


async def test_malformed_case_files_are_422_naming_the_line(client):
    body = b'{"request": {}, "expect": {"allowed": true}}\nnot json\n'
    r = await client.post("/v1/test", content=body,
                          headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 422 and r.json()["error"]["details"]["line"] == 2
    r = await client.post("/v1/test", json=[{"request": {}, "expect": {"allowed": "yes"}}])
    assert r.status_code == 422 and "cases.0.expect.allowed" in r.json()["error"]["message"]
    r = await client.post("/v1/test", content=b"", headers={"Content-Type": "application/x-ndjson"})
    assert r.status_code == 422
    assert orjson.loads(r.content)["error"]["code"] == "invalid_input"


async def test_cases_without_plan_id_follow_the_stateless_rule(client):
    """As authorize (SPEC §9): a case without plan_id by a key that is neither admin nor
    stateless is not decided but reported stateless_forbidden; a stateless key's is."""
    case = {"name": "no-plan", "request": {"tool": {"name": "t", "capability": {
        "writes": False, "checkpointable": True, "unsafe": False}}},
        "expect": {"allowed": True}}
    for stateless, ok in ((False, False), (True, True)):
        r = await client.post("/v1/keys", json={"name": "a", "role": "agent",
                                                "projects": None, "stateless": stateless})
        agent = {"Authorization": f"Bearer {r.json()['key']}"}
        direct = await client.post("/v1/authorize-tool", json=case["request"], headers=agent)
        assert direct.status_code == (200 if ok else 403)
        report = (await client.post("/v1/test", json=[case], headers=agent)).json()
        [result] = report["results"]
        assert result["ok"] is ok, result
        if not ok:
            assert result["problem"].startswith("stateless_forbidden")
            assert result["actual"] is None
