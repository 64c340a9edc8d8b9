"""POST /v1/hooks/claude-code on SQLite and Postgres (SPEC §15): a plan per session, the
decision of a PreToolUse in Claude Code's format, the outcome of a PostToolUse, and every
body toolgate cannot decide on answered as a deny with HTTP 200, never a 4xx/500."""

from __future__ import annotations

import pytest

from app.hooks.claude import session_plan_id
from tests.hooks.helpers import agent_key, apply_mapping, permission, post, pre

HOOK = "/v1/hooks/claude-code"


@pytest.fixture
async def agent(client):
    await apply_mapping(client)
    return await agent_key(client, projects=["agents"])


async def hook(client, body, headers, query="?action=coding", **kw):
    r = await client.post(HOOK + query, json=body, headers=headers, **kw)
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_session_gets_one_plan_from_the_action_and_keeps_it(client, agent):
    first = await hook(client, pre("Read", {"file_path": "/work/repo/a.py"}), agent)
    assert permission(first)[0] == "allow"
    again = await hook(client, pre("Grep", {"pattern": "x"}, tool_use_id="toolu_02"), agent)
    assert permission(again)[0] == "allow"
    other = await hook(client, pre("LS", {}, session="s-2", tool_use_id="toolu_03"), agent)
    assert permission(other)[0] == "allow"
    plans = (await client.get("/v1/plans?action_id=coding")).json()["items"]
    assert sorted(p["plan_id"] for p in plans) == [session_plan_id("s-1"),
                                                   session_plan_id("s-2")]
    decisions = (await client.get(f"/v1/decisions?plan_id={session_plan_id('s-1')}")).json()
    assert [(d["kind"], d["tool"]) for d in decisions["items"]] == [
        ("authorize", "Grep"), ("authorize", "Read"), ("plan", None)]


async def test_deny_names_class_code_and_decision(client, agent):
    answer = await hook(client, pre("Bash", {"command": "rm -rf /"}), agent)
    decision, reason = permission(answer)
    assert decision == "deny"
    assert reason.startswith("ToolSafetyViolationError (unsafe_tool): Tool 'Bash'")
    decision_id = reason.rsplit("[decision ", 1)[1].rstrip("]")
    stored = (await client.get(f"/v1/decisions/{decision_id}")).json()
    assert stored["allowed"] is False and stored["code"] == "unsafe_tool"


async def test_a_write_outside_cwd_is_a_sandbox_escape(client, agent):
    inside = await hook(client, pre("Write", {"file_path": "/work/repo/x.txt",
                                              "content": "hi"}), agent)
    assert permission(inside)[0] == "allow", permission(inside)
    for path in ("/etc/passwd", "/work/repo/../other/x", "/work/repository/x"):
        outside = await hook(client, pre("Write", {"file_path": path, "content": "hi"},
                                         tool_use_id="toolu_09"), agent)
        decision, reason = permission(outside)
        assert decision == "deny", path
        assert "ToolSandboxEscapeError (sandbox_path_escape)" in reason, reason


async def test_mcp_tools_are_decided_under_the_gateway_name(client, agent):
    r = await client.put("/v1/tools/fs.write_file", json={
        "capability": {"writes": True, "checkpointable": True, "unsafe": False},
        "safety_category": "safe", "path_args": ["path"]})
    assert r.status_code in (200, 201)
    answer = await hook(client, pre("mcp__fs__write_file", {"path": "/work/repo/a"}), agent)
    decision, reason = permission(answer)
    assert decision == "allow", reason
    decision_id = reason.rsplit("[decision ", 1)[1].rstrip("]")
    assert (await client.get(f"/v1/decisions/{decision_id}")).json()["tool"] == "fs.write_file"


