"""Running the real Codex CLI, Qwen Code and GitHub Copilot CLI (npm, pinned in
tests/agents/package.json, installed by `.ci/run`) headless against the scripted model API
(tests/agents/openai_api.py), each in a scratch home whose settings hold the hooks under
test: exactly the settings docs/coding-agents.md tells users to write, with telemetry,
update checks and the agent's own permissions as the docs say."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
BIN = HERE / "node_modules" / ".bin"
REQUIRE_ENV = "TOOLGATE_REQUIRE_AGENT_CLIS"
HOOK_TIMEOUT = 30  # seconds, every agent's hook timeout in the documented settings
DEADLINE = 10  # `toolgate hook --deadline`, below it


def require(cli: str) -> str:
    """The CLI's path; skips (fails under TOOLGATE_REQUIRE_AGENT_CLIS=1, as `.ci/run` sets
    it) when `npm ci --prefix tests/agents` has not been run."""
    path = BIN / cli
    if path.exists():
        return str(path)
    message = (f"the {cli} CLI is not installed: run "
               "`npm ci --prefix tests/agents --no-audit --no-fund`")
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message)
    pytest.skip(message)


def hook_command(toolgate: str, agent: str, url: str, token_file: Path) -> str:
    """The documented command: `toolgate hook <agent> --url ... --key-file ... --action
    coding --deadline 10` (a key file: no agent here has to pass TOOLGATE_TOKEN on)."""
    return (f"{toolgate} hook {agent} --url {url} --key-file {token_file} --action coding "
            f"--deadline {DEADLINE}")


def key_file(folder: Path, token: str) -> Path:
    path = folder / "toolgate.key"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str

    def json_lines(self) -> list[Any]:
        out = []
        for line in self.stdout.splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out


MAX_AT_ONCE = 3  # CLI runs at once: more, on a loaded 2-core machine, and hooks near 10 s


def concurrently(cases: dict[str, Callable[[], Any]]) -> dict[str, Any]:
    """The cases run MAX_AT_ONCE at a time, each in its own thread (each is one CLI
    process, waiting on the model API and its hooks): its result, or the exception it
    raised, by name."""
    def guarded(case: Callable[[], Any]) -> Any:
        try:
            return case()
        except Exception as exc:  # reported by the test that reads it
            return exc

    with ThreadPoolExecutor(max_workers=min(MAX_AT_ONCE, len(cases))) as pool:
        futures = {name: pool.submit(guarded, case) for name, case in cases.items()}
        return {name: future.result() for name, future in futures.items()}


def _base_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "LANG": "C.UTF-8", "NO_COLOR": "1"}


def _run(argv: list[str], *, cwd: Path, env: dict[str, str], timeout: float) -> Run:
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout, done.stderr)


# --- Codex CLI --------------------------------------------------------------------------

def codex_settings(home: Path, api: str, hook: str) -> None:
    """~/.codex: config.toml (the scripted API as a Responses provider, no update check, no
    analytics) and hooks.json (toolgate on every tool, before and after)."""
    codex = home / ".codex"
    codex.mkdir(parents=True, exist_ok=True)
    (codex / "config.toml").write_text(
        # gpt-5.5: a model Codex 0.171 knows that offers apply_patch and plain function tools.
        'model = "gpt-5.5"\nmodel_provider = "scripted"\n'
        "check_for_update_on_startup = false\n"
        "[analytics]\nenabled = false\n"
        "[model_providers.scripted]\n"
        f'name = "scripted"\nbase_url = "{api}/v1"\nwire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n')
    every = [{"matcher": "*", "hooks": [{"type": "command", "command": hook,
                                          "timeout": HOOK_TIMEOUT}]}]
    (codex / "hooks.json").write_text(json.dumps({"hooks": {"PreToolUse": every,
                                                            "PostToolUse": every}}))


def run_codex(project: Path, home: Path, prompt: str, *, timeout: float = 90) -> Run:
    """`codex exec`, Codex's own sandbox and approvals off (toolgate is the only gate), the
    hooks run without Codex's interactive review of them (`--dangerously-bypass-hook-trust`,
    docs/coding-agents.md says why)."""
    env = {**_base_env(home), "CODEX_HOME": str(home / ".codex"),
           "OPENAI_API_KEY": "sk-test-dummy"}
    return _run([require("codex"), "exec", "--json", "--skip-git-repo-check",
                 "--dangerously-bypass-hook-trust",
                 "--dangerously-bypass-approvals-and-sandbox", prompt],
                cwd=project, env=env, timeout=timeout)


# --- Qwen Code --------------------------------------------------------------------------

def qwen_settings(home: Path, hook: dict[str, Any]) -> None:
    """~/.qwen/settings.json: no update check, no statistics or telemetry, toolgate's hook
    on every tool before and after (a failure too)."""
    every = [{"matcher": ".*", "hooks": [hook]}]
    settings = {"general": {"enableAutoUpdate": False},
                "privacy": {"usageStatisticsEnabled": False},
                "telemetry": {"enabled": False},
                # No background agents of its own asking the scripted model.
                "memory": {"enableManagedAutoMemory": False, "enableManagedAutoDream": False,
                           "enableAutoSkill": False},
                "hooks": {"PreToolUse": every, "PostToolUse": every,
                          "PostToolUseFailure": every}}
    (home / ".qwen").mkdir(parents=True, exist_ok=True)
    (home / ".qwen" / "settings.json").write_text(json.dumps(settings))


def run_qwen(project: Path, home: Path, api: str, prompt: str, *,
             more_env: dict[str, str] | None = None, timeout: float = 90) -> Run:
    """`qwen -p`, yolo: headless, Qwen Code offers its writing tools only in yolo mode, so
    toolgate is the only gate (docs/coding-agents.md)."""
    env = {**_base_env(home), "OPENAI_BASE_URL": f"{api}/v1", "OPENAI_API_KEY": "sk-dummy",
           "OPENAI_MODEL": "scripted-model", "QWEN_CODE_SUPPRESS_YOLO_WARNING": "1",
           "QWEN_TELEMETRY_ENABLED": "false", "QWEN_USAGE_STATISTICS_ENABLED": "false",
           **(more_env or {})}
    return _run([require("qwen"), "-p", prompt, "--auth-type", "openai",
                 "--approval-mode", "yolo", "--output-format", "json"],
                cwd=project, env=env, timeout=timeout)


# --- GitHub Copilot CLI -----------------------------------------------------------------

def copilot_settings(home: Path, hook: str) -> None:
    """~/.copilot/hooks/toolgate.json: toolgate on every tool, before and after."""
    every = [{"type": "command", "bash": hook, "timeoutSec": HOOK_TIMEOUT}]
    hooks = home / ".copilot" / "hooks"
    hooks.mkdir(parents=True, exist_ok=True)
    (hooks / "toolgate.json").write_text(json.dumps(
        {"version": 1, "hooks": {"preToolUse": every, "postToolUse": every}}))


def run_copilot(project: Path, home: Path, api: str, prompt: str, *,
                timeout: float = 90) -> Run:
    """`copilot -p` with a BYOK provider (the scripted Chat Completions API) offline: no
    GitHub sign-in, no telemetry, no update. No --allow-all-tools: toolgate's allow is the
    only permission, so a hook that cannot answer leaves the call unapproved."""
    env = {**_base_env(home), "COPILOT_PROVIDER_BASE_URL": f"{api}/v1",
           # Where the binary unpacks its package (150 MB) on a first run: once, not per home.
           "COPILOT_CACHE_HOME": str(HERE / "node_modules" / ".cache" / "copilot"),
           "COPILOT_PROVIDER_API_KEY": "sk-dummy", "COPILOT_MODEL": "scripted-model",
           "COPILOT_OFFLINE": "true", "COPILOT_AUTO_UPDATE": "false"}
    return _run([require("copilot"), "-p", prompt, "--disable-client-telemetry",
                 "--no-color"], cwd=project, env=env, timeout=timeout)
