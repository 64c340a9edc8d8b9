"""Rules as configuration (SPEC §18): the policy file's `rules:` section (line-numbered
errors, export round trip through the service on SQLite and Postgres, prune),
`toolgate rules import claude-code`, POST /v1/test cases naming rules, and replay
candidates carrying rules."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from app.cli.main import cli
from app.policyfile.document import (
    PolicyFileError,
    State,
    export_document,
    from_answer,
    load_policy,
    make_plan,
)
from tests.rules.test_rules_decisions import RULES, _setup, bash, decide

FILE = """\
version: 1
rules:
  no-env:
    tools: ["*"]
    when:
      paths: ["**/.env"]
    effect: deny
    message: secrets stay put
  reads:
    tools: [Bash]
    when:
      command: ["git status", "ls:*"]
    effect: classify
    capability: {writes: false, unsafe: false}
"""


def test_a_rule_that_does_not_compile_is_reported_at_its_line():
    bad = FILE.replace('effect: deny\n', 'effect: deny\n    capability: {unsafe: true}\n')
    bad = bad.replace('command: ["git status", "ls:*"]', 'expr: "size(tool.args >"')
    with pytest.raises(PolicyFileError) as info:
        load_policy(bad, "p.yaml")
    found = {(p.line, p.where) for p in info.value.problems}
    assert (8, "rules.no-env.capability") in found, found
    assert (13, "rules.reads.when.expr") in found, found
    unknown = FILE.replace("      paths:", "      colour: [red]\n      paths:")
    with pytest.raises(PolicyFileError) as info:
        load_policy(unknown, "p.yaml")
    assert [(p.line, p.where) for p in info.value.problems] == [(6, "rules.no-env.when.colour")]


def test_rules_are_sent_after_skills_and_pruned():
    policy = load_policy(FILE)
    plan = make_plan(policy, State({"rules": {}}))
    assert [(c.op, c.section, c.name, c.path) for c in plan.changes] == [
        ("create", "rules", "no-env", "/v1/rules/no-env"),
        ("create", "rules", "reads", "/v1/rules/reads")]
    state = State({"rules": {**policy.sections["rules"], "old": policy.sections["rules"]["reads"]}})
    pruned = make_plan(policy, state, prune=True)
    assert [(c.op, c.name) for c in pruned.changes] == [("delete", "old")]


async def test_export_of_the_service_applies_as_no_change(client):
    policy = load_policy(FILE)
    for rule_id, body in policy.sections["rules"].items():
        r = await client.put(f"/v1/rules/{rule_id}", json=body)
        assert r.status_code == 201, r.text
    items = (await client.get("/v1/rules")).json()["items"]
    state = State({"rules": {item["rule_id"]: from_answer("rules", item) for item in items}})
    assert make_plan(policy, state).changes == []
    exported = export_document(State({**state.sections}))
    again = load_policy(json.dumps(exported))  # JSON is YAML
    assert again.sections["rules"] == policy.sections["rules"]


def test_import_claude_code_dry_run(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"permissions": {
        "deny": ["Read(./.env)", "Bash(curl:*)"], "ask": ["Bash(git push:*)"],
        "allow": ["Bash(npm run test:*)", "mcp__github__get_issue", "Task(x)"]}}))
    result = CliRunner().invoke(cli, ["rules", "import", "claude-code", str(settings),
                                      "--project", "agents", "--dry-run"])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "would put rule claude-code-deny-001" in out and '"paths":["./.env"]' in out
    assert "claude-code-ask-001" in out and '"effect":"ask"' in out
    assert '"tools":["github.get_issue"]' in out and '"project":"agents"' in out
    assert "cannot map permissions.allow Task(x)" in out
    assert "dry run: nothing sent" in out


def test_import_claude_code_sends_each_rule(tmp_path, monkeypatch):
    from app.cli import rules as rules_cli

    sent = []
    monkeypatch.setattr(rules_cli, "call", lambda method, url, path, **kw: sent.append(
        (method, path, kw["json"]["effect"])))
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"permissions": {"deny": ["Read(./.env)"],
                                                    "allow": ["Bash(ls:*)"]}}))
    result = CliRunner().invoke(cli, ["rules", "import", "claude-code", str(settings)])
    assert result.exit_code == 0, result.output
    assert sent == [("PUT", "/v1/rules/claude-code-deny-001", "deny"),
                    ("PUT", "/v1/rules/claude-code-allow-001", "classify")]


async def test_decision_test_cases_name_rules(client):
    plan = await _setup(client)
    cases = [
        {"name": "env", "request": bash(plan, "cat .env"),
         "expect": {"allowed": False, "code": "rule_denied", "rule": "deny-secrets"}},
        {"name": "status", "request": bash(plan, "git status"),
         "expect": {"allowed": True, "rule": "classify-reads"}},
        {"name": "wrong rule", "request": bash(plan, "git status"),
         "expect": {"allowed": True, "rule": "deny-secrets"}},
    ]
    r = await client.post("/v1/test", json=cases)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["ok"] for x in results] == [True, True, False]
    assert "classify-reads" in results[1]["actual"]["rules"]


async def test_replay_with_candidate_rules(client):
    plan = await _setup(client, rules=False)
    before = [await decide(client, bash(plan, "cat .env")),  # unsafe_tool without rules
              await decide(client, bash(plan, "git status"))]
    assert [b["deny"]["code"] for b in before] == ["unsafe_tool", "unsafe_tool"]
    since = "2020-01-01T00:00:00Z"
    r = await client.post("/v1/replay", json={"since": since, "candidate": {"rules": RULES}})
    assert r.status_code == 200, r.text
    result = r.json()
    # cat .env: unsafe_tool -> rule_denied; git status: unsafe_tool -> allow.
    assert result["changed"] == 2 and result["deny_to_allow"] == 1
    assert result["code_changed"] == 1, result
    # Decisions made under rules replay as recorded with no candidate, and differently
    # without them.
    for rule_id, body in RULES.items():
        await client.put(f"/v1/rules/{rule_id}", json=body)
    await decide(client, bash(plan, "cat .env"))
    await decide(client, bash(plan, "git status"))
    unchanged = (await client.post("/v1/replay", json={"since": since})).json()
    assert unchanged["changed"] == 0, unchanged
    r = await client.post("/v1/replay", json={"since": since, "candidate": {"rules": {}}})
    none = r.json()
    transitions = {(t["from"], t["to"]): t["count"] for t in none["transitions"]}
    assert transitions == {("rule_denied", "unsafe_tool"): 1, ("allow", "unsafe_tool"): 1}, none
