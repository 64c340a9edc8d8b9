"""Outcome reports (SPEC §11) as an agent makes them, on SQLite and Postgres: idempotent,
refused for denies and other keys, recorded in the chain, shown on the decision, counted
in stats, classed (lifecycle errors, unverified, args mismatch), and a database that
refuses them answered 503 with nothing booked."""

from __future__ import annotations

import asyncio
import sqlite3
import time

import orjson

from app.kit.canonical import canonical_sha256
from app.ledger.book import SQLiteBook
from tests.ledger.helpers import authorize, call, new_key, plan_with, report


async def test_first_report_201_same_again_200_different_409(client):
    plan = await plan_with(client)
    allowed = await authorize(client, call(plan))
    assert allowed["allowed"] is True
    body = {"status": "succeeded", "cost": 1.5, "verified": True}
    first = await report(client, allowed["decision_id"], body)
    assert first.status_code == 201, first.text
    out = first.json()
    assert out["status"] == "succeeded" and out["cost"] == 1.5
    assert out["error_class"] is None and out["unverified"] is False
    assert out["args_mismatch"] is False and out["reported_at"]
    again = await report(client, allowed["decision_id"], body)
    assert again.status_code == 200 and again.json() == out
    other = await report(client, allowed["decision_id"], {**body, "cost": 2})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "outcome_conflict"
    # Only the first counted.
    ledger = (await client.get(f"/v1/plans/{plan}")).json()["ledger"]
    assert ledger == {"spent": 1.5, "held": 0.0, "steps": {}}


async def test_deny_is_409_unknown_is_404_and_nothing_changes(client):
    plan = await plan_with(client, project="ro")
    denied = await authorize(client, call(plan, plan_read_only=True))
    assert denied["allowed"] is False
    r = await report(client, denied["decision_id"], {"status": "succeeded", "cost": 3})
    assert r.status_code == 409 and r.json()["error"]["code"] == "outcome_for_deny"
    r = await report(client, "0193a0c4-0000-7000-8000-000000000000", {"status": "succeeded"})
    assert r.status_code == 404
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["spent"] == 0.0
    listed = (await client.get("/v1/decisions?kind=outcome")).json()["items"]
    assert listed == []


async def test_bad_input_is_a_422_naming_the_field(client):
    plan = await plan_with(client)
    allowed = await authorize(client, call(plan))
    for body, field in (({"status": "done"}, "status"),
                        ({"status": "succeeded", "cost": -1}, "cost"),
                        ({"status": "succeeded", "verified": "true"}, "verified"),
                        ({"status": "succeeded", "args_sha256": "xyz"}, "args_sha256"),
                        ({"status": "succeeded", "error": "e" * 2001}, "error"),
                        ({"status": "succeeded", "artifacts": [{"path": "a"}] * 101},
                         "artifacts"),
                        # Postgres stores no NUL: refused alike on both, never a 503
                        ({"status": "execution_failed", "error": "a\u0000b"}, "error"),
                        ({"status": "succeeded", "artifacts": [{"path": "a\u0000"}]},
                         "path"),
                        ({"status": "succeeded", "extra": 1}, "extra")):
        r = await report(client, allowed["decision_id"], body)
        assert r.status_code == 422, (body, r.text)
        assert field in r.text, (field, r.text)
    r = await client.get(f"/v1/decisions/{allowed['decision_id']}")
    assert r.json()["outcome"] is None


async def test_only_the_deciding_key_or_an_admin_may_report(client):
    plan = await plan_with(client)
    agent = await new_key(client, "agent")
    other = await new_key(client, "agent")
    elsewhere = await new_key(client, "agent", projects=["elsewhere"])
    allowed = await authorize(client, call(plan), agent)
    r = await report(client, allowed["decision_id"], {"status": "succeeded"}, other)
    assert r.status_code == 403 and r.json()["error"]["code"] == "outcome_forbidden"
    r = await report(client, allowed["decision_id"], {"status": "succeeded"}, elsewhere)
    assert r.status_code == 404
    r = await report(client, allowed["decision_id"], {"status": "succeeded"}, agent)
    assert r.status_code == 201


async def test_lifecycle_classes_unverified_and_args_mismatch(client):
    plan = await plan_with(client)
    args = {"service": "web", "replicas": 3}
    digest = canonical_sha256(args)
    cases = [
        ({"status": "activation_failed", "error": "no such binary"},
         {"error_class": "ToolActivationError"}),
        ({"status": "execution_failed"}, {"error_class": "ToolExecutionError"}),
        ({"status": "deactivation_failed"}, {"error_class": "ToolDeactivationError"}),
        ({"status": "succeeded", "verified": False}, {"unverified": True}),
        ({"status": "succeeded", "args_sha256": digest}, {"args_mismatch": False}),
        ({"status": "succeeded", "args_sha256": canonical_sha256({"service": "db"})},
         {"args_mismatch": True}),
    ]
    for body, expected in cases:
        # Key order and number spelling do not matter: RFC 8785.
        allowed = await authorize(client, call(plan, args={"replicas": 3.0,
                                                           "service": "web"}))
        r = await report(client, allowed["decision_id"], body)
        assert r.status_code == 201, r.text
        for key, value in expected.items():
            assert r.json()[key] == value, (body, r.json())
        shown = (await client.get(f"/v1/decisions/{allowed['decision_id']}")).json()
        assert shown["outcome"] == {k: v for k, v in r.json().items()
                                    if k != "decision_id"}


