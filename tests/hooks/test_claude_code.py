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
from tests.hooks.fake_service import FakeService
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
        for mapping in ("examples/claude-code.yaml", "examples/gemini-cli.yaml"):
            applied = subprocess.run([TOOLGATE, "apply", "-f", mapping], cwd=ROOT, env=env,
                                     capture_output=True, text=True, timeout=120)
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


def test_a_hung_toolgate_blocks_the_call_before_claude_codes_hook_timeout(
        model, project):
    """A service that takes the connection and never answers (issue 42 item 1: the hook
    exited 2 only after 32 s, past the documented 30 s timeout, so Claude Code took it as
    a non-blocking error). Under the documented command settings the hook's own deadline
    (10 s, the default) ends it with exit 2 first: the model reads the hook's reason, not
    Claude Code's timeout, and the tool does not run."""
    target = project / "hung.txt"
    script = Script("Write", {"file_path": str(target), "content": "x"}, "toolu_hung")
    with FakeService() as hung:
        settings = command_hooks(TOOLGATE, f"{hung.url}/hang", "--action", "coding")
        result = one_run(model, "HUNG", script, project, settings, "tg_any")
    assert not target.exists()
    assert [d["tool_name"] for d in result["permission_denials"]] == ["Write"]
    [tool_result] = script.results
    assert tool_result["is_error"] is True
    assert "within the hook's deadline of 10 s" in str(tool_result["content"]), tool_result


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
from mcp.server.mcpserver import MCPServer
import pathlib, sys
server = MCPServer("notes")
CALLS = pathlib.Path(sys.argv[1])

@server.tool()
def write_note(text: str) -> str:
    """Append a note."""
    with CALLS.open("a") as out:
        out.write(text + "\\n")
    return "noted"

