"""The real GitHub Copilot CLI (npm `@github/copilot`, pinned in tests/agents/package.json)
gated by toolgate (SPEC §20), headless (`copilot -p`) with a BYOK provider, the scripted
Chat Completions API, offline (no GitHub sign-in), under the hooks docs/coding-agents.md
documents: `toolgate hook copilot-cli` before and after every tool, no --allow-all-tools.

One `toolgate serve` (SQLite) for the module, examples/copilot-cli.yaml applied with
`toolgate apply`; each case is one `copilot -p` in a fresh project and home (the real CLI
on one database: tests/agents/test_payloads.py runs the same bodies on both)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.hooks import copilot
from tests.agents.clis import (
    concurrently,
    copilot_settings,
    hook_command,
    key_file,
    require,
    run_copilot,
)
from tests.agents.openai_api import OpenAIAPI, Script
from tests.agents.served import decisions, stored, toolgate_with
from tests.serving import TOOLGATE, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toolgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require("copilot")
    with toolgate_with("examples/copilot-cli.yaml",
                       tmp_path_factory.mktemp("toolgate")) as served:
        yield served


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIAPI]:
    with OpenAIAPI() as api:
        yield api


def one_run(model: OpenAIAPI, toolgate: dict, tmp_path: Path, marker: str, script: Script,
            *, url: str | None = None) -> tuple[str, Path]:
    """(the run's output, the project) of one `copilot -p` of `script`."""
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    copilot_settings(home, hook_command(TOOLGATE, "copilot-cli", url or toolgate["url"],
                                        key_file(tmp_path, toolgate["token"])))
    run = run_copilot(project, home, model.url, model.script(marker, script))
    assert script.outputs, (f"copilot exited {run.returncode}: {run.stdout[-2000:]}"
                            f"{run.stderr[-2000:]}")
    return run.stdout, project


def session_decisions(toolgate: dict, project: Path) -> list[dict]:
    """Copilot CLI names its session in its hook bodies only: found through the log."""
    sessions = (project.parent / "home" / ".copilot" / "session-state")
    ids = [p.name for p in sessions.iterdir()] if sessions.is_dir() else []
    found = [d for s in ids for d in decisions(toolgate["url"], s)]
    assert found, f"no decision of the sessions {ids}"
    return found


def create(path: Path, text: str, call: str) -> Script:
    return Script("create", {"path": str(path), "file_text": text}, call)


# Each case: the scripted call, made in the case's own folder (its project is `project`).
CASES = {
    "shell": lambda tmp: Script("bash", {"command": f"touch {tmp / 'shell-ran'}",
                                         "description": "touch"}, "call_copilot_shell"),
    "write": lambda tmp: create(tmp / "project" / "hello.txt", "hello\n", "call_copilot_write"),
    "escape": lambda tmp: create(tmp / "outside.txt", "x", "call_copilot_escape"),
    "down": lambda tmp: create(tmp / "project" / "written.txt", "x", "call_copilot_down"),
}


@pytest.fixture(scope="module")
def runs(toolgate, model, tmp_path_factory) -> dict:
    """Every case's `copilot -p`, all at once: {case: (folder, script, output, project)}."""
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: a stopped toolgate

    def case(name: str):
        folder = tmp_path_factory.mktemp(f"copilot-{name}")
        script = CASES[name](folder)

        def run() -> tuple:
            return (folder, script, *one_run(model, toolgate, folder, f"COPILOT-{name}",
                                             script, url=down if name == "down" else None))
        return run

    return concurrently({name: case(name) for name in CASES})


def result(runs: dict, name: str) -> tuple:
    if isinstance(runs[name], Exception):
        raise runs[name]
    return runs[name]


def test_a_denied_shell_command_does_not_run(toolgate, runs):
    folder, script, _, project = result(runs, "shell")
    assert not (folder / "shell-ran").exists()
    [output] = script.outputs  # what the model was told instead
    assert "ToolSafetyViolationError (unsafe_tool)" in output
    [decision] = session_decisions(toolgate, project)
    assert (decision["tool"], decision["code"]) == ("bash", "unsafe_tool")
    assert decision["detail"]["agent"] == "copilot-cli"


def test_an_allowed_write_is_made_and_its_outcome_booked(toolgate, runs):
    _, script, _, project = result(runs, "write")
    assert (project / "hello.txt").exists(), script.outputs
    assert (project / "hello.txt").read_text() == "hello\n"
    [decision] = session_decisions(toolgate, project)
    assert (decision["tool"], decision["allowed"]) == ("create", True)
    assert decision["detail"]["agent"] == "copilot-cli"
    assert decision["detail"]["context"]["sandbox_root"] == str(project)
    metadata = decision["detail"]["context"]["metadata"]
    assert metadata["tool_use_id"] == copilot.call_id(
        {"sessionId": metadata["session_id"], "toolName": "create"}, script.arguments)
    record = stored(toolgate["url"], decision["decision_id"])
    assert record["outcome"]["status"] == "succeeded"
    assert record["outcome"]["args_mismatch"] is False


def test_a_write_outside_the_project_is_a_sandbox_escape(toolgate, runs):
    folder, script, _, project = result(runs, "escape")
    assert not (folder / "outside.txt").exists()
    [output] = script.outputs
    assert "ToolSandboxEscapeError (sandbox_path_escape)" in output
    [decision] = session_decisions(toolgate, project)
    assert decision["code"] == "sandbox_path_escape"


def test_toolgate_stopped_the_tool_does_not_run(runs):
    _, script, _, project = result(runs, "down")
    assert not (project / "written.txt").exists()
    [output] = script.outputs
    assert "ToolgateUnavailableError" in output
