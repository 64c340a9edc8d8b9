"""The real Qwen Code CLI (npm `@qwen-code/qwen-code`, pinned in tests/agents/package.json)
gated by toolgate (SPEC §20), headless (`qwen -p`) against the scripted Chat Completions API,
under the hooks docs/coding-agents.md documents: `toolgate hook qwen-code` (command hooks)
or POST /v1/hooks/claude-code?agent=qwen-code (Qwen Code's HTTP hooks) on every tool.

One `toolgate serve` (SQLite) for the module, examples/qwen-code.yaml applied with
`toolgate apply`; each case is one `qwen -p` in a fresh project and home (the real CLI on
one database: tests/agents/test_payloads.py runs the same bodies on both)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.agents.clis import (
    HOOK_TIMEOUT,
    Run,
    concurrently,
    hook_command,
    key_file,
    qwen_settings,
    require,
    run_qwen,
)
from tests.agents.openai_api import OpenAIAPI, Script
from tests.agents.served import decisions, stored, toolgate_with
from tests.serving import TOOLGATE, free_port

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def toolgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require("qwen")
    with toolgate_with("examples/qwen-code.yaml",
                       tmp_path_factory.mktemp("toolgate")) as served:
        yield served


@pytest.fixture(scope="module")
def model() -> Iterator[OpenAIAPI]:
    with OpenAIAPI() as api:
        yield api


def session_of(run: Run) -> str:
    try:
        events = json.loads(run.stdout)
    except ValueError:
        events = run.json_lines()
    ids = {e.get("session_id") for e in events if isinstance(e, dict)} - {None}
    assert len(ids) == 1, f"qwen exited {run.returncode}: {run.stdout[-2000:]}{run.stderr[-2000:]}"
    return ids.pop()


def hook(form: str, url: str, token_file: Path) -> dict:
    """The documented hook of each form: the command, or Qwen Code's HTTP hook."""
    if form == "command":
        return {"type": "command", "timeout": HOOK_TIMEOUT,
                "command": hook_command(TOOLGATE, "qwen-code", url, token_file)}
    return {"type": "http", "timeout": HOOK_TIMEOUT,
            "url": f"{url}/v1/hooks/claude-code?agent=qwen-code&action=coding",
            "headers": {"Authorization": "Bearer ${TOOLGATE_TOKEN}"},
            "allowedEnvVars": ["TOOLGATE_TOKEN"]}


def one_run(model: OpenAIAPI, toolgate: dict, tmp_path: Path, marker: str, script: Script,
            *, form: str = "command", url: str | None = None) -> tuple[str, Path]:
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    qwen_settings(home, hook(form, url or toolgate["url"],
                             key_file(tmp_path, toolgate["token"])))
    run = run_qwen(project, home, model.url, model.script(marker, script),
                   more_env={"TOOLGATE_TOKEN": toolgate["token"]})
    return session_of(run), project


def write(path: Path, text: str, call: str) -> Script:
    return Script("write_file", {"file_path": str(path), "content": text}, call)


# Each case: its hook form and the scripted call, made in the case's own folder.
CASES = {
    "shell-command": ("command", lambda tmp: Script(
        "run_shell_command", {"command": f"touch {tmp / 'shell-ran'}"}, "call_qwen_sh_c")),
    "shell-http": ("http", lambda tmp: Script(
        "run_shell_command", {"command": f"touch {tmp / 'shell-ran'}"}, "call_qwen_sh_h")),
    "write-command": ("command", lambda tmp: write(tmp / "project" / "hello.txt", "hello\n",
                                                   "call_qwen_write_c")),
    "write-http": ("http", lambda tmp: write(tmp / "project" / "hello.txt", "hello\n",
                                             "call_qwen_write_h")),
    "escape": ("command", lambda tmp: write(tmp / "outside.txt", "x", "call_qwen_escape")),
    "down": ("command", lambda tmp: write(tmp / "project" / "written.txt", "x",
                                          "call_qwen_down")),
}


@pytest.fixture(scope="module")
def runs(toolgate, model, tmp_path_factory) -> dict:
    """Every case's `qwen -p`, all at once: {case: (folder, script, session, project)}."""
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: a stopped toolgate

    def case(name: str):
        form, script_of = CASES[name]
        folder = tmp_path_factory.mktemp(f"qwen-{name}")
        script = script_of(folder)

        def run() -> tuple:
            return (folder, script, *one_run(model, toolgate, folder, f"QWEN-{name}", script,
                                             form=form, url=down if name == "down" else None))
        return run

    return concurrently({name: case(name) for name in CASES})


def result(runs: dict, name: str) -> tuple:
    if isinstance(runs[name], Exception):
        raise runs[name]
    return runs[name]


@pytest.mark.parametrize("form", ["command", "http"])
def test_a_denied_shell_command_does_not_run(toolgate, runs, form):
    folder, script, session, _ = result(runs, f"shell-{form}")
    assert not (folder / "shell-ran").exists()
    [output] = script.outputs  # what the model was told instead
    assert "ToolSafetyViolationError (unsafe_tool)" in output
    [decision] = decisions(toolgate["url"], session)
    assert (decision["tool"], decision["code"]) == ("run_shell_command", "unsafe_tool")
    assert decision["detail"]["agent"] == "qwen-code"


@pytest.mark.parametrize("form", ["command", "http"])
def test_an_allowed_write_is_made_and_its_outcome_booked(toolgate, runs, form):
    _, script, session, project = result(runs, f"write-{form}")
    assert (project / "hello.txt").exists(), script.outputs
    assert (project / "hello.txt").read_text() == "hello\n"
    [decision] = decisions(toolgate["url"], session)
    assert (decision["tool"], decision["allowed"]) == ("write_file", True)
    assert decision["detail"]["agent"] == "qwen-code"
    assert decision["detail"]["context"]["sandbox_root"] == str(project)
    record = stored(toolgate["url"], decision["decision_id"])
    assert record["outcome"]["status"] == "succeeded"
    assert record["outcome"]["args_mismatch"] is False


def test_a_write_outside_the_project_is_a_sandbox_escape(toolgate, runs):
    folder, script, session, _ = result(runs, "escape")
    assert not (folder / "outside.txt").exists()
    [output] = script.outputs
    assert "ToolSandboxEscapeError (sandbox_path_escape)" in output
    [decision] = decisions(toolgate["url"], session)
    assert decision["code"] == "sandbox_path_escape"


def test_toolgate_stopped_the_tool_does_not_run(runs):
    """The command form: a hook that cannot reach toolgate exits 2, which Qwen Code reads
    as blocked even in yolo mode. (Its HTTP hook's failure is not a block: the docs say
    when that form may be used.)"""
    _, script, _, project = result(runs, "down")
    assert not (project / "written.txt").exists()
    [output] = script.outputs
    assert "ToolgateUnavailableError" in output
