"""POST /v1/replay (SPEC §12): every stored authorize decision of a window, re-evaluated
from its recorded inputs under a candidate, in constant memory.

The log is read in seq order (its primary key) in batches of BATCH rows, each batch in its
own short session (keyset pagination: `seq > last seen`), so a window of any size holds one
batch and the counters, never a connection for the whole replay. At most
`replay_max_records` records are read; past that the answer says `truncated` and where it
stopped (`to`), never a timeout. Nothing is written but one audit record of the replay
(by the route, after the reading). Every read is a read-only session (app/store/engine.py
`read_only`): a replay never takes a write lock, so decisions are not delayed by it; the
checks yield to the event loop every few milliseconds for the same reason.

A candidate profile with a cost limit reads what plans spent: the log is then read from its
first record (outcomes, holds and credits before the window, app/replay/spend.py) and each
decision that did not read the ledger itself is given the spend as of its time."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from time import perf_counter
from typing import Any

import orjson
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.decisions.queries import seq_range
from app.edge.errors import NotFound
from app.log.records import iso
from app.log.tables import ChainHead, LogRecord
from app.plans.service import PlanCache
from app.policy.profiles import SafetyProfile
from app.replay.engine import (
    ALLOW,
    LEDGER,
    LEGACY,
    MASKED,
    Candidate,
    Unreplayable,
    plan_bound,
    reads_spend,
    replay,
    verdict,
)
from app.replay.spend import Spend
from app.store.engine import read_only

BATCH = 1000
SLICE_SECONDS = 0.005  # the longest the checks run before letting other requests in
SLICE_CHECK = 16  # records between two looks at the clock
_PLANS_REMEMBERED = 10_000  # the replay's own memo of plans' profiles, bounded
_LOG = LogRecord.__table__.c  # the table's columns: plain rows, no ORM loading per row
_COLUMNS = (_LOG.seq, _LOG.decision_id, _LOG.created_at, _LOG.plan_id, _LOG.action_id,
            _LOG.tool, _LOG.allowed, _LOG.code, _LOG.detail, _LOG.kind, _LOG.project)
_SPEND_KINDS = ("authorize", "outcome", "config")  # what moves a plan's spend (spend.py)


@dataclass
class Window:
    since: datetime
    until: datetime
    project: str | None = None
    plan_id: str | None = None
    tool: str | None = None
    projects: list[str] | None = None  # the key's scope (None: every project)


@dataclass
class Tally:
    examples_wanted: int
    checked: int = 0
    allow_to_deny: int = 0
    deny_to_allow: int = 0
    code_changed: int = 0
    masked: int = 0
    legacy: int = 0
    ledger: int = 0
    transitions: Counter[tuple[str, str]] = field(default_factory=Counter)
    examples: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: Any, before: str, after: str) -> None:
        self.checked += 1
        if before == after:
            return
        self.transitions[before, after] += 1
        if before == ALLOW:
            self.allow_to_deny += 1
        elif after == ALLOW:
            self.deny_to_allow += 1
        else:
            self.code_changed += 1
        if len(self.examples) < self.examples_wanted:
            self.examples.append({
                "decision_id": row.decision_id, "tool": row.tool, "plan_id": row.plan_id,
                "before": _verdict(before), "after": _verdict(after)})

    def answer(self) -> dict[str, Any]:
        return {
            "checked": self.checked,
            "changed": self.allow_to_deny + self.deny_to_allow + self.code_changed,
            "allow_to_deny": self.allow_to_deny, "deny_to_allow": self.deny_to_allow,
            "code_changed": self.code_changed,
            "transitions": [{"from": a, "to": b, "count": n}
                            for (a, b), n in self.transitions.most_common()],
            "examples": self.examples,
            "unreplayable": {"masked": self.masked, "legacy": self.legacy,
                             "ledger": self.ledger},
        }


def _verdict(text: str) -> dict[str, Any]:
    return {"allowed": text == ALLOW, "code": None if text == ALLOW else text}


class Replayer:
    """Replays for one process; main.py builds it with the plans' cache it shares."""

    def __init__(self, *, sessions: async_sessionmaker[AsyncSession], plans: PlanCache,
                 max_records: int) -> None:
        self.sessions = sessions
        self.plans = plans
        self.max_records = max_records

    async def run(self, window: Window, candidate: Candidate, *,
                  examples: int) -> dict[str, Any]:
        tally = Tally(examples_wanted=examples)
        profiles: dict[str, SafetyProfile | None] = {}
        read = 0
        last_time: datetime | None = None
        truncated = False
        spend: Spend | None = None
        async with read_only(self.sessions) as session:
            bounds = await seq_range(session, window.since, window.until)
            # The oldest record still stored (retention may have pruned the window's start):
            # the first by seq, found on the primary key (created_at has only a BRIN index).
            earliest = await session.scalar(
                select(LogRecord.created_at).order_by(LogRecord.seq).limit(1))
            if bounds and reads_spend(candidate.profile) and not await session.scalar(
                    select(ChainHead.pruned_seq).where(ChainHead.id == 1)):
                spend = Spend()  # the whole log is stored: spend can be rebuilt from it
        rebuild = spend is not None
        cursor, last = ((0 if rebuild else bounds[0] - 1), bounds[1]) if bounds else (0, 0)
        # The next batch is read while this one is evaluated: the database (another process,
        # or SQLite's thread) works while the checks run here. Two batches at most in memory.
        ahead = (asyncio.ensure_future(self._batch(window, cursor, last, BATCH, rebuild))
                 if cursor < last else None)
        since, until = window.since, window.until
        sliced = perf_counter()
        try:
            while ahead is not None:
                rows = await ahead
                ahead = None
                if not rows:
                    break
                cursor = rows[-1].seq
                if cursor < last:
                    ahead = asyncio.ensure_future(
                        self._batch(window, cursor, last, BATCH, rebuild))
                if candidate.profile is None:
                    await self._plan_profiles(rows, profiles)
                for n, row in enumerate(rows):
                    if n % SLICE_CHECK == 0 and perf_counter() - sliced > SLICE_SECONDS:
                        await asyncio.sleep(0)  # let decisions and /healthz in
                        sliced = perf_counter()
                    # seq_range may hold a few records just outside the window (see there);
                    # a rebuild also reads what only moves the spend.
                    replayed = (since <= row[2] < until and row[9] == "authorize"
                                and (not rebuild or self._wanted(window, row)))
                    if replayed and read >= self.max_records:
                        truncated = True  # past the cap, a record of the window is left
                        break
                    if replayed:
                        read += 1
                        last_time = row[2]
                    detail = self._one(row, candidate, profiles, tally, spend,
                                       replayed=replayed)
                    if rebuild:
                        try:  # after the decision is replayed: its own hold comes after it
                            self._book(spend, row, detail)
                        except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError):
                            spend.lost = True  # a record not as toolgate writes it
                if truncated:
                    break
        finally:
            if ahead is not None:
                ahead.cancel()
        start = window.since if earliest is None else max(window.since, earliest)
        return {**tally.answer(), "from": iso(start),
                "to": iso(last_time) if last_time is not None else None,
                "truncated": truncated}

    @staticmethod
    def _wanted(window: Window, row: Any) -> bool:
        """The window's filters a rebuild's query leaves out (it reads the whole project)."""
        return ((window.plan_id is None or row[3] == window.plan_id)
                and (window.tool is None or row[5] == window.tool))

    async def _batch(self, window: Window, cursor: int, last: int, limit: int,
                     rebuild: bool) -> list[Any]:
        query = (select(*_COLUMNS).where(_LOG.seq > cursor, _LOG.seq <= last)
                 .order_by(_LOG.seq).limit(limit))
        query = query.where(_LOG.kind.in_(_SPEND_KINDS) if rebuild else _LOG.kind == "authorize")
        filters = ((_LOG.project, window.project),) if rebuild else (
            (_LOG.project, window.project), (_LOG.plan_id, window.plan_id),
            (_LOG.tool, window.tool))
        for column, value in filters:
            if value is not None:
                query = query.where(column == value)
        if window.projects is not None:
            query = query.where(_LOG.project.in_(window.projects))
        async with read_only(self.sessions) as session:
            return list((await session.execute(query)).all())

    @staticmethod
    def _book(spend: Spend, row: Any, detail: dict[str, Any] | None) -> None:
        """What the record moves in the spend (a plan's records only: stateless decisions
        and their outcomes are in no ledger)."""
        kind = row[9]
        if kind == "config":
            spend.config(row[10], detail if detail is not None else orjson.loads(row[8]))
        elif plan_bound(row[4]) and (kind == "outcome" or row[6]):
            if detail is None:
                detail = orjson.loads(row[8])
            if kind == "outcome":
                spend.outcome(row[3], row[10], detail)
            else:
                spend.authorized(row[1], row[3], row[10], detail)

    def _one(self, row: Any, candidate: Candidate, profiles: dict[str, SafetyProfile | None],
             tally: Tally, spend: Spend | None, *, replayed: bool) -> dict[str, Any] | None:
        """Replays the record when `replayed`; returns its detail when it was read."""
        if not replayed:
            return None
        _, _, _, plan_id, action_id, tool, allowed, code, text, _, project = row
        before = verdict(allowed, code)
        detail = None
        try:
            detail = orjson.loads(text)
            plan_profile = None
            if candidate.profile is None and plan_bound(action_id):
                plan_profile = profiles.get(plan_id)
                if plan_profile is None:
                    raise Unreplayable(LEGACY)  # its plan is gone: no profile to replay
            after = replay(detail, tool_name=tool, plan_id=plan_id, action_id=action_id,
                           plan_profile=plan_profile, candidate=candidate,
                           spend=None if spend is None else spend.known(plan_id, project),
                           project=project)
        except Unreplayable as skipped:
            if skipped.reason == MASKED:
                tally.masked += 1
            elif skipped.reason == LEDGER:
                tally.ledger += 1
            else:
                tally.legacy += 1
            return detail
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError):
            tally.legacy += 1  # a detail that is not what toolgate writes
            return detail if isinstance(detail, dict) else None
        if before != after:
            tally.add(row, before, after)
        else:
            tally.checked += 1
        return detail

    async def _plan_profiles(self, rows: list[Any],
                             profiles: dict[str, SafetyProfile | None]) -> None:
        """The locked profile of every plan of `rows` not yet known (None: the plan is
        gone), read before the batch is evaluated, so evaluating awaits nothing."""
        wanted = {row.plan_id for row in rows
                  if plan_bound(row.action_id) and row.plan_id not in profiles}
        if len(profiles) + len(wanted) > _PLANS_REMEMBERED:
            profiles.clear()
        for plan_id in wanted:
            try:
                profiles[plan_id] = (await self.plans.fetch(self.sessions, plan_id)).safety
            except NotFound:
                profiles[plan_id] = None
