"""What-if answers read money already spent (issue 35 item 2, SPEC §17), on SQLite and
Postgres: a shadow profile with a cost limit reads the plan's ledger as a live decision
would (taking no hold), and replay gives each decision the spend as of its time, rebuilt
from the log, or counts it unreplayable: never unchanged."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import httpx

from app.decisions.prune import prune
from tests.serving import TOOLGATE, serve, stop

READER = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}
SINCE = "2020-01-01T00:00:00Z"
CAP = {"profile": {"max_total_cost": 1.0}}


async def _plan(client, plan_id, *, project="web", profile=None):
    action = f"act-{plan_id}"
    body = {"project": project}
    if profile is not None:
        body["safety_profile"] = profile
    r = await client.put(f"/v1/actions/{action}", json=body)
    assert r.status_code < 300, r.text
    r = await client.post("/v1/plans", json={"action_id": action, "plan_id": plan_id})
    assert r.status_code == 201, r.text


async def _decide(client, plan_id, **context):
    r = await client.post("/v1/authorize-tool", json={"plan_id": plan_id, "tool": READER,
                                                      "context": context})
    assert r.status_code == 200, r.text
    return r.json()


async def _spend(client, decision, cost):
    r = await client.post(f"/v1/decisions/{decision['decision_id']}/outcome",
                          json={"status": "succeeded", "cost": cost})
    assert r.status_code == 201, r.text


async def _replay(client, candidate, **fields):
    r = await client.post("/v1/replay", json={"since": SINCE, "candidate": candidate,
                                              **fields})
    assert r.status_code == 200, r.text
    return r.json()


async def test_a_shadow_with_a_cost_cap_reads_what_the_plan_spent(client):
    await client.put("/v1/profiles/capped", json={"safety": {"max_total_cost": 1.0}})
    await _plan(client, "p-free")  # the global default: no cost limit
    await client.put("/v1/projects/web/settings", json={"shadow_profile": "capped"})
    first = await _decide(client, "p-free")
    await _spend(client, first, 10.0)
    second = await _decide(client, "p-free", estimated_cost=5.0)
    assert second["allowed"] is True  # the answer is the plan's own
    record = (await client.get(f"/v1/decisions/{second['decision_id']}")).json()
    assert record["shadow"] == {"profile": "capped", "version": 1, "allowed": False,
                                "code": "total_cost_limit_exceeded"}
    # The shadow only read: no hold was taken for a plan without limits.
    plan = (await client.get("/v1/plans/p-free")).json()
    assert plan["ledger"]["spent"] == 10.0 and plan["ledger"]["held"] == 0.0
    first_record = (await client.get(f"/v1/decisions/{first['decision_id']}")).json()
    assert first_record["shadow"]["allowed"] is True  # nothing was spent yet


async def test_replay_gives_each_decision_the_spend_as_of_its_time(client):
    await _plan(client, "p-free")
    before = await _decide(client, "p-free")
    await _spend(client, before, 10.0)
    after = await _decide(client, "p-free")
    answer = await _replay(client, CAP, examples=10)
    assert answer["checked"] == 2 and answer["changed"] == 1
    assert answer["allow_to_deny"] == 1 and answer["unreplayable"]["ledger"] == 0
    (example,) = answer["examples"]
    assert example["decision_id"] == after["decision_id"]
    assert example["after"] == {"allowed": False, "code": "total_cost_limit_exceeded"}
    per_plan = await _replay(client, {"profile": {"max_cost_per_plan": 10.0}})
    assert per_plan["changed"] == 1  # spent 10 reaches a limit of 10
    loose = await _replay(client, {"profile": {"max_cost_per_plan": 10.5}})
    assert loose["changed"] == 0
    # A window that starts after the spending still sees it (the log before is read).
    since = (await client.get(f"/v1/decisions/{after['decision_id']}")).json()["created_at"]
    late = await _replay(client, CAP, since=since)
    assert late["checked"] == 1 and late["allow_to_deny"] == 1


async def test_holds_and_credits_move_the_rebuilt_spend(client):
    # p-metered has a limit: its allowed call with an estimate holds 7 in project web.
    await _plan(client, "p-metered", profile={"max_total_cost": 1000.0})
    await _plan(client, "p-free")
    await _decide(client, "p-metered", estimated_cost=7.0)
    held = await _decide(client, "p-free")
    r = await client.post("/v1/projects/web/ledger/credit", json={"amount": 7.0,
                                                                 "reason": "top up"})
    assert r.status_code == 200, r.text
    credited = await _decide(client, "p-free")
    # Only p-free's decisions are replayed, but the project's spend counts p-metered's hold.
    answer = await _replay(client, {"profile": {"max_total_cost": 5.0}}, plan_id="p-free",
                           examples=10)
    assert answer["checked"] == 2
    assert [e["decision_id"] for e in answer["examples"]] == [held["decision_id"]]
    assert credited["decision_id"] not in str(answer)
    # The plan's own spend is 0: a per-plan cap changes nothing.
    assert (await _replay(client, {"profile": {"max_cost_per_plan": 5.0}},
                          plan_id="p-free"))["changed"] == 0


async def test_after_the_log_was_pruned_such_decisions_are_unreplayable(client):
    await _plan(client, "p-free")
    spent = await _decide(client, "p-free")
    await _spend(client, spent, 10.0)
    await prune(client.app.state.sessions, datetime.now(UTC))
    later = await _decide(client, "p-free")
    answer = await _replay(client, CAP)
    assert answer["changed"] == 0 and answer["checked"] == 0
    assert answer["unreplayable"]["ledger"] == 1
    # Without a cost limit in the candidate, nothing needs the spend.
    assert (await _replay(client, {"profile": {}}))["checked"] == 1
    assert later["allowed"] is True


def test_the_cli_gate_on_a_new_cost_cap(database_url: str, tmp_path: Path):
    token = "test-admin-token"
    proc, url = serve({"TOOLGATE_DATABASE_URL": database_url, "TOOLGATE_ADMIN_TOKEN": token},
                      tmp_path / "server.log", timeout=180)  # a loaded machine
    headers = {"Authorization": f"Bearer {token}"}
    try:
        with httpx.Client(base_url=url, headers=headers, timeout=30) as c:
            c.put("/v1/actions/deploy", json={"project": "web"}).raise_for_status()
            assert c.post("/v1/plans", json={"action_id": "deploy",
                                             "plan_id": "p-1"}).status_code == 201
            decided = c.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
            r = c.post(f"/v1/decisions/{decided.json()['decision_id']}/outcome",
                       json={"status": "succeeded", "cost": 10.0})
            assert r.status_code == 201, r.text
            assert c.post("/v1/authorize-tool", json={"plan_id": "p-1",
                                                      "tool": READER}).status_code == 200
        candidate = tmp_path / "candidate.yaml"
        candidate.write_text("profile:\n  max_total_cost: 1.0\n")
        env = {k: v for k, v in os.environ.items()
               if k not in ("TOOLGATE_URL", "TOOLGATE_TOKEN")}
        r = subprocess.run([TOOLGATE, "replay", "--since", SINCE, "-f", str(candidate),
                            "--fail-on", "allow_to_deny", "--url", url, "--token", token],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 1, r.stdout + r.stderr
        assert "changed: 1 (allow -> deny 1" in r.stdout
        assert "allow_to_deny transitions occur" in r.stderr
    finally:
        stop(proc)