async def test_post_tool_use_reports_the_outcome_of_that_call(client, agent):
    args = {"file_path": "/work/repo/x.txt", "content": "hi"}
    allowed = await hook(client, pre("Write", args, tool_use_id="toolu_w1"), agent)
    decision_id = permission(allowed)[1].rsplit("[decision ", 1)[1].rstrip("]")
    await hook(client, pre("Write", args, tool_use_id="toolu_w2"), agent)  # another call
    assert await hook(client, post("Write", args, tool_use_id="toolu_w1"), agent) == {}
    outcome = (await client.get(f"/v1/decisions/{decision_id}")).json()["outcome"]
    assert outcome["status"] == "succeeded" and outcome["args_mismatch"] is False
    # The same report again changes nothing; a failure of the other call is its own.
    assert await hook(client, post("Write", args, tool_use_id="toolu_w1"), agent) == {}
    failed = await hook(client, post("Write", {**args, "content": "other"}, failed=True,
                                     tool_use_id="toolu_w2"), agent)
    assert failed == {}
    items = (await client.get("/v1/decisions?kind=outcome")).json()["items"]
    assert sorted(i["code"] for i in items) == ["execution_failed", "succeeded"]
    mismatch = [i for i in items if i["code"] == "execution_failed"][0]
    assert (await client.get(f"/v1/decisions/{mismatch['decision_id']}")).status_code == 200


async def test_post_tool_use_without_a_decision_is_said_to_the_model(client, agent):
    answer = await hook(client, post("Write", {"file_path": "/work/repo/x"},
                                     tool_use_id="toolu_never"), agent)
    assert answer["decision"] == "block"
    assert "no_decision" in answer["reason"] and "toolu_never" in answer["reason"]
    assert (await client.get("/v1/decisions?kind=outcome")).json()["items"] == []


async def test_approval_is_ask_in_client_flag_and_a_named_deny_in_server_mode(client, agent):
    r = await client.put("/v1/actions/reviewed", json={
        "project": "agents", "safety_profile": {
            "require_sandbox": False, "require_checkpoints": False,
            "require_human_approval": True}})
    assert r.status_code in (200, 201), r.text
    asked = await hook(client, pre("Read", {}), agent, query="?action=reviewed")
    decision, reason = permission(asked)
    assert decision == "ask" and "human_approval_required" in reason
    r = await client.put("/v1/projects/agents/settings", json={"approval_mode": "server"})
    assert r.status_code == 200, r.text
    denied = await hook(client, pre("Read", {}, session="s-srv"), agent,
                        query="?action=reviewed")
    decision, reason = permission(denied)
    assert decision == "deny" and "human_approval_required" in reason
    pending = (await client.get("/v1/approvals?state=pending")).json()["items"]
    assert len(pending) == 1
    assert f"/ui/#/approvals/{pending[0]['approval_id']}" in reason


BAD_BODIES = [
    (b"not json", "invalid_json"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"hook_event_name": "Stop", "session_id": "s"}', "unknown_hook_event"),
    (b'{"session_id": "s"}', "hook_event_name is missing"),
    (b'{"hook_event_name": "PreToolUse"}', "session_id, tool_use_id, cwd, tool_name, "
                                           "tool_input"),
    (b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_use_id": "t", '
     b'"cwd": "relative", "tool_name": "Read", "tool_input": {}}', "cwd"),
    (b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_use_id": "t", '
     b'"cwd": "/w", "tool_name": "not a name", "tool_input": {}}', "tool.name"),
    (b'{"hook_event_name": "PreToolUse", "session_id": "s", "tool_use_id": "t", '
     b'"cwd": "/w", "tool_name": "Read", "tool_input": []}', "tool_input"),
]


