"""The real Codex CLI (npm `@openai/codex`, pinned in tests/agents/package.json) gated by
toolgate (SPEC §20), headless (`codex exec`) against the scripted Responses API, under the
hooks docs/coding-agents.md documents: `toolgate hook codex` before and after every tool.

One `toolgate serve` (SQLite) for the module, examples/codex.yaml applied with `toolgate
apply`; each case is one `codex exec` in a fresh project and home. The real CLI runs on one
database: what it adds over tests/agents/test_payloads.py (both databases) is the agent's
own reading of the hook's answer, which no database changes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.clis import (
    codex_settings,
    concurrently,
    hook_command,
    key_file,
    require,
    run_codex,
)
from tests.agents.openai_api import OpenAIAPI, Script
from tests.agents.served import decisions, stored, toolgate_with
from tests.serving import TOOLGATE, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toolgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require("codex")
    with toolgate_with("examples/codex.yaml", tmp_path_factory.mktemp("toolgate")) as served:
        yield served


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIAPI]:
    with OpenAIAPI() as api:
        yield api


def one_run(model: OpenAIAPI, toolgate: dict, tmp_path: Path, marker: str, script: Script,
            *, url: str | None = None) -> tuple[str, Path]:
    """(the session id, the project) of one `codex exec` of `script`."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    hook = hook_command(TOOLGATE, "codex", url or toolgate["url"],
                        key_file(tmp_path, toolgate["token"]))
    codex_settings(home, model.url, hook)
    run = run_codex(project, home, model.script(marker, script))
    started = [e for e in run.json_lines() if e.get("type") == "thread.started"]
    assert started, f"codex exited {run.returncode}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    return started[0]["thread_id"], project




def patch(path: Path, text: str) -> str:
    return f"*** Begin Patch\n*** Add File: {path}\n+{text}\n*** End Patch\n"


# Each case: the scripted call, made in the case's own folder (its project is `project`).
CASES = {
    "shell": lambda tmp: Script("exec_command", {"cmd": f"touch {tmp / 'shell-ran'}"},
                                "call_codex_shell"),
    "write": lambda tmp: Script("apply_patch", patch(tmp / "project" / "hello.txt", "hello"),
                                "call_codex_write"),
    "escape": lambda tmp: Script("apply_patch", patch(tmp / "outside.txt", "x"),
                                 "call_codex_escape"),
    "down": lambda tmp: Script("apply_patch", patch(tmp / "project" / "written.txt", "x"),
                               "call_codex_down"),
}


@pytest.fixture(scope="module")
def runs(toolgate, model, tmp_path_factory) -> dict:
    """Every case's `codex exec`, all at once: {case: (folder, script, session, project)}."""
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: a stopped toolgate

    def case(name: str):
        folder = tmp_path_factory.mktemp(f"codex-{name}")
        script = CASES[name](folder)

        def run() -> tuple:
            return (folder, script, *one_run(model, toolgate, folder, f"CODEX-{name}", script,
                                             url=down if name == "down" else None))
        return run

    return concurrently({name: case(name) for name in CASES})


def result(runs: dict, name: str) -> tuple:
    if isinstance(runs[name], Exception):
        raise runs[name]
    return runs[name]


def test_a_denied_shell_command_does_not_run(toolgate, runs):
    folder, script, session, _ = result(runs, "shell")
    assert not (folder / "shell-ran").exists()
    [output] = script.outputs  # what the model was told instead
    assert "ToolSafetyViolationError (unsafe_tool)" in output
    [decision] = decisions(toolgate["url"], session)
    assert (decision["tool"], decision["code"]) == ("Bash", "unsafe_tool")
    assert decision["detail"]["agent"] == "codex"
    assert f"[decision {decision['decision_id']}]" in output


def test_an_allowed_patch_is_made_and_its_outcome_booked(toolgate, runs):
    _, script, session, project = result(runs, "write")
    assert (project / "hello.txt").exists(), script.outputs
    assert (project / "hello.txt").read_text() == "hello\n"
    [decision] = decisions(toolgate["url"], session)
    assert (decision["tool"], decision["allowed"]) == ("apply_patch", True)
    assert decision["detail"]["agent"] == "codex"
    assert decision["detail"]["context"]["sandbox_root"] == str(project)
    assert decision["detail"]["tool"]["args"]["paths"] == [str(project / "hello.txt")]
    record = stored(toolgate["url"], decision["decision_id"])
    assert record["outcome"]["status"] == "succeeded"
    assert record["outcome"]["args_mismatch"] is False


def test_a_patch_outside_the_project_is_a_sandbox_escape(toolgate, runs):
    folder, script, session, _ = result(runs, "escape")
    assert not (folder / "outside.txt").exists()
    [output] = script.outputs
    assert "ToolSandboxEscapeError (sandbox_path_escape)" in output
    [decision] = decisions(toolgate["url"], session)
    assert decision["code"] == "sandbox_path_escape"


def test_toolgate_stopped_the_tool_does_not_run(runs):
    _, script, _, project = result(runs, "down")
    assert not (project / "written.txt").exists()
    [output] = script.outputs
    assert "ToolgateUnavailableError" in output
