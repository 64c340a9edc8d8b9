"""POST /v1/replay (SPEC §12), on SQLite and Postgres: an unchanged candidate gives back
every stored verdict; a candidate's changes are counted by transition; masked inputs are
unreplayable, never unchanged; replay writes one audit record and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from app.config import Settings
from tests.conftest import ADMIN_TOKEN, app_client
from tests.replay import corpus

SINCE = "2020-01-01T00:00:00Z"


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                    masked_keys=["password", "token", corpus.MASKED_PATH_ARG])


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as c:
        yield c


async def _replay(client, candidate=None, **fields):
    r = await client.post("/v1/replay", json={"since": SINCE, "candidate": candidate or {},
                                              **fields})
    assert r.status_code == 200, r.text
    return r.json()


async def _count(client, **query) -> int:
    r = await client.get("/v1/decisions/stats", params=query)
    return r.json()["total"]["count"]


async def test_an_unchanged_candidate_gives_back_every_stored_verdict(client):
    decided = await corpus.build(client)
    assert decided > 2000
    stored = await _count(client, kind="authorize")
    assert stored == decided
    answer = await _replay(client, examples=1000)
    assert answer["changed"] == 0 and answer["examples"] == [] and answer["transitions"] == []
    assert answer["unreplayable"]["legacy"] == 0
    # The masked path argument is read by the path check: those decisions are not claimed.
    assert answer["unreplayable"]["masked"] == 2 * 13
    assert answer["checked"] + answer["unreplayable"]["masked"] == stored
    assert answer["truncated"] is False
    # The same with every field a candidate may name, each set to what was recorded:
    # a profile equal to the default changes only the plans that had another one.
    same_tools = await _replay(client, {"tools": {"io.list_files": corpus._knaif_tool_body(
        corpus.peercases.tool("io", "list_files"))}})
    assert same_tools["changed"] == 0


async def test_a_candidate_profile_and_registry_are_counted_by_transition(client):
    await corpus.build(client)
    loose = {"require_sandbox": False, "require_checkpoints": False,
             "allow_unsafe_tools": True, "max_retries_per_step": 100}
    answer = await _replay(client, {"profile": loose}, examples=5)
    assert answer["deny_to_allow"] > 0
    assert answer["changed"] == (answer["allow_to_deny"] + answer["deny_to_allow"]
                                 + answer["code_changed"])
    assert sum(t["count"] for t in answer["transitions"]) == answer["changed"]
    assert len(answer["examples"]) == 5
    example = answer["examples"][0]
    assert example["before"] != example["after"] and example["decision_id"]
    record = (await client.get(f"/v1/decisions/{example['decision_id']}")).json()
    assert record["allowed"] == example["before"]["allowed"]
    assert record["code"] == example["before"]["code"]
    # Removing a registered tool: in the project that refuses unregistered tools its
    # decisions become tool_not_activated; elsewhere the request's own word decides
    # (knaif's tools are sent without a capability: such a call is no longer valid).
    removed = await _replay(client, {"tools": {"io.list_files": None}}, project="locked",
                            tool="io.list_files")
    assert removed["checked"] > 0
    assert {t["to"] for t in removed["transitions"]} <= {"tool_not_activated", "read_only"}
    assert any(t["to"] == "tool_not_activated" for t in removed["transitions"])
    elsewhere = await _replay(client, {"tools": {"io.list_files": None}}, project="web",
                              tool="io.list_files")
    assert {t["to"] for t in elsewhere["transitions"]} == {"invalid_input"}


async def test_filters_scope_and_window(client):
    await corpus.build(client)
    whole = await _replay(client)
    one_plan = await _replay(client, plan_id="web-strict")
    assert 0 < one_plan["checked"] < whole["checked"]
    future = datetime.now(UTC) + timedelta(days=1)
    empty = await _replay(client, since=future.isoformat(),
                          until=(future + timedelta(days=1)).isoformat())
    assert empty["checked"] == 0 and empty["to"] is None
    # An auditor of one project replays that project's decisions only.
    r = await client.post("/v1/keys", json={"name": "aud", "role": "auditor",
                                            "projects": ["web"]})
    headers = {"Authorization": f"Bearer {r.json()['key']}"}
    r = await client.post("/v1/replay", headers=headers, json={"since": SINCE})
    assert r.status_code == 200, r.text
    web = await _replay(client, project="web")
    assert r.json()["checked"] == web["checked"] < whole["checked"]
    r = await client.post("/v1/replay", headers=headers, json={"since": SINCE,
                                                               "project": "srv"})
    assert r.status_code == 404
    r = await client.post("/v1/keys", json={"name": "agent", "role": "agent",
                                            "projects": None})
    r = await client.post("/v1/replay", json={"since": SINCE},
                          headers={"Authorization": f"Bearer {r.json()['key']}"})
    assert r.status_code == 403


async def test_past_the_cap_the_answer_is_truncated(settings):
    async with app_client(settings.model_copy(update={"replay_max_records": 50})) as client:
        await corpus.build(client)
        answer = await _replay(client)
        assert answer["truncated"] is True
        assert answer["checked"] + answer["unreplayable"]["masked"] == 50
        assert answer["to"] is not None


async def test_replay_writes_one_audit_record_and_nothing_else(client):
    await corpus.build(client)
    before = (await client.get("/v1/audit/export")).text.count("\n")
    answer = await _replay(client, {"profile": {}}, project="web")
    lines = (await client.get("/v1/audit/export")).text.splitlines()
    assert len(lines) == before + 1
    r = await client.get("/v1/decisions", params={"kind": "replay"})
    (record,) = r.json()["items"]
    assert record["project"] == "web"
    assert record["detail"]["result"]["checked"] == answer["checked"]
    # The candidate is identified (digest, size), not copied (issue 30 item 2).
    assert record["detail"]["candidate"]["profile"] is True
    assert len(record["detail"]["candidate"]["sha256"]) == 64
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


@pytest.mark.parametrize(("body", "field"), [
    ({}, "since"),
    ({"since": "yesterday"}, "since"),
    ({"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "since"),
    ({"since": SINCE, "examples": 1001}, "examples"),
    ({"since": SINCE, "candidate": {"profile": {"require_sandbox": "yes"}}},
     "candidate.profile.require_sandbox"),
    ({"since": SINCE, "candidate": {"tools": {"t": {"capability": {"writes": True}}}}},
     "candidate.tools.t.capability.checkpointable"),
    ({"since": SINCE, "candidate": {"rules": {"r": {"tools": ["*"], "effect": "maybe"}}}},
     "candidate.rules.r.effect"),
    ({"since": SINCE, "candidate": {"rules": {"r": {"tools": ["*"], "effect": "deny",
                                                    "when": {"expr": "1 +"}}}}},
     "candidate.rules.r.when.expr"),
    ({"since": SINCE, "project": "no spaces"}, "project"),
    ({"since": "0001-01-01T00:00:00+05:00"}, "since"),
    ({"since": SINCE, "until": "9999-12-31T23:59:59-05:00"}, "until"),
    ({"since": SINCE, "candidate": {"tools": {"bad name!": None}}},
     "candidate.tools.bad name!.[key]"),
])
async def test_bad_input_is_a_422_naming_the_field(client, body, field):
    r = await client.post("/v1/replay", json=body)
    assert r.status_code == 422, r.text
    assert field in [f["field"] for f in r.json()["error"]["details"]["fields"]], r.json()
    assert await _count(client, kind="replay") == 0