async def test_bad_bodies_are_a_deny_never_an_error(client, agent):
    for content, why in BAD_BODIES:
        r = await client.post(HOOK + "?action=coding", content=content, headers=agent)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["decision"] == "block" and why in answer["reason"], answer
        decision, reason = permission(answer)
        assert decision == "deny" and reason.startswith("ToolgateUnavailableError")
    # Nothing was decided for any of them.
    listed = (await client.get("/v1/decisions")).json()["items"]
    assert [d for d in listed if d["kind"] == "authorize"] == []
    # Past the body limit (a Write of a large file): still a deny, not a 413.
    big = pre("Write", {"file_path": "/work/repo/big", "content": "x" * (2 << 20)})
    r = await client.post(HOOK + "?action=coding", json=big, headers=agent)
    assert r.status_code == 200 and permission(r.json())[0] == "deny", r.text[:300]
    assert "payload_too_large" in permission(r.json())[1]


async def test_an_unregistered_tool_is_a_deny_of_its_own_naming_the_file(client, agent):
    """Issue 45 item 3: a tool the registry does not know is denied with its own code and
    class (the deny table's), not "toolgate could not decide"; the hint names the file
    that registers it: the agent's mapping file for its own tools, the policy file for an
    MCP server's."""
    builtin = await hook(client, pre("Unmapped", {}), agent)
    decision, reason = permission(builtin)
    assert decision == "deny" and builtin["decision"] == "block"
    assert reason.startswith("ToolNotActivatedError (unregistered_tool): tool 'Unmapped' is "
                             "not in toolgate's registry, so it is denied"), reason
    assert "could not decide" not in reason and "examples/claude-code.yaml" in reason
    mcp = await hook(client, pre("mcp__fs__write_file", {"path": "/x"}, tool_use_id="t2"),
                     agent)
    decision, reason = permission(mcp)
    assert decision == "deny" and reason.startswith("ToolNotActivatedError (unregistered_tool)")
    assert "register 'fs.write_file' in your policy file's tools: section" in reason, reason
    errors = (await client.get("/v1/errors")).json()["errors"]
    assert "unregistered_tool" in next(e for e in errors
                                       if e["error"] == "ToolNotActivatedError")["codes"]


async def test_bad_urls_are_a_deny(client, agent):
    for query, why in [("", "exactly one of"), ("?action=coding&plan_id=p", "exactly one of"),
                       ("?action=a&action=b", "more than once"),
                       ("?action=no%20such", "not a valid action"),
                       ("?action=missing", "missing"), ("?plan_id=missing", "missing")]:
        answer = await hook(client, pre("Read", {}), agent, query=query)
        decision, reason = permission(answer)
        assert decision == "deny" and why in reason, (query, reason)


async def test_no_key_or_a_key_of_another_project_is_a_deny(client, agent):
    body = pre("Read", {})
    answer = await hook(client, body, {"Authorization": "Bearer tg_wrong"})
    assert permission(answer)[0] == "deny" and "unauthorized" in permission(answer)[1]
    other = await agent_key(client, projects=["elsewhere"])
    answer = await hook(client, body, other)
    assert permission(answer)[0] == "deny"
    auditor = (await client.post("/v1/keys", json={"name": "a", "role": "auditor",
                                                   "projects": None})).json()["key"]
    answer = await hook(client, body, {"Authorization": f"Bearer {auditor}"})
    assert permission(answer)[0] == "deny" and "forbidden" in permission(answer)[1]


async def test_a_session_plan_of_another_action_is_a_deny(client, agent):
    assert permission(await hook(client, pre("Read", {}), agent))[0] == "allow"
    r = await client.put("/v1/actions/other", json={"project": "agents"})
    assert r.status_code in (200, 201), r.text
    answer = await hook(client, pre("Read", {}), agent, query="?action=other")
    decision, reason = permission(answer)
    assert decision == "deny" and "plan_conflict" in reason, reason


