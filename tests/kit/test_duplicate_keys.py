"""Duplicate object keys (SPEC §17, issue 30 item 8): a body in which one object names a key
twice is 422 `invalid_input` naming it, at any depth, on every route and on every way the
authorize route is served; nothing is decided or changed. Before, the last one won: after a
grant for `{"cmd": "ls"}`, `{"cmd": "rm -rf /", "cmd": "ls"}` was allowed."""

from __future__ import annotations

import re

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.authorize.wire import decode_authorize_json
from app.edge.errors import InvalidInput
from app.edge.jsonkeys import first_duplicate, refuse_duplicates
from tests.kit.test_route_coverage import PROTECTED

TOOL = {"name": "shell.run", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}

# JSON values whose strings are likely to hold colons, backslashes and escapes.
_text = st.text(alphabet=st.sampled_from(list('ab:"\\\u00e9 ,{}')), max_size=6)
_leaf = st.none() | st.booleans() | st.integers(-5, 5) | _text
_tree = st.recursive(_leaf, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(_text, inner, max_size=3), max_leaves=12)


def _dump(node, dup_at: list[int], path: list[str], found: list[str]) -> str:
    """`node` as JSON text; the dup_at[0]-th object met gets its first key written again."""
    if isinstance(node, dict):
        members = [f"{orjson.dumps(k).decode()}:{_dump(v, dup_at, [*path, k], found)}"
                   for k, v in node.items()]
        dup_at[0] -= 1
        if dup_at[0] == 0 and node:
            first = next(iter(node))
            members.append(f"{orjson.dumps(first).decode()}:0")
            found.append(".".join([*path, first]))
        return "{" + ",".join(members) + "}"
    if isinstance(node, list):
        return "[" + ",".join(_dump(v, dup_at, [*path, str(i)], found)
                              for i, v in enumerate(node)) + "]"
    # \u escapes for some colons: the case the colon count alone would miss
    return orjson.dumps(node).decode().replace(":", "\\u003a", 1)


@settings(max_examples=300, deadline=None)
@given(_tree, st.integers(1, 6))
def test_a_duplicate_anywhere_is_found_and_named(tree, which):
    text = _dump(tree, [0], [], []).encode()
    refuse_duplicates(text, orjson.loads(text))  # none: nothing raised
    found: list[str] = []
    duplicated = _dump(tree, [which], [], found).encode()
    if not found:
        return  # fewer objects than `which`
    with pytest.raises(InvalidInput) as refused:
        refuse_duplicates(duplicated, orjson.loads(duplicated))
    assert refused.value.details["fields"][0]["type"] == "duplicate_key"
    # The first duplicate in reading order; one inside it may come first.
    assert first_duplicate(duplicated) == refused.value.details["fields"][0]["field"]


@pytest.mark.parametrize(("raw", "path"), [
    (b'{"tool":{"name":"t","args":{"cmd":"rm -rf /","cmd":"ls"}}}', "tool.args.cmd"),
    (b'{"plan_id":"a","plan_id":"b","tool":{"name":"t"}}', "plan_id"),
    (b'{"tool":{"name":"t","name":"u"}}', "tool.name"),
    (b'{"tool":{"name":"t"},"context":{"dry_run":false,"dry_run":true}}', "context.dry_run"),
    (b'{"tool":{"name":"t","args":{"a":"\\u003a","a":1}}}', "tool.args.a"),
    (b'{"tool":{"name":"t","args":{"x":[{"k":1,"k":1}]}}}', "tool.args.x.0.k"),
])
def test_the_hot_path_decoder_leaves_duplicates_to_the_way_that_names_them(raw, path):
    assert decode_authorize_json(raw) is None
    assert first_duplicate(raw) == path


async def test_the_red_teams_body_is_refused_on_every_way_authorize_is_served(both_paths):
    client = both_paths
    for raw, path in (
            (b'{"tool":{"name":"shell.run","capability":{"writes":false,"checkpointable":true,'
             b'"unsafe":false},"args":{"cmd":"rm -rf /","cmd":"ls"}}}', "tool.args.cmd"),
            (b'{"tool":{"name":"t","capability":{"writes":false,"checkpointable":true,'
             b'"unsafe":false,"unsafe":true}}}', "tool.capability.unsafe"),
            (b'{"requests":[{"tool":{"name":"t","args":{"a":1,"a":2}}}]}',
             "requests.0.tool.args.a")):
        route = "/v1/authorize-tools" if path.startswith("requests") else "/v1/authorize-tool"
        r = await client.post(route, content=raw, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, r.text
        error = r.json()["error"]
        assert error["code"] == "invalid_input"
        assert error["details"]["fields"][0] == {
            "field": path, "type": "duplicate_key",
            "message": "duplicate key: a JSON object names this key more than once"}
    r = await client.get("/v1/decisions")
    assert r.json()["items"] == []  # nothing was decided


WRITES = [(m, p) for m, p in PROTECTED if m in ("POST", "PUT", "PATCH")]


async def test_every_route_with_a_body_refuses_a_duplicate_key(client):
    for method, template in WRITES:
        path = re.sub(r"\{[^}]+\}", "x-1", template)
        if template == "/v1/hooks/claude-code":
            continue  # answers every refusal as a deny (below), never as a 4xx
        r = await client.request(method, path, content=b'{"zz":1,"zz":2}',
                                 headers={"Content-Type": "application/json"})
        assert r.status_code == 422, (method, template, r.text)
        assert r.json()["error"]["details"]["fields"][0]["field"] == "zz", (template, r.text)
    r = await client.post("/v1/skills/x-1/safety-test", content=b'"fine"\n{"a":1,"a":2}\n',
                          headers={"Content-Type": "application/jsonl"})
    assert r.status_code == 422 and r.json()["error"]["details"]["line"] == 2, r.text


async def test_the_hook_route_denies_a_body_with_a_duplicate_key(client):
    """Claude Code runs a call whose hook answers an error, so the hook route answers a
    duplicate key as a deny naming it, and decides nothing."""
    raw = (b'{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Bash",'
           b'"tool_input":{"command":"rm -rf /","command":"ls"},"tool_use_id":"t","cwd":"/w"}')
    r = await client.post("/v1/hooks/claude-code?action=coding", content=raw,
                          headers={"Content-Type": "application/json"})
    assert r.status_code == 200, r.text
    out = r.json()["hookSpecificOutput"]
    assert out["permissionDecision"] == "deny"
    assert "duplicate_key" in out["permissionDecisionReason"], out
    assert "tool_input.command" in out["permissionDecisionReason"], out
    r = await client.get("/v1/decisions")
    assert r.json()["items"] == []
