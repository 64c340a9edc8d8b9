"""Outcome reports (SPEC §11), booked in one transaction of the ledger's own connection:
the decision's row read, the outcome row, the hold settled, the plan's, the project's and
the step's ledger rows, and the record of kind `outcome` chained into the log.

Through SQLAlchemy's session a report cost 13-14 ms of the worker's CPU on either database
(a dozen ORM statements, each through the greenlet and, on SQLite, a hop to aiosqlite's
thread), holding the write lock (SQLite) or the chain head's row (Postgres) all along, so
the decisions made beside it waited for their commit: every client that reports outcomes
(the MCP gateway, the hooks' PostToolUse, the SDK's adapters) paid it on its next call
(docs/gateway.md "Cost"). Here, with the same statements in plain SQL:

- SQLite: a connection of its own (app/store/raw.py), used by one thread of its own: the
  whole transaction is one call there (BEGIN IMMEDIATE waits for the lock in that thread,
  never on the event loop), each statement microseconds.
- Postgres: an asyncpg connection of its own; a worker's reports take turns on it (they
  would wait for one another on the chain head anyway), each statement one round trip.

The booking is written once, as a coroutine over `_Tx`. On Postgres it awaits asyncpg; on
SQLite every call of `_Tx` returns at once, so the coroutine runs to its end in the thread
with no event loop (`_complete`). A failure of the database is raised as SQLAlchemy's
OperationalError, which every route answers 503 storage_unavailable; a refused report
(404, 403, 409) changes nothing.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sqlite3
import time
from collections.abc import Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy.exc import OperationalError
from uuid_utils import uuid7

from app.auth.keys import Principal
from app.auth.roles import Role
from app.config import asyncpg_dsn
from app.edge.errors import Conflict, Forbidden, NotFound, ToolgateError
from app.kit.caller import Caller
from app.kit.canonical import canonical_sha256
from app.ledger.schemas import OutcomeIn
from app.ledger.service import ERROR_CLASSES, NO_PROJECT
from app.log.chain import COLUMNS, QUOTED_COLUMNS, chain_values
from app.log.records import iso, new_record, parse_iso, sqlite_text, sqlite_time
from app.store.base import floats_for_huge_ints, utcnow
from app.store.raw import (
    asyncpg_reader,
    close_asyncpg,
    close_sqlite,
    sqlite_file,
    sqlite_writer,
)

STATELESS = (None, "inline")  # provenance of a decision bound to no stored plan


def _params(n: int) -> str:
    return ", ".join(f"${i + 1}" for i in range(n))


_INSERTED = ("decision_id", "project", "plan_id", "step_id", "tool", "key_id", "status",
             "cost", "verified", "error", "args_sha256", "artifacts", "error_class",
             "unverified", "args_mismatch", "reported_at", "body_sha256")
_SHOWN = ("status", "cost", "verified", "error", "args_sha256", "artifacts", "error_class",
          "unverified", "args_mismatch", "reported_at")  # ledger.tables.outcome_out's keys
# Tables and columns: app/ledger/tables.py and app/log/tables.py; written with $n, which
# SQLite reads as ?n.
_DECISION = ("SELECT kind, project, plan_id, action_id, tool, key_id, allowed, provenance, "
             "detail FROM decision_log WHERE decision_id = $1")
_OUTCOME = f"SELECT {', '.join(_SHOWN)}, body_sha256 FROM outcomes WHERE decision_id = $1"
_INSERT = (f"INSERT INTO outcomes ({', '.join(_INSERTED)}) VALUES ({_params(len(_INSERTED))}) "
           "ON CONFLICT DO NOTHING")
_HOLD = "SELECT amount, state FROM ledger_holds WHERE decision_id = $1"
_SETTLED = "UPDATE ledger_holds SET state = 'settled' WHERE decision_id = $1"
_PLAN_ROW = ("INSERT INTO ledger_plans (plan_id, project, spent, held) VALUES ($1, $2, 0, 0) "
             "ON CONFLICT DO NOTHING")
_PROJECT_ROW = ("INSERT INTO ledger_projects (project, spent, held) VALUES ($1, 0, 0) "
                "ON CONFLICT DO NOTHING")
_ADD_PLAN = "UPDATE ledger_plans SET spent = spent + $2, held = held + $3 WHERE plan_id = $1"
_ADD_PROJECT = ("UPDATE ledger_projects SET spent = spent + $2, held = held + $3 "
                "WHERE project = $1")
_STEP_ROW = ("INSERT INTO ledger_steps (plan_id, step_id, failures) VALUES ($1, $2, 0) "
             "ON CONFLICT DO NOTHING")
_STEP_FAILED = ("UPDATE ledger_steps SET failures = failures + 1 "
                "WHERE plan_id = $1 AND step_id = $2")
_HEAD = "UPDATE chain_head SET updated_at = $1 WHERE id = 1 RETURNING seq, hash"
_RECORD = f"INSERT INTO decision_log ({QUOTED_COLUMNS}) VALUES ({_params(len(COLUMNS))})"
_SET_HEAD = "UPDATE chain_head SET seq = $1, hash = $2 WHERE id = 1"


@dataclass(frozen=True, slots=True)
class Report:
    """One report to book: `decision_id`'s outcome `body`, sent by `principal`."""

    decision_id: str
    body: OutcomeIn
    principal: Principal
    caller: Caller