async def test_the_fastapi_route_answers_as_the_plain_asgi_one(settings):
    """TOOLGATE_FAST_PATH=false serves the hooks through FastAPI (app/hooks/routes.py):
    the same answers, failures included."""
    from tests.conftest import app_client

    async with app_client(settings.model_copy(update={"fast_path": False})) as slow:
        await apply_mapping(slow)
        key = await agent_key(slow, projects=["agents"])
        assert permission(await hook(slow, pre("Read", {}), key))[0] == "allow"
        decision, reason = permission(await hook(slow, pre("Bash", {"command": "rm -rf build"},
                                                          tool_use_id="t2"), key))
        assert decision == "deny" and "(unsafe_tool)" in reason
        r = await slow.post(HOOK + "?action=coding", content=b"{", headers=key)
        assert r.status_code == 200 and "invalid_json" in r.json()["reason"]
        answer = await hook(slow, pre("Read", {}), {"Authorization": "Bearer tg_nope"})
        assert "(unauthorized)" in permission(answer)[1]
        assert await hook(slow, post("Read", {}), key) == {}


async def test_a_pretooluse_is_decided_by_the_authorize_pipeline(client, agent, monkeypatch):
    """The hook route is a transport of the one pipeline (app/authorize/pipeline.py, issue
    31): its key, rate limit and role are the pipeline's `admit`, its decision the
    pipeline's `decide` (and `finish`), the steps POST /v1/authorize-tool takes, not a
    copy of them."""
    from app.authorize.pipeline import Pipeline

    seen: list[tuple[str, str]] = []
    admit, decide = Pipeline.admit, Pipeline.decide

    async def counted_admit(self, *args, **kw):
        seen.append(("admit", kw["path"]))
        return await admit(self, *args, **kw)

    def counted_decide(self, request, principal, caller):
        seen.append(("decide", request.tool.name))
        return decide(self, request, principal, caller)

    monkeypatch.setattr(Pipeline, "admit", counted_admit)
    monkeypatch.setattr(Pipeline, "decide", counted_decide)
    answer = await hook(client, pre("Read", {"file_path": "/work/repo/a.py"}), agent)
    assert permission(answer)[0] == "allow"
    answer = await hook(client, pre("mcp__fs__read", {}, tool_use_id="t2"), agent)
    assert permission(answer)[0] == "deny"  # unregistered: decided all the same
    assert seen == [("admit", HOOK), ("decide", "Read"), ("admit", HOOK),
                    ("decide", "fs.read")]


async def test_the_hook_and_authorize_tool_share_the_keys_rate_limit(client, agent, settings):
    """One rate limit per key, whichever route its decisions take; past it the hook
    answers a deny naming `rate_limited`, never a 429 (Claude Code runs a call whose hook
    fails)."""
    from tests.conftest import app_client

    limited = settings.model_copy(update={"rate_limit_per_second": 0.01,
                                          "rate_limit_burst": 3})
    async with app_client(limited) as c:  # the same database: the mapping, the agent key
        key = agent
        assert permission(await hook(c, pre("Read", {}), key))[0] == "allow"
        r = await c.post("/v1/authorize-tool", headers=key, json={
            "plan_id": session_plan_id("s-1"), "tool": {"name": "Read"}, "context": {}})
        assert r.status_code == 200 and r.json()["allowed"] is True, r.text
        assert permission(await hook(c, pre("Read", {}, tool_use_id="t3"), key))[0] == "allow"
        decision, reason = permission(await hook(c, pre("Read", {}, tool_use_id="t4"), key))
        assert decision == "deny" and "(rate_limited)" in reason, reason
        r = await c.post("/v1/authorize-tool", headers=key, json={
            "plan_id": session_plan_id("s-1"), "tool": {"name": "Read"}, "context": {}})
        assert r.status_code == 429, r.text


