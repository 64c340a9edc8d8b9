"""Codex CLI, Qwen Code and GitHub Copilot CLI hook bodies recorded from the real CLIs
(tests/agents/fixtures/; paths shortened to /work/repo), translated as `toolgate hook
<agent>` translates them (app/hooks/agents.py), decided by the route on the agent's own
mapping (examples/<agent>.yaml), on SQLite and PostgreSQL; and what each agent reads back."""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from app.hooks import codex, copilot
from app.hooks.agents import AGENTS
from app.hooks.command import Verdict, event_of, verdict
from app.policyfile.document import State, load_policy, make_plan
from tests.hooks.helpers import agent_key

FIXTURES = Path(__file__).resolve().parent / "fixtures"
ROOT = Path(__file__).resolve().parents[2]


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text())


async def apply(client, agent: str) -> None:
    path = ROOT / "examples" / f"{agent}.yaml"
    plan = make_plan(load_policy(path.read_text(), str(path)), State(sections={}))
    for change in plan.changes:
        r = await client.request(change.method, change.path, json=change.body)
        assert r.status_code in (200, 201), (change.path, r.text)


async def hook(client, headers, agent: str, name: str) -> tuple[Verdict, dict | None]:
    """What `toolgate hook <agent>` holds and prints for one recorded body."""
    body = AGENTS[agent].to_claude(fixture(name))
    r = await client.post(f"/v1/hooks/claude-code?agent={agent}&action=coding",
                          content=orjson.dumps(body), headers=headers)
    assert r.status_code == 200, r.text
    held = verdict(r.content, event_of(body))
    return held, AGENTS[agent].output(held)


def decision_id(held: Verdict) -> str:
    return held.reason.rsplit("[decision ", 1)[1].rstrip("]")


@pytest.fixture
async def key(client):
    return await agent_key(client, projects=["agents"])


@pytest.mark.parametrize(("agent", "pre", "post", "tool"), [
    ("codex", "codex_pre_apply_patch", "codex_post_apply_patch", "apply_patch"),
    ("qwen-code", "qwen_pre_write_file", "qwen_post_write_file", "write_file"),
    ("copilot-cli", "copilot_pre_create", "copilot_post_create", "create"),
])
async def test_a_write_in_cwd_is_allowed_named_and_its_outcome_booked(
        client, key, agent, pre, post, tool):
    await apply(client, agent)
    held, _ = await hook(client, key, agent, pre)
    assert held.outcome == "allow"
    after, out = await hook(client, key, agent, post)
    assert after.outcome == "done"
    stored = (await client.get(f"/v1/decisions/{decision_id(held)}")).json()
    assert (stored["tool"], stored["allowed"]) == (tool, True)
    assert stored["detail"]["agent"] == agent
    assert stored["detail"]["context"]["sandbox_root"] == "/work/repo"
    assert stored["outcome"]["status"] == "succeeded"
    assert stored["outcome"]["args_mismatch"] is False
    listed = (await client.get("/v1/decisions", params={"agent": agent})).json()["items"]
    assert [d["decision_id"] for d in listed if d["kind"] == "authorize"] == [
        decision_id(held)]


@pytest.mark.parametrize(("agent", "name", "code"), [
    ("codex", "codex_pre_bash", "ToolSafetyViolationError (unsafe_tool)"),
    ("codex", "codex_pre_apply_patch_escape", "ToolSandboxEscapeError (sandbox_path_escape)"),
    ("qwen-code", "qwen_pre_run_shell_command", "ToolSafetyViolationError (unsafe_tool)"),
    ("copilot-cli", "copilot_pre_bash", "ToolSafetyViolationError (unsafe_tool)"),
    ("copilot-cli", "copilot_pre_create_outside", "ToolSandboxEscapeError (sandbox_path_escape)"),
])
async def test_denies_are_blocks_in_the_agents_own_form(client, key, agent, name, code):
    await apply(client, agent)
    held, out = await hook(client, key, agent, name)
    assert held.outcome == "blocked" and code in held.reason
    if agent == "copilot-cli":  # read on exit code 2 too: the model sees the reason
        assert out == {"permissionDecision": "deny", "permissionDecisionReason": held.reason}
    else:  # exit code 2, the reason on stderr (app/cli/hook.py)
        assert out is None
    stored = (await client.get(f"/v1/decisions/{decision_id(held)}")).json()
    assert stored["detail"]["agent"] == agent


async def test_an_unmapped_tool_of_each_agent_is_denied(client, key):
    for agent, name in (("codex", "codex_pre_bash"), ("qwen-code", "qwen_pre_write_file"),
                        ("copilot-cli", "copilot_pre_create")):
        await apply(client, agent)
        body = {**fixture(name)}
        body["tool_name" if "tool_name" in body else "toolName"] = "a_tool_of_a_later_version"
        r = await client.post(f"/v1/hooks/claude-code?agent={agent}&action=coding",
                              content=orjson.dumps(AGENTS[agent].to_claude(body)),
                              headers=key)
        held = verdict(r.content, "PreToolUse")
        assert held.outcome == "blocked" and "unregistered_tool" in held.reason