Booked = tuple[int, dict[str, Any]]  # 201 or 200, and the outcome as the API shows it


class _Tx:
    """One transaction's statements: `one` (the first row or None) and `run` (rows
    changed). Each database's class says how it writes times and JSON."""

    sqlite = False

    async def one(self, sql: str, *args: Any) -> Sequence[Any] | None:
        raise NotImplementedError

    async def run(self, sql: str, *args: Any) -> int:
        raise NotImplementedError

    def time(self, moment: datetime) -> Any:
        return moment

    def read_time(self, value: Any) -> datetime:
        return value

    def read_json(self, value: Any) -> Any:
        return floats_for_huge_ints(orjson.loads(value)) if value is not None else None

    def json(self, value: Any) -> str:
        return orjson.dumps(value).decode()


class _SQLiteTx(_Tx):
    sqlite = True

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def one(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return self.conn.execute(_numbered(sql), args).fetchone()

    async def run(self, sql: str, *args: Any) -> int:
        return self.conn.execute(_numbered(sql), args).rowcount

    def time(self, moment: datetime) -> Any:
        return sqlite_time(moment)  # the text SQLAlchemy's SQLite DATETIME keeps

    def read_time(self, value: Any) -> datetime:
        return datetime.fromisoformat(value).replace(tzinfo=UTC)

    def read_json(self, value: Any) -> Any:
        return orjson.loads(value) if value is not None else None

    def json(self, value: Any) -> str:
        return json.dumps(value)  # the text SQLAlchemy's JSON type writes on SQLite


@functools.cache
def _numbered(sql: str) -> str:
    """A statement of this module as SQLite writes its numbered parameters ($1 -> ?1)."""
    return sql.replace("$", "?")


class _PostgresTx(_Tx):
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    async def one(self, sql: str, *args: Any) -> Sequence[Any] | None:
        return await self.conn.fetchrow(sql, *args)

    async def run(self, sql: str, *args: Any) -> int:
        status = await self.conn.execute(sql, *args)  # "INSERT 0 1", "UPDATE 1", "SAVEPOINT"
        count = status.rsplit(" ", 1)[-1]
        return int(count) if count.isdigit() else 0


async def _book_all(tx: _Tx, reports: list[Report], *, alone: bool) -> list[Any]:
    """Each report booked in turn: (status, outcome), or, unless `alone` (then the error
    is raised and the whole transaction rolled back), the ToolgateError that refused it,
    its own changes undone."""
    if alone:
        return [await _book(tx, report) for report in reports]
    results: list[Any] = []
    for report in reports:
        await tx.run("SAVEPOINT outcome")
        try:
            results.append(await _book(tx, report))
        except ToolgateError as refused:
            await tx.run("ROLLBACK TO SAVEPOINT outcome")
            results.append(refused)
        await tx.run("RELEASE SAVEPOINT outcome")
    return results


async def _book(tx: _Tx, report: Report) -> Booked:
    decision_id, body, principal = report.decision_id[:64], report.body, report.principal
    row = await tx.one(_DECISION, decision_id)
    if row is None or row[0] != "authorize" or not principal.sees(row[1]):
        raise NotFound(f"decision '{decision_id}' does not exist", decision_id=decision_id)
    _, project, plan_id, action_id, tool, key_id, allowed, provenance, detail = row
    if principal.role != Role.ADMIN and key_id != principal.key_id:
        raise Forbidden(f"decision '{decision_id}' was made by another key: only that key "
                        "or an admin may report its outcome", code="outcome_forbidden",
                        decision_id=decision_id)
    if not allowed:
        raise Conflict(f"decision '{decision_id}' was a deny: nothing ran, so there is no "
                       "outcome to report", code="outcome_for_deny", decision_id=decision_id)
    sent = body.model_dump(mode="json")
    digest = canonical_sha256(sent) or ""
    existing = await tx.one(_OUTCOME, decision_id)
    if existing is not None:
        return _again(tx, decision_id, existing, digest)
    logged = orjson.loads(detail)
    authorized = _authorized_args_sha256(logged)
    step_id = (logged.get("context") or {}).get("step_id")
    outcome = {
        "decision_id": decision_id, "project": project,
        "plan_id": None if provenance in STATELESS else plan_id, "step_id": step_id,
        "tool": tool, "key_id": key_id, "status": body.status, "cost": body.cost,
        "verified": body.verified, "error": body.error,
        "args_sha256": body.args_sha256.lower() if body.args_sha256 else None,
        "artifacts": sent["artifacts"], "error_class": ERROR_CLASSES.get(body.status),
        "unverified": body.status == "succeeded" and body.verified is False,
        "args_mismatch": (body.args_sha256 is not None
                          and body.args_sha256.lower() != authorized),
        "reported_at": utcnow(), "body_sha256": digest,
    }
    bound = {**outcome, "reported_at": tx.time(outcome["reported_at"]),
             # JSON as SQLAlchemy's JSON type stores it (None as the JSON null)
             "artifacts": tx.json(outcome["artifacts"])}
    if await tx.run(_INSERT, *(bound[c] for c in _INSERTED)) != 1:
        # a concurrent report of the same decision came first
        existing = await tx.one(_OUTCOME, decision_id)
        assert existing is not None
        return _again(tx, decision_id, existing, digest)
    if outcome["plan_id"] is not None:
        await _settle(tx, outcome)
    out = {"decision_id": decision_id, **{key: outcome[key] for key in _SHOWN},
           "reported_at": iso(outcome["reported_at"])}
    await _append(tx, new_record(
        "outcome", str(uuid7()), request_id=report.caller.request_id,
        key_id=report.caller.key_id, project=project, plan_id=plan_id, action_id=action_id,
        tool=tool, code=body.status, error=outcome["error_class"],
        detail={"outcome": out}))
    return 201, out


async def _settle(tx: _Tx, outcome: dict[str, Any]) -> None:
    """Book a new outcome: its hold is released (or, if it had lapsed and was charged, the
    charge is taken back), its cost is spent, and a failed or unverified attempt counts
    against its step."""
    decision_id, plan_id = outcome["decision_id"], outcome["plan_id"]
    project = outcome["project"] or NO_PROJECT
    hold = await tx.one(_HOLD if tx.sqlite else _HOLD + " FOR UPDATE", decision_id)
    spent, held = outcome["cost"], 0.0
    if hold is not None and hold[1] != "settled":
        if hold[1] == "held":
            held -= hold[0]
        else:  # charged when it lapsed: the report replaces the charge
            spent -= hold[0]
        await tx.run(_SETTLED, decision_id)
    await tx.run(_PLAN_ROW, plan_id, outcome["project"])
    await tx.run(_PROJECT_ROW, project)
    await tx.run(_ADD_PLAN, plan_id, spent, held)
    await tx.run(_ADD_PROJECT, project, spent, held)
    if outcome["step_id"] is not None:  # every reported step is listed, limits or none
        await tx.run(_STEP_ROW, plan_id, outcome["step_id"])
        if outcome["status"] != "succeeded" or outcome["unverified"]:
            await tx.run(_STEP_FAILED, plan_id, outcome["step_id"])


async def _append(tx: _Tx, record: dict[str, Any]) -> None:
    """The record chained onto the head, under the head's lock (the log writer's way)."""
    head = await tx.one(_HEAD, tx.time(utcnow()))
    assert head is not None
    rows, seq, prev = chain_values([record], head[0], head[1],
                                   time=sqlite_text if tx.sqlite else parse_iso)
    await tx.run(_RECORD, *rows[0])
    await tx.run(_SET_HEAD, seq, prev)


def _again(tx: _Tx, decision_id: str, row: Sequence[Any], digest: str) -> Booked:
    if row[-1] != digest:
        raise Conflict(f"decision '{decision_id}' already has a different outcome",
                       code="outcome_conflict", decision_id=decision_id)
    shown = dict(zip(_SHOWN, row, strict=False))
    for flag in ("verified", "unverified", "args_mismatch"):  # SQLite keeps 0 and 1
        shown[flag] = bool(shown[flag]) if shown[flag] is not None else None
    shown["artifacts"] = tx.read_json(shown["artifacts"])
    shown["reported_at"] = iso(tx.read_time(shown["reported_at"]))
    return 200, {"decision_id": decision_id, **shown}


def _authorized_args_sha256(detail: dict[str, Any]) -> str | None:
    """The digest of the arguments the decision allowed: recorded when the log masks some
    of them (app/authorize/service.py), else computed from the logged arguments."""
    tool = detail.get("tool") or {}
    if "args_sha256" in tool:
        return tool["args_sha256"]
    return canonical_sha256(tool.get("args") or {})


def _complete(booking: Coroutine[Any, Any, Any]) -> Any:
    """The value of a coroutine that never waits (the SQLite booking), run to its end."""
    try:
        booking.send(None)
    except StopIteration as done:
        return done.value
    booking.close()
    raise RuntimeError("the SQLite booking waited on something")


class SQLiteBook:
    def __init__(self, path: str, timeout: float, synchronous: str) -> None:
        self._path, self._timeout, self._synchronous = path, timeout, synchronous
        self._conn: sqlite3.Connection | None = None
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="toolgate-outcomes")

    async def book(self, reports: list[Report], *, alone: bool) -> list[Any]:
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + self._timeout
        return await loop.run_in_executor(self._thread, self._book, reports, alone, deadline)

    def _book(self, reports: list[Report], alone: bool, deadline: float) -> list[Any]:
        # Reports of a worker queue for this one thread: each waits for the write lock only
        # as long as its own bound has left (TOOLGATE_DB_TIMEOUT_SECONDS from its arrival).
        left = deadline - time.monotonic()
        if left <= 0:
            raise OperationalError("outcome", None, TimeoutError(
                "the outcome reports before this one took the whole database timeout"))
        try:
            if self._conn is None:
                self._conn = sqlite_writer(self._path, self._timeout, self._synchronous)
            conn = self._conn
            conn.execute(f"PRAGMA busy_timeout={max(1, round(left * 1000))}")
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as failed:
            self._close()
            raise OperationalError("BEGIN IMMEDIATE", None, failed) from failed
        try:
            results = _complete(_book_all(_SQLiteTx(conn), reports, alone=alone))
            conn.execute("COMMIT")
            return results
        except ToolgateError:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                self._close()  # closing rolls back
            raise
        except sqlite3.Error as failed:
            self._close()  # rolls back; a new connection next time
            raise OperationalError("outcome", None, failed) from failed
        except BaseException:
            self._close()
            raise

    def _close(self) -> None:
        close_sqlite(self._conn)
        self._conn = None

    async def close(self) -> None:
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        self._thread.shutdown(wait=False)


