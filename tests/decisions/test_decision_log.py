"""The durable decision log: every decision recorded, queries, stats, export, verify."""

import asyncio
import inspect
import os
import signal
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import orjson
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from app.config import Settings
from app.log.chain import verify
from app.log.decision_log import DecisionLog
from tests.conftest import ADMIN_TOKEN, app_client

WRITER = {"name": "fs.write", "capability": {"writes": True, "checkpointable": True,
                                             "unsafe": False}}
READER = {"name": "fs.read", "capability": {"writes": False, "checkpointable": True,
                                            "unsafe": False}}

# The tests below wait for events, never for a guess at how long something takes: a loaded
# machine (the suite beside other runs on two cores) is slower than any such guess.
# A commit that must succeed gets this deadline, which no loaded machine misses; the tests
# of the deadline shorten it (`_deadline`) only while the commit cannot happen at all.
ANSWERED = 60.0
# How long a test waits for an event before it fails rather than hang.
EVENTUALLY = 30.0


async def _until(condition: Callable[[], Any], what: str) -> None:
    """Until `condition()` (or what it returns, awaited) is true; at most EVENTUALLY."""
    deadline = time.monotonic() + EVENTUALLY
    while True:
        met = condition()
        if inspect.isawaitable(met):
            met = await met
        if met:
            return
        assert time.monotonic() < deadline, f"not within {EVENTUALLY}s: {what}"
        await asyncio.sleep(0.005)


@contextmanager
def _deadline(log: DecisionLog, seconds: float) -> Iterator[None]:
    """The log's deadline (decision_log_timeout_seconds) for the frames sent meanwhile."""
    configured, log._timeout = log._timeout, seconds
    try:
        yield
    finally:
        log._timeout = configured


async def _plan(client, plan_id="p-1", read_only=False, project="web"):
    await client.put("/v1/actions/act-" + plan_id, json={"project": project,
                                                         "read_only": read_only})
    r = await client.post("/v1/plans", json={"action_id": "act-" + plan_id, "plan_id": plan_id})
    assert r.status_code == 201


async def test_every_decision_is_recorded_with_its_outcome(client):
    await _plan(client, read_only=True)
    r = await client.post("/v1/authorize-tool", headers={"X-Request-ID": "req-42"}, json={
        "plan_id": "p-1", "tool": WRITER,
        "context": {"metadata": {"password": "hunter2", "ticket": "T-1"}}})
    decision = r.json()
    assert decision["deny"]["code"] == "read_only"
    rec = (await client.get(f"/v1/decisions/{decision['decision_id']}")).json()
    assert rec["allowed"] is False and rec["code"] == "read_only"
    assert rec["error"] == "ToolAccessDeniedError" and rec["check"] == "read_only"
    assert (rec["project"], rec["plan_id"], rec["action_id"], rec["tool"]) == (
        "web", "p-1", "act-p-1", "fs.write")
    assert rec["request_id"] == "req-42"
    assert rec["provenance"] == "global" and rec["latency_ms"] >= 0
    assert rec["detail"]["tool"]["writes"] is True
    # Masked keys are never stored.
    assert rec["detail"]["context"]["metadata"] == {"password": "[masked]", "ticket": "T-1"}
    assert "hunter2" not in orjson.dumps(rec).decode()


async def test_batch_items_plans_resolves_and_config_changes_are_recorded(client):
    await _plan(client)
    r = await client.post("/v1/authorize-tools", json={"requests": [
        {"plan_id": "p-1", "tool": READER}, {"plan_id": "p-1", "tool": WRITER}]})
    ids = [item["decision_id"] for item in r.json()["items"]]
    for decision_id in ids:
        assert (await client.get(f"/v1/decisions/{decision_id}")).status_code == 200
    await client.post("/v1/resolve", json={"action_id": "act-p-1"})
    kinds = [i["kind"] for i in (await client.get("/v1/decisions")).json()["items"]]
    assert kinds == ["resolve", "authorize", "authorize", "plan"]
    config = (await client.get("/v1/decisions", params={"kind": "config"})).json()["items"]
    assert [c["detail"]["resource"] for c in config] == ["action"]
    assert config[0]["detail"]["before"] is None
    assert config[0]["detail"]["after"]["project"] == "web"


