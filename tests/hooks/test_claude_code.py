"""The real Claude Code CLI gated by toolgate (SPEC §15), headless against the scripted
Messages API (tests/hooks/messages_api.py), under the settings docs/coding-agents.md
documents: toolgate's hooks on every tool, no allow rules of Claude Code's own.

One `toolgate serve` for the module, with examples/claude-code.yaml applied as a user
applies it (`toolgate apply`); each case is one `claude -p` run in a fresh project."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.hooks.claude import session_plan_id
from tests.hooks.claude_cli import command_hooks, fresh, http_hooks, require_claude, run_claude
from tests.hooks.messages_api import MessagesAPI, Script
from tests.serving import TOOLGATE, free_port, serve, stop

pytestmark = pytest.mark.slow

ADMIN = "tg_hooks_admin_token"
ROOT = Path(__file__).resolve().parents[2]


def admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"},
                        timeout=30)


@pytest.fixture(scope="module")
def toolgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    require_claude()
    folder = tmp_path_factory.mktemp("toolgate")
    proc, url = serve({"TOOLGATE_DATABASE_URL": f"sqlite+aiosqlite:///{folder}/toolgate.db",
                       "TOOLGATE_ADMIN_TOKEN": ADMIN}, folder / "server.log", timeout=180)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
        env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=ADMIN)
        applied = subprocess.run([TOOLGATE, "apply", "-f", "examples/claude-code.yaml"],
                                 cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=120)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        with admin(url) as c:
            r = c.post("/v1/keys", json={"name": "claude-code", "role": "agent",
                                         "projects": ["agents"]})
            assert r.status_code == 201, r.text
        yield {"url": url, "token": r.json()["key"]}
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def model() -> Iterator[MessagesAPI]:
    with MessagesAPI() as api:
        yield api


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return fresh(tmp_path / "project")


def settings_for(form: str, url: str) -> dict:
    if form == "http":
        return http_hooks(url, "action=coding")
    return command_hooks(TOOLGATE, url, "--action", "coding")


def decisions(url: str, session_id: str) -> list[dict]:
    with admin(url) as c:
        r = c.get("/v1/decisions", params={"plan_id": session_plan_id(session_id)})
        assert r.status_code == 200, r.text
        return [d for d in r.json()["items"] if d["kind"] == "authorize"]


def one_run(model: MessagesAPI, marker: str, script: Script, project: Path,
            settings: dict, token: str) -> dict:
    prompt = model.script(marker, script)
    return run_claude(project, project.parent / "home", settings, prompt, api=model.url,
                      token=token)


def test_an_allowed_write_runs_and_its_outcome_is_in_the_log(toolgate, model, project):
    target = project / "hello.txt"
    script = Script("Write", {"file_path": str(target), "content": "hello\n"}, "toolu_w_ok")
    result = one_run(model, "WRITE-OK", script, project, http_hooks(toolgate["url"],
                                                                     "action=coding"),
                     toolgate["token"])
    assert target.read_text() == "hello\n"
    assert result["permission_denials"] == []
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert decision["tool"] == "Write" and decision["allowed"] is True
    assert decision["detail"]["context"]["sandbox_root"] == str(project)
    with admin(toolgate["url"]) as c:
        stored = c.get(f"/v1/decisions/{decision['decision_id']}").json()
    assert stored["outcome"]["status"] == "succeeded"
    assert stored["outcome"]["args_mismatch"] is False


@pytest.mark.parametrize("form", ["http", "command"])
def test_a_denied_bash_does_not_run_and_the_model_reads_class_and_code(
        toolgate, model, project, form):
    marker = project / "bash-ran"
    script = Script("Bash", {"command": f"touch {marker}", "description": "touch"},
                    f"toolu_bash_{form}")
    result = one_run(model, f"BASH-{form}", script, project,
                     settings_for(form, toolgate["url"]), toolgate["token"])
    assert not marker.exists()
    [tool_result] = script.results
    assert tool_result["is_error"] is True
    assert "ToolSafetyViolationError (unsafe_tool)" in str(tool_result["content"])
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert decision["code"] == "unsafe_tool"
    assert f"[decision {decision['decision_id']}]" in str(tool_result["content"])


def test_a_write_outside_cwd_is_denied_sandbox_path_escape(toolgate, model, project):
    outside = project.parent / "outside.txt"
    script = Script("Write", {"file_path": str(outside), "content": "x"}, "toolu_escape")
    result = one_run(model, "WRITE-ESCAPE", script, project,
                     http_hooks(toolgate["url"], "action=coding"), toolgate["token"])
    assert not outside.exists()
    [tool_result] = script.results
    assert tool_result["is_error"] is True
    assert "ToolSandboxEscapeError (sandbox_path_escape)" in str(tool_result["content"])
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert decision["code"] == "sandbox_path_escape"


@pytest.mark.parametrize("form", ["http", "command"])
def test_toolgate_stopped_the_tool_does_not_run(toolgate, model, project, form):
    # Nothing listens here: what a stopped toolgate looks like to the hook.
    down = f"http://127.0.0.1:{free_port()}"
    target = project / "written.txt"
    script = Script("Write", {"file_path": str(target), "content": "x"}, f"toolu_down_{form}")
    result = one_run(model, f"DOWN-{form}", script, project, settings_for(form, down),
                     toolgate["token"])
    assert not target.exists()
    assert [d["tool_name"] for d in result["permission_denials"]] == ["Write"]
    [tool_result] = script.results
    assert tool_result["is_error"] is True


def test_a_call_toolgate_cannot_decide_is_denied_by_the_real_cli(toolgate, model, project):
    """toolgate's answer to a body it cannot decide on (here: a plan that does not exist)
    is a deny Claude Code honours: the tool does not run and the model is told why."""
    target = project / "undecided.txt"
    script = Script("Write", {"file_path": str(target), "content": "x"}, "toolu_undecided")
    one_run(model, "UNDECIDED", script, project,
            http_hooks(toolgate["url"], "plan_id=no-such-plan"), toolgate["token"])
    assert not target.exists()
    [tool_result] = script.results
    assert tool_result["is_error"] is True
    assert "ToolgateUnavailableError (not_found)" in str(tool_result["content"])


GATEWAY_UPSTREAM = '''
from mcp.server.fastmcp import FastMCP
import pathlib, sys
server = FastMCP("notes")
CALLS = pathlib.Path(sys.argv[1])

@server.tool()
def write_note(text: str) -> str:
    """Append a note."""
    with CALLS.open("a") as out:
        out.write(text + "\\n")
    return "noted"

server.run()
'''


@pytest.mark.skip(reason="not yet passing: with the merged gateway the real CLI's run timed out "
                         "after 120 s (suspect: the gateway's dotted SERVER.TOOL names, which "
                         "the Messages API's tool-name pattern does not allow); issue 33 open")
def test_an_mcp_tool_call_through_the_gateway_is_decided_once(toolgate, model, project):
    import sys

    calls = project / "calls.txt"
    (project / "upstream.py").write_text(GATEWAY_UPSTREAM)
    with admin(toolgate["url"]) as c:
        r = c.put("/v1/tools/notes.write_note", json={
            "capability": {"writes": True, "checkpointable": True, "unsafe": False},
            "safety_category": "safe"})
        assert r.status_code in (200, 201), r.text
        plan = c.post("/v1/plans", json={"action_id": "coding"}).json()["plan_id"]
    (project / "gateway.yaml").write_text(json.dumps({
        "version": 1, "toolgate": {"url": toolgate["url"], "token_env": "TOOLGATE_TOKEN"},
        "listen": {"stdio": True}, "plan": {"plan_id": plan},
        "servers": {"notes": {"command": [sys.executable, str(project / "upstream.py"),
                                          str(calls)]}}}))
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"toolgate": {
        "command": TOOLGATE, "args": ["gateway", "-c", str(project / "gateway.yaml")],
        "env": {"TOOLGATE_TOKEN": toolgate["token"]}}}}))
    script = Script(lambda names: next(n for n in names if n.startswith("mcp__toolgate__")),
                    {"text": "hi"}, "toolu_gateway")
    settings = http_hooks(toolgate["url"], "action=coding&gateway=toolgate")
    settings["enabledMcpjsonServers"] = ["toolgate"]
    prompt = model.script("GATEWAY", script)
    result = run_claude(project, project.parent / "home", settings, prompt, api=model.url,
                        token=toolgate["token"])
    assert calls.read_text() == "hi\n", result
    with admin(toolgate["url"]) as c:
        items = c.get("/v1/decisions", params={"tool": "notes.write_note"}).json()["items"]
    assert [(d["plan_id"], d["allowed"]) for d in items] == [(plan, True)]
    assert decisions(toolgate["url"], result["session_id"]) == []


def _hook(verb: str, url: str, token: str, stdin: bytes) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(TOOLGATE_URL=url, TOOLGATE_TOKEN=token)
    return subprocess.run([TOOLGATE, "hook", verb, "--action", "coding"], input=stdin,
                          env=env, capture_output=True, timeout=60)


def test_gemini_cli_command_hook_exits_2_on_a_deny_and_when_toolgate_is_down(toolgate):
    fixtures = Path(__file__).resolve().parent / "fixtures" / "gemini"
    allowed = _hook("gemini-cli", toolgate["url"], toolgate["token"],
                    (fixtures / "before_write_file.json").read_bytes())
    assert allowed.returncode == 0, allowed.stderr
    assert json.loads(allowed.stdout)["decision"] == "allow"
    done = _hook("gemini-cli", toolgate["url"], toolgate["token"],
                 (fixtures / "after_write_file.json").read_bytes())
    assert (done.returncode, json.loads(done.stdout)) == (0, {})
    denied = _hook("gemini-cli", toolgate["url"], toolgate["token"],
                   (fixtures / "before_run_shell_command.json").read_bytes())
    assert denied.returncode == 2
    assert json.loads(denied.stdout)["decision"] == "deny"
    assert b"ToolSafetyViolationError (unsafe_tool)" in denied.stderr
    down = _hook("gemini-cli", f"http://127.0.0.1:{free_port()}", toolgate["token"],
                 (fixtures / "before_write_file.json").read_bytes())
    assert down.returncode == 2 and b"ToolgateUnavailableError" in down.stderr
    garbage = _hook("claude-code", toolgate["url"], toolgate["token"], b"not json")
    assert garbage.returncode == 2 and b"invalid_json" in garbage.stderr