async def test_calls_of_a_named_gateway_are_left_to_it_and_no_others(client, agent):
    """`?gateway=toolgate`: the MCP server Claude Code calls `toolgate` is toolgate's MCP
    gateway, which decides its calls itself; the hook allows them through to it, decides
    and records nothing, and reports no outcome. Every other tool, MCP tools of other
    servers included, is decided as always."""
    query = "?action=coding&gateway=toolgate"
    answer = await hook(client, pre("mcp__toolgate__notes_write_note", {"text": "hi"}),
                        agent, query=query)
    decision, reason = permission(answer)
    assert decision == "allow" and "MCP gateway 'toolgate'" in reason, reason
    done = await hook(client, post("mcp__toolgate__notes_write_note", {"text": "hi"}), agent,
                      query=query)
    assert done == {}
    listed = (await client.get("/v1/decisions")).json()["items"]
    assert [d for d in listed if d["kind"] in ("authorize", "outcome")] == []
    other = await hook(client, pre("mcp__fs__write_file", {"path": "/x"}, tool_use_id="t2"),
                       agent, query=query)
    decision, reason = permission(other)
    assert decision == "deny" and "'fs.write_file'" in reason and "(unregistered_tool)" in reason
    assert "?gateway=fs" in reason  # how to say that fs is a gateway, were it one
    named_alike = await hook(client, pre("mcp__toolgate_x__t", {}, tool_use_id="t3"), agent,
                             query=query)
    assert permission(named_alike)[0] == "deny"


@pytest.mark.parametrize(("tool", "tool_input"), [
    ("Bash", {"command": "rm -rf /"}),
    ("Write", {"file_path": "/etc/passwd", "content": "x"}),
])
async def test_no_gateway_name_covers_a_built_in_tool(client, agent, tool, tool_input):
    """`?gateway=` names MCP servers: only an `mcp__SERVER__tool` name can be a gateway's
    call (SPEC §20). A gateway named like a built-in tool, or a body that adds fields of
    its own, does not let the built-in through: it is decided (denied) and recorded."""
    body = pre(tool, tool_input, mcp_context={"server_name": "toolgate"},
               server_name="toolgate")
    answer = await hook(client, body, agent,
                        query=f"?action=coding&gateway=toolgate&gateway={tool}")
    decision, reason = permission(answer)
    assert decision == "deny" and "MCP gateway" not in reason, reason
    decision_id = reason.rsplit("[decision ", 1)[1].rstrip("]")
    stored = (await client.get(f"/v1/decisions/{decision_id}")).json()
    assert (stored["tool"], stored["allowed"], stored["detail"]["agent"]) == (
        tool, False, "claude-code")


async def test_the_agents_home_is_where_its_transcript_lies_or_the_url_says(client, agent):
    """Call rules resolve `~` with context.variables.HOME (docs/rules.md): the hook sends
    the agent's home, read from the body's transcript_path (its runtime's folder) or given
    as ?home=. When it is unknown, a deny rule on `~/...` matches a path that would be
    under SOME home (`/any/dir/.ssh/key`), not an ordinary file."""
    def read(path: str, **kw) -> dict:
        return pre("Read", {"file_path": path}, **kw)

    inside = await hook(client, read("/work/repo/x.txt"), agent)
    assert permission(inside)[0] == "allow", permission(inside)
    decision_id = permission(inside)[1].rsplit("[decision ", 1)[1].rstrip("]")
    stored = (await client.get(f"/v1/decisions/{decision_id}")).json()
    assert stored["detail"]["context"]["variables"] == {"HOME": "/home/dev"}
    secret = await hook(client, read("/home/dev/.ssh/id_ed25519", tool_use_id="t2"), agent)
    assert "(rule_denied)" in permission(secret)[1]
    unknown = read("/work/repo/x.txt", tool_use_id="t3", transcript_path="/tmp/t.jsonl")
    assert permission(await hook(client, unknown, agent))[0] == "allow"
    homeless_secret = read("/home/dev/.ssh/id_ed25519", tool_use_id="t4",
                           transcript_path="/tmp/t.jsonl")
    assert "(rule_denied)" in permission(await hook(client, homeless_secret, agent))[1]
    told = await hook(client, unknown, agent, query="?action=coding&home=/home/dev")
    assert permission(told)[0] == "allow", permission(told)
    bad = await hook(client, unknown, agent, query="?action=coding&home=relative")
    assert "invalid_hook_url" in permission(bad)[1]
