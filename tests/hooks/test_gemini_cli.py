"""The real Gemini CLI gated by toolgate (SPEC §20), headless against the scripted Gemini
API (tests/hooks/gemini_api.py), under the settings docs/coding-agents.md section 9
documents: `toolgate hook gemini-cli` before and after every tool, the key in a file,
timeouts in milliseconds, `--approval-mode yolo` so that toolgate is the only gate.

One `toolgate serve` for the module (SQLite: the route is the same one, run on both
databases in tests/hooks/test_gemini.py), with examples/gemini-cli.yaml applied as a user
applies it; each case is one `gemini -p` run (about 5 s) in a fresh project."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.hooks.claude import session_plan_id
from tests.hooks.claude_cli import fresh
from tests.hooks.fake_service import FakeService
from tests.hooks.gemini_api import GeminiAPI, Script
from tests.hooks.gemini_cli import command_hooks, hook_command, require_gemini, run_gemini
from tests.serving import TOOLGATE, free_port, serve, stop

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("gemini-cli")]

ADMIN = "tg_gemini_admin_token"
ROOT = Path(__file__).resolve().parents[2]


def admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"},
                        timeout=30)


@pytest.fixture(scope="module")
def toolgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require_gemini()
    folder = tmp_path_factory.mktemp("toolgate")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{folder}/toolgate.db",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN}, folder / "server.log", timeout=180)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=ADMIN)
        applied = subprocess.run([TOOLGATE, "apply", "-f", "examples/gemini-cli.yaml"],
                                 cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=120)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        with admin(url) as c:
            r = c.post("/v1/keys", json={"name": "gemini-cli", "role": "agent",
                                         "projects": ["agents"]})
            assert r.status_code == 201, r.text
        key_file = folder / "gemini-cli.key"
        key_file.write_text(r.json()["key"] + "\n")
        key_file.chmod(0o600)
        yield {"url": url, "key_file": str(key_file)}
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def model() -> Iterator[GeminiAPI]:
    with GeminiAPI() as api:
        yield api


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return fresh(tmp_path / "project")


def one_run(model: GeminiAPI, marker: str, script: Script, project: Path, url: str,
            key_file: str, *, hook_args: tuple[str, ...] = (), extra: tuple[str, ...] = (),
            **env: str) -> dict:
    settings = command_hooks(hook_command(TOOLGATE, url, key_file, *hook_args))
    prompt = model.script(marker, script)
    return run_gemini(project, project.parent / "home", settings, prompt, api=model.url,
                      extra=list(extra), more_env=env)


def decisions(url: str, session_id: str) -> list[dict]:
    with admin(url) as c:
        r = c.get("/v1/decisions", params={"plan_id": session_plan_id(session_id)})
        assert r.status_code == 200, r.text
        return [d for d in r.json()["items"] if d["kind"] == "authorize"]


def output_of(script: Script) -> str:
    [response] = script.responses
    return str(response["response"])


def test_an_allowed_write_runs_and_its_outcome_is_booked_in_ci(toolgate, model, project):
    """With GITHUB_SHA set Gemini CLI strips every variable but a few from the hook's
    environment (TOOLGATE_TOKEN and TOOLGATE_URL included): the key file and --url on the
    command line still reach toolgate."""
    target = project / "hello.txt"
    script = Script("write_file", {"file_path": str(target), "content": "hello\n"})
    result = one_run(model, "WRITE-OK", script, project, toolgate["url"],
                     toolgate["key_file"], GITHUB_SHA="0" * 40, TOOLGATE_TOKEN="stripped")
    assert target.read_text() == "hello\n", output_of(script)
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert (decision["tool"], decision["allowed"]) == ("write_file", True)
    assert decision["detail"]["agent"] == "gemini-cli"
    assert decision["detail"]["context"]["sandbox_root"] == str(project)
    with admin(toolgate["url"]) as c:
        stored = c.get(f"/v1/decisions/{decision['decision_id']}").json()
        by_agent = c.get("/v1/decisions", params={"agent": "gemini-cli"}).json()["items"]
    assert stored["outcome"]["status"] == "succeeded"
    assert stored["outcome"]["args_mismatch"] is False
    assert decision["decision_id"] in [d["decision_id"] for d in by_agent]


def test_a_denied_shell_command_does_not_run(toolgate, model, project):
    marker = project / "shell-ran"
    script = Script("run_shell_command", {"command": f"touch {marker}",
                                          "description": "touch a file"})
    result = one_run(model, "SHELL", script, project, toolgate["url"], toolgate["key_file"])
    assert not marker.exists()
    said = output_of(script)
    assert "ToolSafetyViolationError (unsafe_tool)" in said, said
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert (decision["tool"], decision["code"]) == ("run_shell_command", "unsafe_tool")
    assert f"[decision {decision['decision_id']}]" in said


def test_an_include_directory_named_with_root_is_a_sandbox_root(toolgate, model, project):
    """`--include-directories DIR` lets Gemini CLI write in DIR; `--root DIR` on the hook
    lets toolgate decide such a write under DIR (docs/coding-agents.md section 9)."""
    shared = fresh(project.parent / "shared")
    target = shared / "notes.md"
    script = Script("write_file", {"file_path": str(target), "content": "shared\n"})
    result = one_run(model, "INCLUDED", script, project, toolgate["url"],
                     toolgate["key_file"], hook_args=("--root", str(shared)),
                     extra=("--include-directories", str(shared)))
    assert target.exists(), output_of(script)
    assert target.read_text() == "shared\n"
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert decision["allowed"] is True
    assert decision["detail"]["context"]["sandbox_root"] == str(shared)


def test_toolgate_stopped_the_tool_does_not_run(toolgate, model, project):
    down = f"http://127.0.0.1:{free_port()}"  # nothing listens: a stopped toolgate
    target = project / "written.txt"
    script = Script("write_file", {"file_path": str(target), "content": "x"})
    one_run(model, "DOWN", script, project, down, toolgate["key_file"])
    assert not target.exists()
    assert "ToolgateUnavailableError" in output_of(script)


def test_a_hung_toolgate_blocks_before_gemini_clis_timeout(model, project, toolgate):
    """A service that never answers: the hook's deadline (10 s) ends it with exit 2 well
    before the documented timeout (30000 ms), which Gemini CLI would take as "run it"."""
    target = project / "hung.txt"
    script = Script("write_file", {"file_path": str(target), "content": "x"})
    with FakeService() as hung:
        one_run(model, "HUNG", script, project, f"{hung.url}/hang", toolgate["key_file"])
    assert not target.exists()
    assert "within the hook's deadline of 10 s" in output_of(script)