def test_codex_names_a_patchs_files_and_nothing_else_counts():
    body = codex.to_claude(fixture("codex_pre_apply_patch_escape"))
    assert body["tool_input"]["paths"] == ["src/app.py", "../../etc/cron.d/x"]
    forged = fixture("codex_pre_apply_patch")
    forged["tool_input"]["paths"] = ["/work/repo/ok.txt"]  # only the patch says what it touches
    assert codex.to_claude(forged)["tool_input"]["paths"] == ["/work/repo/hello.txt"]
    assert codex.patch_paths("*** Begin Patch\n*** Delete File: a\n*** Add File: a\n") == ["a"]
    assert codex.to_claude(fixture("codex_pre_bash")) == fixture("codex_pre_bash")


def test_what_each_agent_reads_for_each_verdict():
    assert AGENTS["codex"].asks is False  # an ask is a block (app/cli/hook.py)
    for outcome in ("allow", "ask", "done", "blocked"):
        assert codex.command_output(Verdict(outcome, "why")) is None
    assert copilot.command_output(Verdict("allow", "ok")) == {
        "permissionDecision": "allow", "permissionDecisionReason": "ok"}
    assert copilot.command_output(Verdict("done", "")) is None
    assert AGENTS["qwen-code"].output(Verdict("allow", "ok")) == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "allow",
        "permissionDecisionReason": "ok"}}


def test_copilot_pre_and_post_are_one_call_and_a_failure_is_a_failure():
    pre, post = (copilot.to_claude(fixture(n)) for n in ("copilot_pre_create",
                                                         "copilot_post_create"))
    assert pre["tool_use_id"] == post["tool_use_id"]
    assert (pre["hook_event_name"], post["hook_event_name"]) == ("PreToolUse", "PostToolUse")
    failed = {**fixture("copilot_post_create"),
              "toolResult": {"resultType": "failure", "textResultForLlm": "disk full"}}
    assert copilot.to_claude(failed)["hook_event_name"] == "PostToolUseFailure"
    assert copilot.to_claude(failed)["error"] == "disk full"
    other = {**fixture("copilot_pre_create"), "toolArgs": {"path": "/work/repo/b"}}
    assert copilot.to_claude(other)["tool_use_id"] != pre["tool_use_id"]
    # toolArgs as a JSON string (older versions) is read as the object it holds.
    as_text = {**fixture("copilot_pre_create"),
               "toolArgs": json.dumps(fixture("copilot_pre_create")["toolArgs"])}
    assert copilot.to_claude(as_text) == pre


def test_a_tool_name_two_mappings_share_is_registered_alike():
    """Applying one agent's mapping after another's must not change what a shared name
    does: an `edit` whose path_args lost `file_path` would let Qwen Code's edits anywhere."""
    import yaml

    seen: dict[str, tuple[str, dict]] = {}
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        tools = (yaml.safe_load(path.read_text()) or {}).get("tools") or {}
        for name, entry in tools.items():
            first = seen.setdefault(name, (path.name, entry))
            assert entry == first[1], f"{name}: {first[0]} and {path.name} differ"


@pytest.mark.parametrize(("agent", "name"), [
    ("codex", "codex_pre_bash"), ("qwen-code", "qwen_pre_run_shell_command"),
    ("copilot-cli", "copilot_pre_bash")])
async def test_call_rules_read_each_agents_shell_command_line(client, key, agent, name):
    """Each mapping names its shell's command argument (`shell.arg`), so a rule on command
    lines (SPEC §18) decides the agent's shell calls: `ls` classified a read runs, `git
    push` asks (in server mode: denied, naming the rule), anything else stays unsafe."""
    await apply(client, agent)
    admin_rules = {"project": None, "tools": ["Bash", "run_shell_command", "bash"]}
    r = await client.put("/v1/rules/agents-reads", json={
        **admin_rules, "when": {"command": ["ls:*"]}, "effect": "classify",
        "capability": {"writes": False, "read_only": True, "unsafe": False},
        "message": "reads only"})
    assert r.status_code == 201, r.text
    r = await client.put("/v1/rules/agents-no-push", json={
        **admin_rules, "when": {"command": ["git push:*"]}, "effect": "deny",
        "message": "no pushes from agents"})
    assert r.status_code == 201, r.text

    async def shell(command: str) -> Verdict:
        body = fixture(name)
        args = "toolArgs" if agent == "copilot-cli" else "tool_input"
        body[args] = {**body[args], "command": command}
        r = await client.post(f"/v1/hooks/claude-code?agent={agent}&action=coding",
                              content=orjson.dumps(AGENTS[agent].to_claude(body)),
                              headers=key)
        return verdict(r.content, "PreToolUse")

    assert (await shell("ls -la src")).outcome == "allow"
    pushed = await shell("cd repo && git push origin main")
    assert pushed.outcome == "blocked" and "no pushes from agents" in pushed.reason
    other = await shell("rm -rf build")
    assert other.outcome == "blocked" and "unsafe_tool" in other.reason
