"""Claude Code's permissions become rules; what has no toolgate meaning is reported."""

from __future__ import annotations

from app.policy.rules import RuleCall, build_ruleset, compile_rule, evaluate_rules
from app.policy.rules.claude_import import import_claude_code

SETTINGS = {"permissions": {
    "allow": ["Bash(npm run test:*)", "Read(~/.zshrc)", "mcp__github__get_issue"],
    "ask": ["Bash(git push:*)", "WebFetch(domain:docs.example.com)"],
    "deny": ["Read(./.env)", "Edit(**/secrets/**)", "mcp__danger", "Task(x)", "WebFetch(url)",
             "Bash()", 7],
}}


def test_each_list_maps_to_its_effect() -> None:
    rules, skipped = import_claude_code(SETTINGS, project="web")
    by_id = rules
    assert by_id["claude-code-allow-001"] == {
        "project": "web", "tools": ["Bash"], "effect": "classify",
        "when": {"command": ["npm run test:*"]},
        "capability": {"unsafe": False, "safety_category": "safe"},
        "message": "Claude Code settings: allow Bash(npm run test:*)"}
    assert by_id["claude-code-allow-002"]["tools"] == ["Read", "Grep", "Glob", "LS"]
    assert by_id["claude-code-allow-003"]["tools"] == ["github.get_issue"]
    assert by_id["claude-code-ask-002"]["when"] == {"domains": ["docs.example.com"]}
    assert by_id["claude-code-deny-001"]["when"] == {"paths": ["./.env"]}
    assert by_id["claude-code-deny-002"]["tools"] == ["Edit", "MultiEdit", "Write",
                                                      "NotebookEdit"]
    assert by_id["claude-code-deny-003"]["tools"] == ["danger.*"]
    assert [s["entry"] for s in skipped] == ["Task(x)", "WebFetch(url)", "Bash()", "7"]
    assert all(s["list"] == "deny" and s["reason"] for s in skipped)


def test_imported_rules_decide_as_claude_code_would() -> None:
    rules, _ = import_claude_code(SETTINGS)
    ruleset = build_ruleset(compile_rule(i, b) for i, b in rules.items())

    def bash(line: str):
        return evaluate_rules(ruleset, RuleCall("Bash", {"command": line}, shell_arg="command",
                                                sandbox_root="/repo"))

    assert bash("npm run test -- -x").classify is not None
    assert bash("git push origin").ask is not None
    read = evaluate_rules(ruleset, RuleCall("Read", {"file_path": "/repo/.env"},
                                            path_args=("file_path",), sandbox_root="/repo"))
    assert read.deny is not None and read.deny.matched == "/repo/.env"


def test_settings_without_permissions() -> None:
    assert import_claude_code({})[0] == {}
    assert import_claude_code([])[1][0]["list"] == "permissions"