async def test_filters_and_cursor_pagination(client):
    await _plan(client, "a", project="alpha")
    await _plan(client, "b", project="beta")
    for plan in ("a", "b"):
        for tool in (READER, WRITER):
            await client.post("/v1/authorize-tool", json={"plan_id": plan, "tool": tool})
    base = {"kind": "authorize"}
    assert len((await client.get("/v1/decisions", params=base)).json()["items"]) == 4
    alpha = (await client.get("/v1/decisions", params={**base, "project": "alpha"})).json()
    assert {i["plan_id"] for i in alpha["items"]} == {"a"}
    denied = (await client.get("/v1/decisions",
                               params={**base, "allowed": "false"})).json()["items"]
    assert {i["code"] for i in denied} == {"sandbox_required"}
    by_code = (await client.get("/v1/decisions", params={"code": "sandbox_required"})).json()
    assert len(by_code["items"]) == 2
    by_tool = (await client.get("/v1/decisions", params={**base, "tool": "fs.read"})).json()
    assert all(i["allowed"] for i in by_tool["items"])
    # Pages are newest first and stable when new decisions arrive between pages.
    first = (await client.get("/v1/decisions", params={**base, "limit": 3})).json()
    await client.post("/v1/authorize-tool", json={"plan_id": "a", "tool": READER})
    second = (await client.get("/v1/decisions", params={**base, "limit": 3,
                                                        "cursor": first["next_cursor"]})).json()
    seqs = [i["seq"] for i in first["items"] + second["items"]]
    assert seqs == sorted(seqs, reverse=True) and len(set(seqs)) == 4
    assert second["next_cursor"] is None


