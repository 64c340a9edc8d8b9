"""Running the real Claude Code CLI (npm `@anthropic-ai/claude-code`, pinned in
tests/hooks/package.json, installed by `.ci/run`) headless against the scripted Messages
API, in a scratch project whose `.claude/settings.json` holds the hooks under test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
CLAUDE = HERE / "node_modules" / ".bin" / "claude"
REQUIRE_ENV = "TOOLGATE_REQUIRE_CLAUDE_CODE"
DEBUG_ENV = "TOOLGATE_CLAUDE_DEBUG_FILE"  # a path: every run appends Claude Code's debug log


def require_claude() -> str:
    """The CLI's path; skips (fails under TOOLGATE_REQUIRE_CLAUDE_CODE=1, as `.ci/run`
    sets it) when `npm ci --prefix tests/hooks` has not been run."""
    if CLAUDE.exists():
        return str(CLAUDE)
    message = ("the Claude Code CLI is not installed: run "
               "`npm ci --prefix tests/hooks --no-audit --no-fund`")
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def http_hooks(url: str, query: str) -> dict[str, Any]:
    """The documented HTTP form (docs/coding-agents.md): every tool, before and after, no
    allow rules of Claude Code's own."""
    hook = {"type": "http", "url": f"{url}/v1/hooks/claude-code?{query}",
            "headers": {"Authorization": "Bearer $TOOLGATE_TOKEN"},
            "allowedEnvVars": ["TOOLGATE_TOKEN"], "timeout": 30}
    return _settings(hook)


def command_hooks(toolgate: str, url: str, *args: str) -> dict[str, Any]:
    """The documented command form: `toolgate hook claude-code`."""
    command = " ".join([toolgate, "hook", "claude-code", "--url", url, *args])
    return _settings({"type": "command", "command": command, "timeout": 30})


def _settings(hook: dict[str, Any]) -> dict[str, Any]:
    every = [{"matcher": "*", "hooks": [hook]}]
    return {"permissions": {"allow": [], "defaultMode": "default"},
            "hooks": {"PreToolUse": every, "PostToolUse": every,
                      "PostToolUseFailure": every}}


def run_claude(project: Path, home: Path, settings: dict[str, Any], prompt: str, *,
               api: str, token: str, extra: list[str] = (), timeout: float = 120,
               more_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One headless run in `project` (its cwd); Claude Code's JSON result."""
    claude = require_claude()
    (project / ".claude").mkdir(parents=True, exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps(settings))
    home.mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"), "ANTHROPIC_BASE_URL": api,
        "ANTHROPIC_API_KEY": "sk-ant-test-dummy", "TOOLGATE_TOKEN": token,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1", "DISABLE_ERROR_REPORTING": "1", **(more_env or {}),
    }
    if os.environ.get(DEBUG_ENV):  # Claude Code's own debug log, to see what it did
        extra = [*extra, "--debug-file", os.environ[DEBUG_ENV]]
    done = subprocess.run([claude, "-p", prompt, "--output-format", "json", *extra],
                          cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError(f"claude exited {done.returncode}: {done.stdout[-2000:]}"
                             f"{done.stderr[-2000:]}") from None


def fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder
