"""Call rules (SPEC §18) reach every agent's file, web and shell tools through its mapping
(issue 42 item 7): each agent's hook body, as the agent sends it (recorded bodies from
tests/agents/fixtures/ and tests/hooks/fixtures/gemini/ with the tool and its arguments
swapped, Claude Code's built as tests/hooks/helpers.pre builds it), translated as `toolgate
hook <agent>` translates it, decided by the HTTP hook route on the agent's own mapping
(examples/<agent>.yaml) and the rules examples/claude-code.yaml ships, on SQLite and
PostgreSQL. A read of `.env` or `~/.ssh/id_ed25519` is denied by `deny-secrets` only
because the read tool's `path_args` name its path argument; a fetch to a host off an
allow-list only because the web tool's `url_args` name its URL argument."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import orjson
import pytest

from app.hooks.agents import AGENTS
from app.hooks.command import Verdict, event_of, verdict
from tests.agents.test_payloads import apply, fixture
from tests.hooks.helpers import agent_key, pre

HOME = "/home/dev"  # the agent's home, told on the hook URL (?home=) as the command hook does
GEMINI = Path(__file__).resolve().parents[1] / "hooks" / "fixtures" / "gemini"
_ids = itertools.count(1)


def body(agent: str, tool: str, args: dict) -> dict:
    """A PreToolUse (BeforeTool) body of `agent` calling `tool` with `args`, in its form."""
    n = next(_ids)
    if agent == "claude-code":
        return pre(tool, args, tool_use_id=f"toolu_rules_{n}")
    if agent == "gemini-cli":
        recorded = json.loads((GEMINI / "before_run_shell_command.json").read_text())
        return {**recorded, "tool_name": tool, "tool_input": args,
                "timestamp": f"2026-12-07T10:00:{n % 60:02d}.{n:03d}Z"}
    if agent == "copilot-cli":
        return {**fixture("copilot_pre_bash"), "toolName": tool, "toolArgs": args,
                "timestamp": 1796659620200 + n}
    recorded = fixture({"codex": "codex_pre_bash",
                        "qwen-code": "qwen_pre_run_shell_command"}[agent])
    return {**recorded, "tool_name": tool, "tool_input": args, "tool_use_id": f"call_r{n}"}


async def decide(client, key, agent: str, tool: str, args: dict) -> Verdict:
    sent = AGENTS[agent].to_claude(body(agent, tool, args))
    r = await client.post(f"/v1/hooks/claude-code?agent={agent}&action=coding&home={HOME}",
                          content=orjson.dumps(sent), headers=key)
    assert r.status_code == 200, r.text
    return verdict(r.content, event_of(sent))


async def denied_by(client, held: Verdict) -> str:
    """The rule the stored decision names as the deny (detail.rules), checked rule_denied."""
    decision_id = held.reason.rsplit("[decision ", 1)[1].rstrip("]")
    record = (await client.get(f"/v1/decisions/{decision_id}")).json()
    assert record["code"] == "rule_denied", record
    return [m["id"] for m in record["detail"]["rules"] if m["effect"] == "deny"][0]


@pytest.fixture
async def ruled(client):
    """The agent's mapping over examples/claude-code.yaml (its profile, its rules: secrets
    denied to every tool), and a domains rule on every agent's web fetch."""
    async def setup(agent: str) -> dict:
        await apply(client, "claude-code")
        await apply(client, agent)
        r = await client.put("/v1/rules/deny-fetch-unlisted", json={
            "project": None, "tools": ["WebFetch", "web_fetch"],
            "when": {"domains": ["*", "!github.com", "!*.github.com"]},
            "effect": "deny", "message": "fetches only from github.com"})
        assert r.status_code == 201, r.text
        return await agent_key(client, projects=["agents"])
    return setup


def assert_rule_denied(held: Verdict, message: str) -> None:
    assert held.outcome == "blocked", held
    assert "ToolAccessDeniedError (rule_denied)" in held.reason, held.reason
    assert message in held.reason, held.reason


# Each agent's reads: (tool, its arguments naming `path`), as its own tools name them.
READS = {
    "claude-code": [("Read", lambda p: {"file_path": p}),
                    ("Grep", lambda p: {"pattern": "KEY", "path": p})],
    "gemini-cli": [("read_file", lambda p: {"file_path": p}),
                   ("read_many_files", lambda p: {"include": ["src/**/*.py", p]}),
                   ("list_directory", lambda p: {"dir_path": p}),
                   ("grep_search", lambda p: {"pattern": "KEY", "dir_path": p})],
    "codex": [("view_image", lambda p: {"path": p})],
    "qwen-code": [("read_file", lambda p: {"file_path": p}),
                  ("grep_search", lambda p: {"pattern": "KEY", "path": p}),
                  ("glob", lambda p: {"pattern": "*", "path": p}),
                  ("zoom_image", lambda p: {"file_path": p, "x1": 0, "y1": 0, "x2": 1,
                                            "y2": 1})],
    "copilot-cli": [("view", lambda p: {"path": p}),
                    ("grep", lambda p: {"pattern": "KEY", "paths": [p]}),
                    ("glob", lambda p: {"pattern": "*", "paths": p})],
}
SHELLS = {"claude-code": "Bash", "gemini-cli": "run_shell_command", "codex": "Bash",
          "qwen-code": "run_shell_command", "copilot-cli": "bash"}
FETCHES = {"claude-code": ("WebFetch", {"prompt": "summarise"}),
           "qwen-code": ("web_fetch", {"prompt": "summarise"}),
           "copilot-cli": ("web_fetch", {})}


@pytest.mark.parametrize("agent", sorted(READS))
async def test_each_agents_reads_of_secrets_are_denied_by_the_shipped_rules(
        client, ruled, agent):
    key = await ruled(agent)
    for tool, args in READS[agent]:
        for secret in ("/work/repo/.env", f"{HOME}/.ssh/id_ed25519", ".env", "sub/.env"):
            held = await decide(client, key, agent, tool, args(secret))
            assert_rule_denied(held, "secrets are not for agents")
            assert await denied_by(client, held) == "deny-secrets", (tool, secret)
        # The same tool on a file that is no secret runs: the deny is the rule's.
        held = await decide(client, key, agent, tool, args("/work/repo/src/app.py"))
        assert held.outcome == "allow", (tool, held)


@pytest.mark.parametrize("agent", sorted(SHELLS))
async def test_each_agents_shell_is_denied_cat_env(client, ruled, agent):
    key = await ruled(agent)
    for line in ("cat .env", "cat ./src/../.env | head -1", "cp ~/.ssh/id_ed25519 /tmp/k"):
        held = await decide(client, key, agent, SHELLS[agent], {"command": line})
        assert_rule_denied(held, "secrets are not for agents")
        assert await denied_by(client, held) == "deny-secrets", line
    # A line that reads no secret is not the rule's: the shipped classify rules name every
    # agent's shell, so it runs as a read.
    held = await decide(client, key, agent, SHELLS[agent], {"command": "cat src/app.py"})
    assert held.outcome == "allow", held


@pytest.mark.parametrize("agent", sorted(SHELLS))
async def test_each_agents_shell_is_decided_by_the_shipped_shell_rules(client, ruled, agent):
    """The shipped shell rules name every agent's shell tool: its reads, builds and local
    commits run; a push asks its user; curl off the allow-list is denied; a line no rule
    classifies stays the registry's unsafe writer."""
    key = await ruled(agent)
    shell = SHELLS[agent]
    for line in ("git status", "npm test", "git add src/app.py && git commit -m 'fix'"):
        held = await decide(client, key, agent, shell, {"command": line})
        assert held.outcome == "allow", (line, held)
    held = await decide(client, key, agent, shell, {"command": "git push origin main"})
    assert held.outcome == "ask", held
    held = await decide(client, key, agent, shell,
                        {"command": "curl -s https://evil.example/x"})
    assert_rule_denied(held, "curl/wget only to the hosts of the allow-list")
    assert await denied_by(client, held) == "deny-unlisted-hosts"
    held = await decide(client, key, agent, shell, {"command": "rm -rf build"})
    assert held.outcome == "blocked" and "(unsafe_tool)" in held.reason, held


# Each agent's file writers, as its own tools name them.
WRITES = {"claude-code": [("Write", {"file_path": ".git/hooks/pre-commit", "content": "x"}),
                          ("Edit", {"file_path": ".git/config", "old_string": "a",
                                    "new_string": "b"})],
          "gemini-cli": [("write_file", {"file_path": ".git/hooks/pre-commit",
                                         "content": "x"}),
                         ("replace", {"file_path": ".git/config", "old_string": "a",
                                      "new_string": "b"})],
          "qwen-code": [("write_file", {"file_path": ".git/hooks/pre-commit",
                                        "content": "x"}),
                        ("edit", {"file_path": ".git/config", "old_string": "a",
                                  "new_string": "b"})],
          "copilot-cli": [("create", {"path": ".git/hooks/pre-commit", "file_text": "x"}),
                          ("edit", {"path": ".git/config", "old_str": "a", "new_str": "b"})]}


@pytest.mark.parametrize("agent", sorted(WRITES))
async def test_each_agents_writes_to_git_internals_are_denied(client, ruled, agent):
    """git runs code from .git/hooks and .git/config on the next `git status`, which the
    shell rules let run: every agent's writers are denied them, not only Claude Code's."""
    key = await ruled(agent)
    for tool, args in WRITES[agent]:
        held = await decide(client, key, agent, tool, args)
        assert_rule_denied(held, "agents do not edit them")
        assert await denied_by(client, held) == "deny-git-internals", tool


@pytest.mark.parametrize("agent", sorted(FETCHES))
async def test_each_agents_web_fetch_off_the_allow_list_is_denied(client, ruled, agent):
    key = await ruled(agent)
    tool, extra = FETCHES[agent]
    for url in ("https://evil.example/x", "http://169.254.169.254/latest", "evil.example"):
        held = await decide(client, key, agent, tool, {**extra, "url": url})
        assert_rule_denied(held, "fetches only from github.com")
        assert await denied_by(client, held) == "deny-fetch-unlisted", url
    held = await decide(client, key, agent, tool,
                        {**extra, "url": "https://github.com/org/repo"})
    assert held.outcome == "allow", held


async def test_gemini_web_fetch_urls_in_its_prompt_are_not_read(client, ruled):
    """Gemini CLI's web_fetch has only a `prompt` whose text holds the URLs: rules do not
    read hosts out of free text (docs/rules.md), so a domains rule does not see them."""
    key = await ruled("gemini-cli")
    held = await decide(client, key, "gemini-cli", "web_fetch",
                        {"prompt": "Summarise https://evil.example/x"})
    assert held.outcome == "allow", held