async def test_recorded_in_the_chain_exported_and_grouped_in_stats(client):
    plan = await plan_with(client)
    statuses = ["succeeded", "succeeded", "execution_failed"]
    for status in statuses:
        allowed = await authorize(client, call(plan))
        body = {"status": status}
        if status == "succeeded":
            body["verified"] = False
        assert (await report(client, allowed["decision_id"], body)).status_code == 201
    await authorize(client, call(plan))  # not reported
    records = (await client.get("/v1/decisions?kind=outcome")).json()["items"]
    assert len(records) == 3
    assert {r["code"] for r in records} == {"succeeded", "execution_failed"}
    assert {r["error"] for r in records} == {None, "ToolExecutionError"}
    exported = [orjson.loads(line) for line in
                (await client.get("/v1/audit/export")).content.splitlines()]
    assert sum(1 for r in exported if r["kind"] == "outcome") == 3
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True
    groups = (await client.get("/v1/decisions/stats?group_by=outcome&kind=authorize")
              ).json()["groups"]
    assert {g["key"]: g["count"] for g in groups} == {
        "succeeded": 2, "execution_failed": 1, None: 1}
    groups = (await client.get("/v1/decisions/stats?group_by=unverified&kind=authorize")
              ).json()["groups"]
    assert {g["key"]: g["count"] for g in groups} == {True: 2, False: 1, None: 1}


async def test_batch_answers_in_order(client):
    plan = await plan_with(client)
    one = await authorize(client, call(plan))
    two = await authorize(client, call(plan))
    r = await client.post("/v1/outcomes", json={"outcomes": [
        {"decision_id": one["decision_id"], "status": "succeeded", "cost": 1},
        {"decision_id": "nope", "status": "succeeded"},
        {"decision_id": two["decision_id"], "status": "execution_failed", "cost": 2},
        {"decision_id": one["decision_id"], "status": "succeeded", "cost": 1}]})
    assert r.status_code == 200, r.text
    assert [i["status_code"] for i in r.json()["items"]] == [201, 404, 201, 200]
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["spent"] == 3.0


async def _read_only_connection(book):
    """A connection of the book's database that can write nothing (the sabotage below)."""
    if isinstance(book, SQLiteBook):
        return sqlite3.connect(f"file:{book._path}?mode=ro", uri=True, isolation_level=None,
                               check_same_thread=False)
    import asyncpg

    return await asyncpg.connect(book._dsn,
                                 server_settings={"default_transaction_read_only": "on"})


async def test_a_report_the_database_refuses_is_503_books_nothing_and_the_next_books(client):
    """Outcome reports are booked on the ledger's own connection (app/ledger/book.py), not
    the session: when the database refuses the transaction the answer is 503
    storage_unavailable, nothing of the report is stored, and the connection is replaced,
    so the next report books."""
    plan = await plan_with(client)
    allowed = await authorize(client, call(plan))
    book = client.app.state.ledger.book
    book._conn = await _read_only_connection(book)
    body = {"status": "succeeded", "cost": 1.5}
    refused = await report(client, allowed["decision_id"], body)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["code"] == "storage_unavailable"
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["spent"] == 0.0
    assert (await client.get("/v1/decisions?kind=outcome")).json()["items"] == []
    booked = await report(client, allowed["decision_id"], body)
    assert booked.status_code == 201, booked.text
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["spent"] == 1.5
    assert (await client.get("/v1/audit/verify")).json()["ok"] is True


async def _hold_the_write_lock(book):
    """Another connection that holds what a report must write: SQLite's write lock, or
    Postgres's chain head row. Returns a function that lets go."""
    if isinstance(book, SQLiteBook):
        other = sqlite3.connect(book._path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")

        async def release() -> None:
            other.execute("ROLLBACK")
            other.close()
        return release
    import asyncpg

    other = await asyncpg.connect(book._dsn)
    held = other.transaction()
    await held.start()
    await other.execute("SELECT seq FROM chain_head WHERE id = 1 FOR UPDATE")

    async def release() -> None:
        await held.rollback()
        await other.close()
    return release


async def test_reports_waiting_on_a_locked_database_each_get_their_503_within_the_bound(
        client):
    """A worker's reports take turns on the book's one connection. While the database
    is locked by someone else, each waits no longer than the database timeout from its own
    arrival, not behind every report queued before it; then 503, nothing booked."""
    plan = await plan_with(client)
    decisions = [(await authorize(client, call(plan)))["decision_id"] for _ in range(4)]
    book = client.app.state.ledger.book
    book._timeout = 2.0  # the bound, for this test (TOOLGATE_DB_TIMEOUT_SECONDS)
    if not isinstance(book, SQLiteBook):
        await book.close()  # connects again, with the bound as its statement timeout
    release = await _hold_the_write_lock(book)
    try:
        started = time.monotonic()
        answers = await asyncio.gather(*(
            report(client, d, {"status": "succeeded", "cost": 1}) for d in decisions))
        took = time.monotonic() - started
    finally:
        await release()
    assert [a.status_code for a in answers] == [503] * 4, [a.text for a in answers]
    # One after another they would take 4 bounds (8 s); each within its own: about one.
    assert took < 6.0, took
    assert (await client.get(f"/v1/plans/{plan}")).json()["ledger"]["spent"] == 0.0
    booked = await report(client, decisions[0], {"status": "succeeded", "cost": 1})
    assert booked.status_code == 201, booked.text