class PostgresBook:
    def __init__(self, dsn: str, timeout: float) -> None:
        self._dsn, self._timeout = dsn, timeout
        self._conn: Any = None
        self._turn = asyncio.Lock()

    async def book(self, reports: list[Report], *, alone: bool) -> list[Any]:
        import asyncpg

        # A worker's reports take turns on the one connection; each waits for its turn only
        # as long as the database timeout (TOOLGATE_DB_TIMEOUT_SECONDS), then is a 503.
        try:
            async with asyncio.timeout(self._timeout):
                await self._turn.acquire()
        except TimeoutError as waited:
            raise OperationalError("outcome", None, waited) from waited
        try:
            if self._conn is None or self._conn.is_closed():
                self._conn = await asyncpg_reader(self._dsn, self._timeout)
            async with self._conn.transaction():
                return await _book_all(_PostgresTx(self._conn), reports, alone=alone)
        except ToolgateError:
            raise
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as failed:
            # What the connection is doing is unknown: dropped at once (the engine's way,
            # app/store/engine.py), a new one for the next report.
            if self._conn is not None:
                self._conn.terminate()
            self._conn = None
            raise OperationalError("outcome", None, failed) from failed
        finally:
            self._turn.release()

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        await close_asyncpg(conn, self._timeout)


class NoBook:
    """In-memory SQLite: the engine's one connection is the only one that sees its
    tables, and no other can book there."""

    async def book(self, reports: list[Report], *, alone: bool) -> list[Any]:
        raise OperationalError("outcome", None, RuntimeError(
            "outcome reports need a database file or PostgreSQL"))

    async def close(self) -> None:
        return None


def for_database(database_url: str, timeout: float,
                 synchronous: str) -> SQLiteBook | PostgresBook | NoBook:
    dsn = asyncpg_dsn(database_url)
    if dsn is not None:
        return PostgresBook(dsn, timeout)
    path = sqlite_file(database_url)
    return SQLiteBook(path, timeout, synchronous) if path is not None else NoBook()


async def report(book: Any, decision_id: str, body: OutcomeIn, principal: Principal,
                 caller: Caller) -> Booked:
    """One report: (201 or 200, the outcome). Raises 404 (unknown, not an authorize
    decision, or outside the key's projects), 403 (another key's decision), 409 (a deny,
    or a different report already stored)."""
    (booked,) = await book.book([Report(decision_id, body, principal, caller)], alone=True)
    return booked