server.run()
'''


# Claude Code 2.1 in `-p` mode connects MCP servers in the background and sends its first
# model request without waiting, and by default (first-party API) defers MCP tools behind
# its ToolSearch tool: the scripted model would see neither. Both are Claude Code's
# settings, documented in docs/coding-agents.md ("MCP tools").
MCP_NOW = {"MCP_CONNECTION_NONBLOCKING": "false", "ENABLE_TOOL_SEARCH": "false"}


def _http_gateway(folder: Path, toolgate: dict, plan: str, calls: Path
                  ) -> tuple[subprocess.Popen, str, str]:
    """toolgate's MCP gateway on a Streamable HTTP listener, in front of the Python upstream
    `notes`, returned once it answers (its listener starts after the upstream's first
    connection): (the process, its URL, its listener token). Over HTTP, Claude Code
    connects in milliseconds; a stdio gateway is started by Claude Code itself, and under
    load it may not have answered when Claude Code, even with MCP_CONNECTION_NONBLOCKING
    false, stops waiting for it (about 8 s) and starts the turn without its tools."""
    import secrets
    import sys
    import time

    (folder / "upstream.py").write_text(GATEWAY_UPSTREAM)
    port, token = free_port(), secrets.token_urlsafe(16)
    (folder / "gateway.yaml").write_text(json.dumps({
        "version": 1, "toolgate": {"url": toolgate["url"], "token_env": "TOOLGATE_TOKEN"},
        "listen": {"http": {"host": "127.0.0.1", "port": port, "path": "/mcp",
                            "token_env": "GATEWAY_TOKEN"}},
        "plan": {"plan_id": plan},
        "servers": {"notes": {"command": [sys.executable, str(folder / "upstream.py"),
                                          str(calls)]}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLGATE_")}
    env.update(TOOLGATE_TOKEN=toolgate["token"], GATEWAY_TOKEN=token)
    log = folder / "gateway.log"
    with open(log, "ab") as out:
        proc = subprocess.Popen([TOOLGATE, "gateway", "-c", str(folder / "gateway.yaml")],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 120  # a bound on a hang, not a timing expectation
    while True:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            httpx.get(url, timeout=2)
            return proc, url, token
        except httpx.HTTPError:
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.1)


def _through_gateway(toolgate: dict, model: MessagesAPI, project: Path, query: str,
                     marker: str) -> tuple[dict, Script, Path, str]:
    """One Claude Code run whose project has toolgate's MCP gateway as the MCP server
    `toolgate` (`.mcp.json`), and whose scripted model calls the gateway's tool: (Claude
    Code's result, the script, the upstream's record of calls, the gateway's plan)."""
    calls = project / "calls.txt"
    with admin(toolgate["url"]) as c:
        r = c.put("/v1/tools/notes.write_note", json={
            "capability": {"writes": True, "checkpointable": True, "unsafe": False},
            "safety_category": "safe"})
        assert r.status_code in (200, 201), r.text
        plan = c.post("/v1/plans", json={"action_id": "coding"}).json()["plan_id"]
    gateway, url, token = _http_gateway(project.parent, toolgate, plan, calls)
    try:
        (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"toolgate": {
            "type": "http", "url": url, "headers": {"Authorization": f"Bearer {token}"}}}}))
        script = Script(lambda names: next(
            (n for n in names if n.startswith("mcp__toolgate__")), None),
            {"text": "hi"}, f"toolu_{marker.lower()}")
        settings = http_hooks(toolgate["url"], query)
        settings["enabledMcpjsonServers"] = ["toolgate"]
        prompt = model.script(marker, script)
        result = run_claude(project, project.parent / "home", settings, prompt,
                            api=model.url, token=toolgate["token"], more_env=MCP_NOW)
    finally:
        stop(gateway)
    return result, script, calls, plan


def gateway_decisions(url: str) -> list[tuple[str, bool]]:
    with admin(url) as c:
        items = c.get("/v1/decisions", params={"tool": "notes.write_note"}).json()["items"]
    return [(d["plan_id"], d["allowed"]) for d in items if d["kind"] == "authorize"]


def test_an_mcp_tool_call_through_the_gateway_is_decided_once(toolgate, model, project):
    """`?gateway=toolgate`: the gateway decides the call (as `notes.write_note`), forwards
    it and reports its outcome; the hook lets it through to the gateway and decides nothing
    itself. Claude Code offers the gateway's `notes.write_note` to the model as
    `mcp__toolgate__notes_write_note` (it turns every character outside [A-Za-z0-9_-]
    into `_`) and calls the gateway with the tool's own name."""
    before = gateway_decisions(toolgate["url"])
    result, script, calls, plan = _through_gateway(
        toolgate, model, project, "action=coding&gateway=toolgate", "GATEWAY")
    assert "mcp__toolgate__notes_write_note" in script.offered[0], script.offered
    assert calls.read_text() == "hi\n", result
    [tool_result] = script.results
    assert tool_result.get("is_error") is not True, tool_result
    after = gateway_decisions(toolgate["url"])  # newest first
    assert after[:len(after) - len(before)] == [(plan, True)]
    assert decisions(toolgate["url"], result["session_id"]) == []


def test_without_the_gateway_named_the_hook_decides_and_denies_the_unknown_name(
        toolgate, model, project):
    """The same session with a hook URL that does not name the gateway: the hook decides
    the call itself, as `toolgate.notes_write_note`, which the registry does not know, so
    it is denied (fail closed) and the gateway, and its upstream, receive nothing."""
    before = gateway_decisions(toolgate["url"])
    result, script, calls, _ = _through_gateway(toolgate, model, project, "action=coding",
                                                "NO-GATEWAY")
    assert not calls.exists()
    [tool_result] = script.results
    assert tool_result["is_error"] is True
    assert "(unregistered_tool)" in str(tool_result["content"])
    assert "'toolgate.notes_write_note'" in str(tool_result["content"])
    assert "?gateway=toolgate" in str(tool_result["content"])
    assert gateway_decisions(toolgate["url"]) == before
    assert [d["tool_name"] for d in result["permission_denials"]] == [
        "mcp__toolgate__notes_write_note"]


def test_tool_search_is_allowed_so_deferred_tools_stay_reachable(toolgate, model, project):
    """Claude Code (first-party API, its default) defers MCP tools and some of its own
    (WebFetch, NotebookEdit, ...) behind ToolSearch, which only loads their definitions:
    the shipped mapping registers it read-only, so a session under the documented
    settings can reach them."""
    script = Script("ToolSearch", {"query": "select:WebFetch", "max_results": 5},
                    "toolu_tool_search")
    result = one_run(model, "TOOL-SEARCH", script, project,
                     http_hooks(toolgate["url"], "action=coding"), toolgate["token"])
    [tool_result] = script.results
    assert tool_result.get("is_error") is not True, tool_result
    assert result["permission_denials"] == []
    [decision] = decisions(toolgate["url"], result["session_id"])
    assert (decision["tool"], decision["allowed"]) == ("ToolSearch", True)


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

