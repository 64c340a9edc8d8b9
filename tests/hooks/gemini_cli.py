"""Running the real Gemini CLI (npm `@google/gemini-cli`, pinned in tests/hooks/package.json,
installed by `.ci/run`) headless against the scripted Gemini API (tests/hooks/gemini_api.py),
with the hooks under test in the user's settings (`$HOME/.gemini/settings.json`), as
docs/coding-agents.md section 9 documents them."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
GEMINI = HERE / "node_modules" / ".bin" / "gemini"
REQUIRE_ENV = "TOOLGATE_REQUIRE_GEMINI_CLI"
# Gemini CLI's own settings for a quiet, local run: no telemetry, no usage statistics, no
# update check, the API key as its auth.
QUIET = {"general": {"disableAutoUpdate": True, "disableUpdateNag": True},
         "telemetry": {"enabled": False}, "privacy": {"usageStatisticsEnabled": False},
         "security": {"auth": {"selectedType": "gemini-api-key"}}}


def require_gemini() -> str:
    """The CLI's path; skips (fails under TOOLGATE_REQUIRE_GEMINI_CLI=1, as `.ci/run` sets
    it) when `npm ci --prefix tests/hooks` has not been run."""
    if GEMINI.exists():
        return str(GEMINI)
    message = ("the Gemini CLI is not installed: run "
               "`npm ci --prefix tests/hooks --no-audit --no-fund`")
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def command_hooks(command: str) -> dict[str, Any]:
    """The documented settings: toolgate's command hook before and after every tool, its
    timeout in milliseconds (30 s), above the hook's own deadline (10 s)."""
    every = [{"matcher": ".*", "hooks": [{"type": "command", "command": command,
                                          "timeout": 30000}]}]
    return {"hooks": {"BeforeTool": every, "AfterTool": every}}


def hook_command(toolgate: str, url: str, key_file: str, *args: str) -> str:
    return " ".join([toolgate, "hook", "gemini-cli", "--url", url, "--key-file", key_file,
                     "--action", "coding", *args])


def run_gemini(project: Path, home: Path, settings: dict[str, Any], prompt: str, *,
               api: str, extra: list[str] = (), timeout: float = 120,
               more_env: dict[str, str] | None = None) -> dict[str, Any]:
    """One headless run in `project` (its cwd), yolo (headless, Gemini CLI offers its
    writing tools only so); Gemini CLI's JSON result."""
    gemini = require_gemini()
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({**QUIET, **settings}))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
        "GEMINI_API_KEY": "dummy-gemini-key", "GOOGLE_GEMINI_BASE_URL": api,
        "GEMINI_CLI_NO_RELAUNCH": "true", "NO_COLOR": "1", **(more_env or {}),
    }
    done = subprocess.run([gemini, "-p", prompt, "--approval-mode", "yolo", "--skip-trust",
                           "--output-format", "json", "-m", "gemini-2.5-flash", *extra],
                          cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    try:
        return json.loads(done.stdout[done.stdout.index("{"):])
    except ValueError:
        raise AssertionError(f"gemini exited {done.returncode}: {done.stdout[-2000:]}"
                             f"{done.stderr[-2000:]}") from None