async def test_bad_queries_are_422(client):
    for params in ({"limit": 0}, {"limit": 1001}, {"allowed": "maybe"}, {"since": "yesterday"},
                   {"cursor": "???"}, {"kind": "nope"},
                   {"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}):
        r = await client.get("/v1/decisions", params=params)
        assert r.status_code == 422, params
        assert r.json()["error"]["code"] == "invalid_input"
    assert (await client.get("/v1/decisions/nope")).status_code == 404
    assert (await client.get("/v1/decisions/stats", params={"group_by": "x"})).status_code == 422


async def test_since_and_until_are_rfc3339_date_times(client):
    """SPEC §6: RFC 3339. Before, any text pydantic reads as a time passed: `until=0.5` was
    half a second after the epoch, `1700000000` seconds since it, a date alone midnight."""
    not_rfc3339 = ["0.5", "1700000000", "2026-01-01", "2026-01-01T00:00:00",
                   "2026-01-01 00:00:00Z", "2026-01-01T00:00Z"]
    for route in ("/v1/decisions", "/v1/decisions/stats", "/v1/audit/export",
                  "/v1/audit/verify"):
        for field in ("since", "until"):
            for value in not_rfc3339:
                r = await client.get(route, params={field: value})
                assert r.status_code == 422, (route, field, value, r.text)
                assert [f["field"] for f in r.json()["error"]["details"]["fields"]] == [field]
        for value in ("2026-01-01T00:00:00Z", "2026-01-01t00:00:00.5+05:30"):
            assert (await client.get(route, params={"until": value})).status_code == 200


async def test_stats(client):
    await _plan(client)
    for tool in (READER, WRITER, WRITER):
        await client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": tool})
    stats = (await client.get("/v1/decisions/stats",
                              params={"group_by": "code", "bucket": "minute"})).json()
    assert stats["total"] == {"count": 3, "allowed": 1, "denied": 2}
    groups = {g["key"]: g["count"] for g in stats["groups"]}
    assert groups == {"sandbox_required": 2, None: 1}
    assert sum(b["count"] for b in stats["series"]) == 3
    assert stats["series"][0]["bucket"].endswith("Z")
    by_allowed = (await client.get("/v1/decisions/stats", params={"group_by": "allowed"})).json()
    assert {g["key"]: g["count"] for g in by_allowed["groups"]} == {True: 1, False: 2}


async def _export(client, **params):
    r = await client.get("/v1/audit/export", params=params)
    assert r.status_code == 200
    return [orjson.loads(line) for line in r.text.splitlines()]


async def test_export_and_verify_detect_tampering(client, settings):
    await _plan(client)
    for _ in range(5):
        await client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": WRITER})
    records = await _export(client)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert verify(records, anchor=(0, "0" * 64)).ok
    status = (await client.get("/v1/audit/verify")).json()
    assert status["ok"] is True and status["checked"] == len(records)
    assert status["head"] == records[-1]["hash"]

    csv_text = (await client.get("/v1/audit/export", params={"format": "csv"})).text
    assert csv_text.splitlines()[0].startswith("seq,decision_id,kind")
    assert len(csv_text.splitlines()) == len(records) + 1

    # Offline: altered, removed and reordered records are found.
    altered = [dict(r) for r in records]
    altered[3]["allowed"] = True
    assert verify(altered, anchor=(0, "0" * 64)).first_bad["seq"] == 4
    removed = records[:2] + records[3:]
    assert verify(removed, anchor=(0, "0" * 64)).first_bad["seq"] == 4
    swapped = records[:2] + [records[3], records[2]] + records[4:]
    assert not verify(swapped, anchor=(0, "0" * 64)).ok

    # In the database: alter one record, then remove one.
    engine = create_async_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.execute(text("UPDATE decision_log SET allowed = true WHERE seq = 5"))
    bad = (await client.get("/v1/audit/verify")).json()
    assert bad["ok"] is False and bad["first_bad"]["seq"] == 5
    assert "altered" in bad["first_bad"]["reason"]
    async with engine.begin() as conn:
        await conn.execute(text("DELETE FROM decision_log WHERE seq = 5"))
    bad = (await client.get("/v1/audit/verify")).json()
    assert bad["ok"] is False and bad["first_bad"]["seq"] == 6
    async with engine.begin() as conn:
        await conn.execute(text(
            "DELETE FROM decision_log WHERE seq = (SELECT max(seq) FROM decision_log)"))
    await engine.dispose()


async def test_truncating_the_newest_records_is_detected_against_the_head(client, settings):
    await _plan(client)
    for _ in range(3):
        await client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
    engine = create_async_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.execute(text(
            "DELETE FROM decision_log WHERE seq = (SELECT max(seq) FROM decision_log)"))
    await engine.dispose()
    bad = (await client.get("/v1/audit/verify")).json()
    assert bad["ok"] is False and "newest" in bad["first_bad"]["reason"]


async def test_concurrent_decisions_share_commits_and_chain_stays_whole(client):
    await _plan(client)
    responses = await asyncio.gather(*[
        client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
        for _ in range(200)
    ])
    assert all(r.status_code == 200 for r in responses)
    log = client.app.state.decision_log
    assert log.records >= 200 and log.batches < log.records
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_the_chain_stays_one_when_other_transactions_extend_it_between_batches(
        client):
    """The writer process chains each batch onto the head it last wrote (on Postgres,
    optimistically). Configuration changes extend the same chain from the API's own
    transactions in between; the writer must notice and chain onto them, never fork."""
    await _plan(client)
    decisions = []
    for turn in range(6):
        answers = await asyncio.gather(*[
            client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
            for _ in range(3)])
        decisions += [a.json()["decision_id"] for a in answers]
        changed = await client.put(f"/v1/actions/other-{turn}",
                                   json={"project": "web", "read_only": False})
        assert changed.status_code in (200, 201)
    verified = (await client.get("/v1/audit/verify")).json()
    assert verified["ok"] is True
    listed = (await client.get("/v1/decisions", params={"limit": 200})).json()["items"]
    assert sorted(i["decision_id"] for i in listed if i["kind"] == "authorize") \
        == sorted(decisions)
    config = (await client.get("/v1/decisions", params={"kind": "config"})).json()["items"]
    assert len(config) == 7  # the plan's action and the six others


async def test_no_record_no_allow(client, settings):
    """When the store cannot record, the answer is 503, never an allow; once it can again,
    decisions flow again."""
    await _plan(client)
    assert (await client.post("/v1/authorize-tool",
                              json={"plan_id": "p-1", "tool": READER})).json()["allowed"]
    engine = create_async_engine(settings.database_url)
    async with engine.begin() as conn:  # the log's table disappears under the writer
        await conn.execute(text("ALTER TABLE decision_log RENAME TO decision_log_away"))
    for _ in range(3):
        r = await client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
        assert r.status_code == 503
        assert r.json()["error"]["code"] == "decision_not_recorded"
        assert "allowed" not in r.text
    async with engine.begin() as conn:
        await conn.execute(text("ALTER TABLE decision_log_away RENAME TO decision_log"))
    await engine.dispose()
    r = await client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
    assert r.status_code == 200 and r.json()["allowed"] is True
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_recorded_context_has_every_field(client):
    from app.authorize.schemas import ContextIn

    r = await client.post("/v1/authorize-tool", json={"tool": READER, "context": {
        "sandbox_id": "sb", "confirmed": True}})
    rec = (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
    assert set(rec["detail"]["context"]) == set(ContextIn.model_fields)
    assert rec["detail"]["context"]["sandbox_id"] == "sb"
    assert rec["detail"]["context"]["confirmed"] is True


async def test_out_of_range_times_and_forged_cursors_are_422(client):
    import base64

    def b64(raw: bytes) -> str:
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    for path in ("/v1/decisions", "/v1/decisions/stats", "/v1/audit/export",
                 "/v1/audit/verify"):
        for params in ({"since": "0001-01-01T00:00:00+05:00"},
                       {"until": "9999-12-31T23:59:59-14:00"}):
            r = await client.get(path, params=params)
            assert r.status_code == 422, (path, params, r.text)
    r = await client.get("/v1/decisions", params={"cursor": b64(b"s" + b"9" * 30)})
    assert r.status_code == 422
    for forged in (b'["2026-01-01T00:00:00","x"]', b'["0001-01-01T00:00:00+05:00","x"]'):
        r = await client.get("/v1/plans", params={"cursor": b64(forged)})
        assert r.status_code == 422, forged


async def test_time_windows_hold_every_record_whatever_the_write_order(client, settings):
    """Record times follow decision time, seq follows write order: a window must still
    export every record whose time is inside it."""
    from datetime import datetime, timedelta

    for _ in range(6):
        await client.post("/v1/authorize-tool", json={"tool": READER})
    records = [orjson.loads(x) for x in (await client.get("/v1/audit/export")).text.split()]
    t3, t4 = (datetime.fromisoformat(records[i]["created_at"].replace("Z", "+00:00"))
              for i in (2, 3))
    between = t3 + (t4 - t3) / 2
    if t4 - t3 < timedelta(microseconds=2):
        t4, between = t3 + timedelta(milliseconds=2), t3 + timedelta(milliseconds=1)
    engine = create_async_engine(settings.database_url)
    async with engine.begin() as conn:  # seq 6 was decided between seq 3 and seq 4
        sqlite = conn.dialect.name == "sqlite"
        for seq, moment in ((6, between), (4, t4)):
            value = moment.replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite \
                else moment
            await conn.execute(text("UPDATE decision_log SET created_at = :t WHERE seq = :s"),
                               {"t": value, "s": seq})
    await engine.dispose()
    window = {"since": records[2]["created_at"],
              "until": (t4 + timedelta(microseconds=1)).isoformat()}
    got = [orjson.loads(x)["seq"] for x in
           (await client.get("/v1/audit/export", params=window)).text.split()]
    assert {3, 4, 6} <= set(got), got


async def test_verify_up_to_now_finds_truncation(client, settings):
    for _ in range(4):
        await client.post("/v1/authorize-tool", json={"tool": READER})
    engine = create_async_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.execute(text(
            "DELETE FROM decision_log WHERE seq = (SELECT max(seq) FROM decision_log)"))
    await engine.dispose()
    for params in ({}, {"until": "2100-01-01T00:00:00Z"},
                   {"since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z"}):
        r = (await client.get("/v1/audit/verify", params=params)).json()
        assert r["ok"] is False, params


def test_the_writer_process_writes_every_column_of_the_table():
    from app.log.chain import COLUMNS
    from app.log.tables import LogRecord

    assert COLUMNS == tuple(c.name for c in LogRecord.__table__.columns)


@pytest.fixture
async def process_client(settings):  # type: ignore[no-untyped-def]
    """A client whose decision log has a writer process: the default (`auto`) on either
    database, asked for as `process` here so that no default can change what is tested."""
    changed = settings.model_copy(update={"decision_log_writer": "process",
                                          "decision_log_timeout_seconds": ANSWERED})
    async with app_client(changed) as c:
        assert c.app.state.decision_log._process is not None
        yield c


async def test_a_writer_that_dies_fails_what_it_held_and_is_replaced(process_client):
    """The writer process is killed with a decision in flight: that request gets 503 (never
    an allow); the next decision starts a new writer and is recorded."""
    await _plan(process_client)
    authorize = {"plan_id": "p-1", "tool": READER}
    assert (await process_client.post("/v1/authorize-tool", json=authorize)).status_code == 200
    log = process_client.app.state.decision_log
    pid = log._process.pid
    os.kill(pid, signal.SIGSTOP)  # holds the next frame without acknowledging it
    pending = asyncio.ensure_future(process_client.post("/v1/authorize-tool", json=authorize))
    await _until(lambda: log._inflight, "the decision's frame sent to the writer")
    assert not pending.done()
    os.kill(pid, signal.SIGKILL)
    # At the writer's exit, not at the commit deadline (ANSWERED, longer than this wait).
    r = await asyncio.wait_for(pending, EVENTUALLY)
    assert r.status_code == 503 and r.json()["error"]["code"] == "decision_not_recorded"
    assert "writer exited" in r.json()["error"]["message"] and "allowed" not in r.text
    r = await process_client.post("/v1/authorize-tool", json=authorize)
    assert r.status_code == 200 and r.json()["allowed"] is True
    assert log._process.pid != pid
    assert (await process_client.get(f"/v1/decisions/{r.json()['decision_id']}")).status_code == 200
    assert (await process_client.get("/v1/audit/verify")).json()["ok"] is True


async def test_a_new_writers_frames_are_not_failed_with_the_old_writer(process_client):
    """The old writer's exit is still being awaited when a request starts a new writer:
    that request is recorded and allowed; only what the old writer held may fail."""
    await _plan(process_client)
    authorize = {"plan_id": "p-1", "tool": READER}
    assert (await process_client.post("/v1/authorize-tool", json=authorize)).status_code == 200
    log = process_client.app.state.decision_log
    old = log._process
    exited = old.wait

    async def noticed_late() -> int:  # until a frame is in flight to the next writer
        for _ in range(1000):
            if log._inflight:
                break
            await asyncio.sleep(0.002)
        return await exited()

    old.wait = noticed_late
    os.kill(old.pid, signal.SIGKILL)
    for _ in range(500):
        if not log.running():
            break
        await asyncio.sleep(0.01)
    r = await asyncio.wait_for(process_client.post("/v1/authorize-tool", json=authorize), 10)
    assert r.status_code == 200 and r.json()["allowed"] is True, r.text
    assert log._process is not old
    assert (await process_client.get(f"/v1/decisions/{r.json()['decision_id']}")).status_code == 200


async def test_a_decision_not_committed_in_time_is_refused(settings):
    """decision_log_timeout_seconds bounds the wait for the commit: past it, 503 (never an
    allow), and the next decision is recorded. Nothing here races the machine's speed: the
    writer is stopped before the decision is sent and goes on only once it was refused, so
    its commit cannot come in time however fast the machine; the commits that must succeed
    have a deadline no loaded machine misses."""
    changed = settings.model_copy(update={"decision_log_writer": "process",
                                          "decision_log_timeout_seconds": ANSWERED})
    async with app_client(changed) as client:
        log = client.app.state.decision_log
        assert log._timeout == ANSWERED  # the setting is the log's deadline
        await _plan(client)
        authorize = {"plan_id": "p-1", "tool": READER}
        assert (await client.post("/v1/authorize-tool", json=authorize)).status_code == 200
        async with _stopped(log._process):
            with _deadline(log, 0.3):
                # Only the deadline can answer it: the writer can neither commit nor die.
                r = await asyncio.wait_for(client.post("/v1/authorize-tool", json=authorize),
                                           EVENTUALLY)
        assert r.status_code == 503 and r.json()["error"]["code"] == "decision_not_recorded"
        assert "not recorded within 0.3s" in r.json()["error"]["message"]
        assert "allowed" not in r.text
        r = await client.post("/v1/authorize-tool", json=authorize)
        assert r.status_code == 200 and r.json()["allowed"] is True
        assert (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).status_code == 200
        assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_a_decision_is_recorded_at_the_time_it_was_made(client):
    """The hot path stamps records with integer nanoseconds; the writer stores and hashes
    the same ISO text (microseconds, Z) as every other record, and the chain verifies."""
    from datetime import UTC, datetime, timedelta

    await _plan(client)
    before = datetime.now(UTC)
    r = await client.post("/v1/authorize-tool", json={"plan_id": "p-1", "tool": READER})
    after = datetime.now(UTC)
    rec = (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).json()
    stamp = datetime.fromisoformat(rec["created_at"].replace("Z", "+00:00"))
    assert before - timedelta(microseconds=1) <= stamp <= after
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


def _pg_settings(url: str, **changes: object) -> Settings:
    """Postgres with the group commit on the worker's own loop (inline), which the tests
    below exercise; the default writer process is covered by the process tests above."""
    changes.setdefault("decision_log_writer", "inline")
    changes.setdefault("decision_log_timeout_seconds", ANSWERED)
    return Settings(database_url=url, admin_token=ADMIN_TOKEN, **changes)  # type: ignore[arg-type]


async def _writer_backend(client: httpx.AsyncClient) -> int:
    store = client.app.state.decision_log._local.writer.store  # type: ignore[attr-defined]
    return store._conn.get_server_pid()


@asynccontextmanager
async def _head_locked(url: str) -> AsyncIterator[Any]:
    """Another transaction holds the chain head's row lock: commits wait behind it."""
    import asyncpg

    other = await asyncpg.connect(url.replace("+asyncpg", ""))
    try:
        async with other.transaction():
            await other.execute("SELECT 1 FROM chain_head WHERE id = 1 FOR UPDATE")
            yield other
    finally:
        await other.close()


async def _authorized_once(client: httpx.AsyncClient) -> dict:
    """The plan, and one decision recorded: the body to send again."""
    await _plan(client)
    authorize = {"plan_id": "p-1", "tool": READER}
    assert (await client.post("/v1/authorize-tool", json=authorize)).status_code == 200
    return authorize


async def test_by_default_a_postgres_worker_commits_through_its_own_writer_process(
        postgres_url):
    async with app_client(_pg_settings(postgres_url, decision_log_writer="auto")) as client:
        log = client.app.state.decision_log
        authorize = await _authorized_once(client)
        assert log._local is None and log._process is not None
        r = await client.post("/v1/authorize-tool", json=authorize)
        assert r.status_code == 200 and r.json()["allowed"] is True
        assert (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).status_code == 200
        assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_inline_a_postgres_worker_commits_on_its_own_event_loop(postgres_url):
    """With decision_log_writer=inline, Postgres and no shared writer, the group commit runs
    on the worker's event loop: no writer process; every decision is recorded once and the
    chain verifies."""
    async with app_client(_pg_settings(postgres_url)) as client:
        log = client.app.state.decision_log
        assert log._process is None and log._local is not None
        await _plan(client)
        authorize = {"plan_id": "p-1", "tool": READER}
        answers = await asyncio.gather(*[client.post("/v1/authorize-tool", json=authorize)
                                         for _ in range(80)])
        assert {r.status_code for r in answers} == {200}
        for r in answers[::16]:
            found = await client.get(f"/v1/decisions/{r.json()['decision_id']}")
            assert found.status_code == 200
        listed = (await client.get("/v1/decisions", params={"limit": 200})).json()
        ids = [d["decision_id"] for d in listed["items"]]
        assert {r.json()["decision_id"] for r in answers} <= set(ids) and len(set(ids)) == len(ids)
        assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_a_lost_postgres_connection_fails_what_it_held_and_the_next_reconnects(
        postgres_url):
    """The inline writer's connection is cut while a decision waits for its commit: that
    request gets 503 at once (never an allow); the next decision reconnects and is recorded."""
    async with app_client(_pg_settings(postgres_url)) as client:
        authorize = await _authorized_once(client)
        backend = await _writer_backend(client)
        async with _head_locked(postgres_url) as other:
            pending = asyncio.ensure_future(client.post("/v1/authorize-tool", json=authorize))
            await _until(lambda: other.fetchval(  # its commit waits for the head's lock
                "SELECT cardinality(pg_blocking_pids($1)) > 0", backend),
                "the writer's commit waiting for the chain head's lock")
            assert not pending.done()
            await other.execute("SELECT pg_terminate_backend($1)", backend)
            # At the lost connection, not at the commit deadline (ANSWERED, longer).
            r = await asyncio.wait_for(pending, EVENTUALLY)
        assert r.status_code == 503 and r.json()["error"]["code"] == "decision_not_recorded"
        assert "allowed" not in r.text
        r = await client.post("/v1/authorize-tool", json=authorize)
        assert r.status_code == 200 and r.json()["allowed"] is True
        assert await _writer_backend(client) != backend
        assert (await client.get(f"/v1/decisions/{r.json()['decision_id']}")).status_code == 200
        assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_an_inline_commit_that_hangs_is_refused_in_time_and_the_log_goes_on(
        postgres_url):
    """A commit held up (another transaction keeps the chain head locked) answers 503 once
    decision_log_timeout_seconds pass; when the lock goes, decisions are recorded again.
    The deadline is short only while the lock makes the commit impossible (see ANSWERED)."""
    async with app_client(_pg_settings(postgres_url)) as client:
        log = client.app.state.decision_log
        authorize = await _authorized_once(client)
        async with _head_locked(postgres_url):
            with _deadline(log, 0.3):
                r = await asyncio.wait_for(client.post("/v1/authorize-tool", json=authorize),
                                           EVENTUALLY)
        assert r.status_code == 503 and "not recorded within 0.3s" in r.text
        r = await client.post("/v1/authorize-tool", json=authorize)
        assert r.status_code == 200 and r.json()["allowed"] is True
        assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_closing_the_inline_log_commits_what_was_sent(postgres_url):
    """Shutdown drains: decisions handed to the log before close() are committed."""
    from app.log.decision_log import DecisionLog
    from app.log.records import new_record

    log = DecisionLog(postgres_url, writer="inline")
    await log.start()
    assert log._local is not None
    writes = [asyncio.ensure_future(log.write([new_record("authorize", f"d-{i}")]))
              for i in range(50)]
    await asyncio.sleep(0)
    await log.close()
    assert all(w.done() and w.exception() is None for w in writes)
    engine = create_async_engine(postgres_url)
    try:
        async with engine.connect() as conn:
            count = (await conn.execute(text(
                "SELECT count(*) FROM decision_log WHERE decision_id LIKE 'd-%'"))).scalar()
    finally:
        await engine.dispose()
    assert count == 50


async def _bounded_while_stalled(client: httpx.AsyncClient, stalled: Any) -> None:
    """With 8 records allowed to wait (WAITING_BATCHES 2 x max_batch 4) and the commit
    stalled by `stalled` (an async context manager): 4 decisions go out and wait, of 20 more
    the first 4 are taken and 16 refused at once (503); once the stall ends every decision
    taken is recorded, and so are later ones."""
    log = client.app.state.decision_log
    # What is taken waits for the stall's end, not for a deadline (see ANSWERED).
    with _deadline(log, ANSWERED):
        authorize = await _authorized_once(client)
        async with stalled:
            first = [asyncio.ensure_future(client.post("/v1/authorize-tool", json=authorize))
                     for _ in range(4)]
            await _until(lambda: log._unanswered == 4, "the first 4 records sent")
            more = [asyncio.ensure_future(client.post("/v1/authorize-tool", json=authorize))
                    for _ in range(20)]
            await _until(lambda: log._unanswered == 8 and sum(m.done() for m in more) >= 16,
                         "4 more records sent, and 16 decisions answered")
            refused = [m.result() for m in more if m.done()]
            taken = first + [m for m in more if not m.done()]
            assert len(refused) == 16 and len(taken) == 8
            assert {r.status_code for r in refused} == {503}
            assert "the decision log is behind" in refused[0].json()["error"]["message"]
        answered = await asyncio.wait_for(asyncio.gather(*taken), EVENTUALLY)
        assert {r.status_code for r in answered} == {200}
        r = await client.post("/v1/authorize-tool", json=authorize)
        assert r.status_code == 200 and r.json()["allowed"] is True
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def test_while_postgres_hangs_the_records_waiting_are_bounded(postgres_url, monkeypatch):
    """The database neither commits nor refuses (the chain head stays locked): the inline
    writer's records wait in the worker's memory, so past the bound decisions are refused."""
    monkeypatch.setattr("app.log.decision_log.WAITING_BATCHES", 2)
    async with app_client(_pg_settings(postgres_url, decision_log_max_batch=4)) as client:
        await _bounded_while_stalled(client, _head_locked(postgres_url))


@asynccontextmanager
async def _stopped(process: Any) -> AsyncIterator[None]:
    """The process is stopped (SIGSTOP, state T) until the block ends: it can neither
    answer nor exit meanwhile."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        await _until(lambda: _state(process.pid) == "T", f"process {process.pid} stopped")
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)


def _state(pid: int) -> str:
    """The process's state letter (R, S, T, ...), from /proc."""
    with open(f"/proc/{pid}/stat") as stat:
        text = stat.read()
    return text[text.rindex(")") + 2]


async def test_while_the_writer_process_stalls_the_records_waiting_are_bounded(
        settings, monkeypatch):
    """The same bound with a writer process (stopped, so it neither answers nor fails)."""
    monkeypatch.setattr("app.log.decision_log.WAITING_BATCHES", 2)
    changed = settings.model_copy(update={"decision_log_writer": "process",
                                          "decision_log_max_batch": 4})
    async with app_client(changed) as client:
        await _bounded_while_stalled(
            client, _stopped(client.app.state.decision_log._process))
