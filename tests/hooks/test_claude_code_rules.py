"""The real Claude Code CLI under the call rules examples/claude-code.yaml ships (SPEC §18,
issue 41): a read-only `git status` runs (a classify rule makes it a safe call while Bash
stays an unsafe writer), `cat .env` is denied by `deny-secrets`, and `git push` asks
(`ask-git-push`: the hook answers `ask`, which headless Claude Code cannot put to a
person, so the push does not run), each with the rule named in the tool_result the model
receives. The module's server and fixtures are tests/hooks/test_claude_code.py's (one
`toolgate serve` for this module, the examples applied as a user applies them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.hooks.claude_cli import http_hooks
from tests.hooks.messages_api import Script
from tests.hooks.test_claude_code import (  # noqa: F401 (the module's fixtures)
    decisions,
    model,
    one_run,
    project,
    toolgate,
)

pytestmark = pytest.mark.slow


def _repo(folder: Path) -> None:
    for args in (["init", "-q"], ["config", "user.email", "t@example.com"],
                 ["config", "user.name", "t"]):
        subprocess.run(["git", *args], cwd=folder, check=True, capture_output=True)


def _bash(api, service: dict, folder: Path, marker: str, command: str) -> tuple[dict, dict]:
    script = Script("Bash", {"command": command, "description": marker.lower()},
                    f"toolu_rules_{marker.lower()}")
    result = one_run(api, f"RULES-{marker}", script, folder,
                     http_hooks(service["url"], "action=coding"), service["token"])
    [tool_result] = script.results
    [decision] = decisions(service["url"], result["session_id"])
    return tool_result, decision


def test_git_status_runs_as_a_read(toolgate, model, project):  # noqa: F811
    _repo(project)
    tool_result, decision = _bash(model, toolgate, project, "STATUS", "git status")
    assert decision["allowed"] is True, decision
    assert any(r["id"] == "classify-reads" for r in decision["detail"]["rules"])
    assert "branch" in str(tool_result["content"]).lower(), tool_result  # git's own output


def test_cat_env_is_denied_naming_the_rule(toolgate, model, project):  # noqa: F811
    (project / ".env").write_text("TOKEN=secret-value\n")
    tool_result, decision = _bash(model, toolgate, project, "ENV", "cat .env")
    text = str(tool_result["content"])
    assert tool_result["is_error"] is True
    assert "secret-value" not in text
    assert "ToolAccessDeniedError (rule_denied)" in text and "deny-secrets" in text, text
    assert decision["code"] == "rule_denied"
    assert decision["detail"]["deny_details"]["rule"]["id"] == "deny-secrets"


def test_git_push_asks_naming_the_rule(toolgate, model, project):  # noqa: F811
    _repo(project)
    tool_result, decision = _bash(model, toolgate, project, "PUSH", "git push origin main")
    assert tool_result["is_error"] is True
    assert decision["code"] == "human_approval_required"
    assert decision["detail"]["deny_details"]["rule"]["id"] == "ask-git-push"
    text = str(tool_result["content"])
    assert "ask-git-push" in text, text
