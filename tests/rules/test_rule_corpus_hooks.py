"""The shell corpus (tests/cases/shell) through Claude Code's hook route, on SQLite and
Postgres: each case a PreToolUse body (the tool's input as Claude Code sends it, `cwd` the
case's sandbox root, the home where the transcript lies), answered as Claude Code reads
it: deny -> `deny` naming `rule_denied` and the rule; ask -> `ask` naming the rule
(client_flag mode); classify / none -> the decision's record says which rules matched."""

from __future__ import annotations

import re
from itertools import groupby

from tests.approvals.test_approvals import new_key
from tests.rulecases import load_rule_cases
from tests.rules.test_rule_corpus_http import PROFILE, _entry

HOOK = "/v1/hooks/claude-code?action=corpus"
DECISION = re.compile(r"\[decision ([0-9a-f-]{36})\]")


def _body(call: dict, n: int) -> dict:
    home = call.get("home")
    transcript = (f"{home}/.claude/projects/-repo/s-corpus.jsonl" if home
                  else "/var/tmp/s-corpus.jsonl")
    return {"session_id": "s-corpus", "cwd": call["sandbox_root"],
            "transcript_path": transcript, "permission_mode": "default",
            "hook_event_name": "PreToolUse", "tool_name": call["tool"],
            "tool_input": call["args"], "tool_use_id": f"toolu_{n:04d}"}


async def test_the_shell_corpus_through_the_hook(client):
    await client.put("/v1/projects/corpus", json={})
    r = await client.put("/v1/actions/corpus", json={"project": "corpus",
                                                     "safety_profile": PROFILE})
    assert r.status_code in (200, 201), r.text
    agent = await new_key(client, "agent", projects=["corpus"])
    failures: list[str] = []
    registered: dict[str, dict] = {}
    n = 0
    for _, group in groupby(load_rule_cases(), key=lambda pair: pair[0].split("/")[0]):
        group = list(group)
        for old in (await client.get("/v1/rules")).json()["items"]:
            await client.delete(f"/v1/rules/{old['rule_id']}")
        for rule_id, body in group[0][1]["rules"].items():
            assert (await client.put(f"/v1/rules/{rule_id}", json=body)).status_code == 201
        for case_id, case in group:
            call, expect = case["call"], case["expect"]
            if call.get("home") is None and expect["verdict"] != "deny":
                continue  # a hook always has a home where its transcript lies
            entry = _entry(call)
            if registered.get(call["tool"]) != entry:
                assert (await client.put(f"/v1/tools/{call['tool']}", json=entry)
                        ).status_code in (200, 201)
                registered[call["tool"]] = entry
            n += 1
            r = await client.post(HOOK, json=_body(call, n), headers=agent)
            assert r.status_code == 200, r.text
            out = r.json()["hookSpecificOutput"]
            decision, reason = out["permissionDecision"], out["permissionDecisionReason"]
            found = DECISION.search(reason)
            assert found, (case_id, reason)
            record = (await client.get(f"/v1/decisions/{found.group(1)}")).json()
            matches = record["detail"].get("rules", [])
            enforced = [m for m in matches if m["mode"] == "enforce"]
            if decision == "deny" and "(rule_denied)" in reason:
                verdict, rule = "deny", record["detail"]["deny_details"]["rule"]["id"]
            elif decision == "ask":
                verdict, rule = "ask", record["detail"]["deny_details"]["rule"]["id"]
            elif classify := [m for m in enforced if m["effect"] == "classify"]:
                verdict, rule = "classify", classify[0]["id"]
            else:
                verdict, rule = "none", None
            if rule is not None and f"'{rule}'" not in reason and verdict != "classify":
                failures.append(f"{case_id}: the answer does not name rule {rule}")
            if (verdict, rule) != (expect["verdict"], expect.get("rule")):
                failures.append(f"{case_id}: {verdict} {rule} (expected {expect['verdict']} "
                                f"{expect.get('rule')}): {reason[:160]}")
    assert n >= 150
    assert not failures, "\n".join(failures)
