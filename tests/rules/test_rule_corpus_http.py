"""The shell corpus (tests/cases/shell, loaded by tests/rulecases.py) through HTTP, on
SQLite and Postgres: each file's rules PUT through /v1/rules, each case's tool registered
with its `shell`, `path_args` and `url_args`, each call a POST /v1/authorize-tool, and the
verdict read from the answer and its record as a user would: deny -> `rule_denied` naming
the rule (and what matched), ask -> check 6 asks (`human_approval_required` naming the
rule, client_flag mode), classify -> the rule is the first enforce classify among the
record's `detail.rules`, none -> no enforce rule matched. One app per database, the cases
one after another, every failure listed."""

from __future__ import annotations

from itertools import groupby

from tests.rulecases import load_rule_cases

PROFILE = {"require_sandbox": False, "require_checkpoints": False,
           "allow_unsafe_tools": False, "require_human_approval": False}


def _entry(call: dict) -> dict:
    entry = {"capability": {"writes": False, "checkpointable": True, "unsafe": False},
             "safety_category": "safe", "path_args": call.get("path_args") or [],
             "url_args": call.get("url_args") or []}
    if call.get("shell_arg"):
        entry["shell"] = {"arg": call["shell_arg"]}
    return entry


def _verdict(answer: dict, record: dict) -> tuple[str, dict | None, list[dict]]:
    matches = record["detail"].get("rules", [])
    deny = answer["deny"] or {}
    if deny.get("code") == "rule_denied":
        return "deny", deny["details"]["rule"], matches
    if deny.get("code") == "human_approval_required" and "rule" in deny["details"]:
        return "ask", deny["details"]["rule"], matches
    enforced = [m for m in matches if m["mode"] == "enforce"]
    assert not any(m["effect"] in ("deny", "ask") for m in enforced), (answer, matches)
    classify = [m for m in enforced if m["effect"] == "classify"]
    if classify:
        return "classify", classify[0], matches
    return "none", None, matches


async def test_the_shell_corpus_through_http(client):
    await client.put("/v1/projects/corpus", json={})
    r = await client.put("/v1/actions/corpus", json={"project": "corpus",
                                                     "safety_profile": PROFILE})
    assert r.status_code in (200, 201), r.text
    plan = (await client.post("/v1/plans", json={"action_id": "corpus"})).json()["plan_id"]
    cases = load_rule_cases()
    assert len(cases) >= 150
    failures: list[str] = []
    registered: dict[str, dict] = {}
    for _, group in groupby(cases, key=lambda pair: pair[0].split("/")[0]):
        group = list(group)
        for old in (await client.get("/v1/rules")).json()["items"]:
            assert (await client.delete(f"/v1/rules/{old['rule_id']}")).status_code == 204
        for rule_id, body in group[0][1]["rules"].items():
            r = await client.put(f"/v1/rules/{rule_id}", json=body)
            assert r.status_code == 201, (rule_id, r.text)
        for case_id, case in group:
            call, expect = case["call"], case["expect"]
            entry = _entry(call)
            if registered.get(call["tool"]) != entry:
                r = await client.put(f"/v1/tools/{call['tool']}", json=entry)
                assert r.status_code in (200, 201), r.text
                registered[call["tool"]] = entry
            context = {"sandbox_root": call["sandbox_root"]}
            if call.get("home"):
                context["variables"] = {"HOME": call["home"]}
            r = await client.post("/v1/authorize-tool", json={
                "plan_id": plan, "tool": {"name": call["tool"], "args": call["args"]},
                "context": context})
            assert r.status_code == 200, (case_id, r.text)
            answer = r.json()
            record = (await client.get(f"/v1/decisions/{answer['decision_id']}")).json()
            verdict, rule, matches = _verdict(answer, record)
            problems = []
            if verdict != expect["verdict"]:
                problems.append(f"verdict {verdict} (expected {expect['verdict']})")
            elif rule is not None and rule["id"] != expect["rule"]:
                problems.append(f"rule {rule['id']} (expected {expect['rule']})")
            elif "matched" in expect and rule is not None and rule["matched"] != expect["matched"]:
                problems.append(f"matched {rule['matched']!r} (expected {expect['matched']!r})")
            if "matches" in expect and [m["id"] for m in matches] != expect["matches"]:
                problems.append(f"matches {[m['id'] for m in matches]} "
                                f"(expected {expect['matches']})")
            if problems:
                failures.append(f"{case_id}: {'; '.join(problems)}")
    assert not failures, "\n".join(failures)
