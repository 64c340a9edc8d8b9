"""A replay while the gate runs (issue 30 items 1 and 2), on SQLite and Postgres: a replay
never holds a write lock (decisions made meanwhile are answered and recorded, replays run
side by side), its checks let other requests in while they run, its candidate is bounded,
and its audit record identifies the candidate without copying it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy import text

from app.config import Settings
from app.replay import engine, service
from app.replay.schemas import MAX_CANDIDATE_ENTRIES
from app.store.engine import WRITE_OPTION, read_only
from tests.conftest import ADMIN_TOKEN, app_client
from tests.replay import corpus

SINCE = "2020-01-01T00:00:00Z"
DEADLINE = 60.0  # generous: the machine is shared
DECISION = {"plan_id": "p-live", "tool": {"name": "fs.read", "capability": {
    "writes": False, "checkpointable": True, "unsafe": False}}, "context": {}}


@pytest.fixture
def settings(database_url: str) -> Settings:
    # A short wait for locks: a decision blocked by a replay's write lock fails in 1 s.
    return Settings(database_url=database_url, admin_token=ADMIN_TOKEN,
                    masked_keys=["password", "token", corpus.MASKED_PATH_ARG],
                    db_timeout_seconds=1.0)


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(settings) as c:
        yield c


async def _live_plan(client: httpx.AsyncClient) -> None:
    assert (await client.put("/v1/actions/live", json={"project": "web"})).status_code < 300
    r = await client.post("/v1/plans", json={"action_id": "live", "plan_id": "p-live"})
    assert r.status_code == 201, r.text


class Gate:
    """Holds every replay inside its reading (its first batch) until released."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, expected: int) -> None:
        self.inside = 0
        self.all_inside = asyncio.Event()
        self.release = asyncio.Event()
        original = service.Replayer._batch

        async def held(replayer, *args, **kwargs):  # type: ignore[no-untyped-def]
            rows = await original(replayer, *args, **kwargs)
            if not self.release.is_set():
                self.inside += 1
                if self.inside >= expected:
                    self.all_inside.set()
                await self.release.wait()
            return rows

        monkeypatch.setattr(service.Replayer, "_batch", held)


async def test_decisions_are_answered_and_recorded_while_replays_run(client, monkeypatch):
    await corpus.build(client)
    await _live_plan(client)
    gate = Gate(monkeypatch, expected=4)
    replays = [asyncio.create_task(client.post("/v1/replay", json={"since": SINCE}))
               for _ in range(4)]
    try:
        # Before the fix, the route's session took SQLite's write lock (BEGIN IMMEDIATE)
        # before reading: the second replay waited for it and failed (503), so not all
        # four get inside; the decisions below then waited and answered 503.
        await asyncio.wait_for(gate.all_inside.wait(), DEADLINE)
        decided = []
        for _ in range(3):
            r = await client.post("/v1/authorize-tool", json=DECISION)
            assert r.status_code == 200, r.text
            decided.append(r.json()["decision_id"])
        r = await client.post("/v1/plans", json={"action_id": "live", "plan_id": "p-live-2"})
        assert r.status_code == 201, r.text  # a write of another kind
    finally:
        gate.release.set()
        answers = await asyncio.gather(*replays)
    for answer in answers:
        assert answer.status_code == 200, answer.text
        assert answer.json()["changed"] == 0
    for decision_id in decided:
        assert (await client.get(f"/v1/decisions/{decision_id}")).status_code == 200
    r = await client.get("/v1/decisions", params={"kind": "replay"})
    assert len(r.json()["items"]) == 4
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_a_read_only_session_takes_no_write_lock(client):
    sessions = client.app.state.sessions  # type: ignore[attr-defined]
    async with read_only(sessions) as reading:
        assert (await reading.execute(text("SELECT count(*) FROM chain_head"))).scalar() == 1
        if reading.bind.dialect.name == "postgresql":
            flag = (await reading.execute(text("SHOW transaction_read_only"))).scalar()
            assert flag == "on"
        # While the read is open, a write transaction starts and commits at once.
        async with sessions() as writing, writing.begin():
            await writing.connection(execution_options={WRITE_OPTION: True})
            await writing.execute(text("UPDATE chain_head SET updated_at = updated_at"))


async def test_the_checks_let_other_requests_in_while_they_run(client, monkeypatch):
    await corpus.build(client)
    original = engine.replay
    run_of = {"now": 0, "longest": 0}  # records replayed since the loop last ran others

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        # A costly record (as a 1 MB candidate made them): 0.5 ms of CPU each.
        until = time.perf_counter() + 0.0005
        while time.perf_counter() < until:
            pass
        run_of["now"] += 1
        run_of["longest"] = max(run_of["longest"], run_of["now"])
        return original(*args, **kwargs)

    monkeypatch.setattr(service, "replay", slow)
    task = asyncio.create_task(client.post("/v1/replay", json={"since": SINCE}))
    answered = 0
    while not task.done():
        await asyncio.sleep(0)  # the replay runs until it lets the loop go on
        run_of["now"] = 0
        assert (await client.get("/healthz")).status_code == 200
        answered += 1
    assert (await task).status_code == 200
    # Past 5 ms of checks the replay lets other requests in: at 0.5 ms a record, the next
    # look at the clock. Before, a whole batch of 1,000 records ran without a break.
    assert 0 < run_of["longest"] <= service.SLICE_CHECK, run_of
    assert answered > 2900 / service.SLICE_CHECK / 2


async def test_a_candidate_is_bounded(client):
    too_many = [f"c{i}" for i in range(MAX_CANDIDATE_ENTRIES + 1)]
    r = await client.post("/v1/replay", json={"since": SINCE, "candidate": {
        "profile": {"allowed_skill_categories": too_many}}})
    assert r.status_code == 422, r.text
    fields = [f["field"] for f in r.json()["error"]["details"]["fields"]]
    assert "candidate.profile.allowed_skill_categories" in fields
    r = await client.post("/v1/replay", json={"since": SINCE, "candidate": {
        "profile": {"allowed_skill_categories": ["x" * 201]}}})
    assert r.status_code == 422, r.text
    assert (await client.get("/v1/decisions", params={"kind": "replay"})).json()["items"] == []
    schema = (await client.get("/openapi.json")).json()["components"]["schemas"]
    categories = schema["CandidateProfile"]["properties"]["allowed_skill_categories"]
    assert categories["maxItems"] == MAX_CANDIDATE_ENTRIES
    assert categories["items"]["maxLength"] == 200
    at_bound = [f"c{i}" for i in range(MAX_CANDIDATE_ENTRIES)]
    r = await client.post("/v1/replay", json={"since": SINCE, "candidate": {
        "profile": {"allowed_skill_categories": at_bound}}})
    assert r.status_code == 200, r.text


async def test_the_audit_record_holds_the_candidates_digest_and_size(client):
    await corpus.build(client)
    categories = [f"category-{i:04d}" for i in range(MAX_CANDIDATE_ENTRIES)]
    r = await client.post("/v1/replay", json={"since": SINCE, "candidate": {
        "profile": {"allowed_skill_categories": categories}}})
    assert r.status_code == 200, r.text
    (record,) = (await client.get("/v1/decisions", params={"kind": "replay"})).json()["items"]
    held = record["detail"]["candidate"]
    assert set(held) == {"sha256", "bytes", "profile", "tools", "skills"}
    assert len(held["sha256"]) == 64 and held["bytes"] > 15 * MAX_CANDIDATE_ENTRIES
    assert held["profile"] is True and held["tools"] == held["skills"] == 0
    assert "category-0001" not in str(record["detail"])
