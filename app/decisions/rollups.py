"""Hourly counts for `/v1/decisions/stats`, so the operators' overview does not scan the log.

A stats request over a range reads the hours that are wholly inside it and over (ended at
least SETTLE ago) from `decision_rollup`, and only the partial hours at its two ends from
the log. An hour is counted once, the first time a request needs it: one INSERT ... SELECT
... GROUP BY over the log's created_at index, in a write transaction of its own, marked in
`decision_rolled_hour`. Counting waits until an hour has been over for SETTLE: a record's
time is taken when the decision is made and the record is written within
`TOOLGATE_DECISION_LOG_TIMEOUT_SECONDS` (or not at all: the decision fails closed), so no
record arrives for an hour after that, unless replicas' clocks disagree by more than SETTLE.
`toolgate audit prune` drops the counts of every hour it may have touched (prune.py), and
they are counted again, from what remains, when next needed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, insert, literal, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.log.records import DECISION_KINDS
from app.log.tables import LogRecord, RolledHour, Rollup
from app.store.engine import WRITE_OPTION

HOUR = timedelta(hours=1)
SETTLE = timedelta(minutes=10)
# Rolled-up columns, with the log's column each counts by (null stored as "").
KEYS = ("kind", "project", "tool", "allowed", "code", "error")


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def ceil_hour(moment: datetime) -> datetime:
    floor = floor_hour(moment)
    return floor if floor == moment else floor + HOUR


def full_hours(since: datetime | None, until: datetime | None, *, first: datetime | None,
               now: datetime) -> tuple[datetime, datetime] | None:
    """The whole hours of [since, until) that are over and settled; None when there are none.
    `first`: the oldest record's time (None: an empty log, nothing to count); the hours
    start at it or at `since`, whichever is later."""
    if first is None:
        return None
    first = as_utc(first)
    start = first if since is None else max(as_utc(since), first)
    end = min(until, now - SETTLE) if until is not None else now - SETTLE
    low, high = ceil_hour(start), floor_hour(end)
    return (low, high) if low < high else None


def _hour_expr(dialect: str) -> Any:
    if dialect == "postgresql":
        return func.date_trunc("hour", LogRecord.created_at)
    # The text SQLAlchemy stores a SQLite DATETIME as (app/store/base.py reads it back).
    return func.strftime("%Y-%m-%d %H:00:00.000000", LogRecord.created_at)


CHUNK = 24  # hours written per transaction: the write lock is held for a moment only


async def ensure(sessions: async_sessionmaker, dialect: str, low: datetime,
                 high: datetime) -> None:
    """Count every hour of [low, high) not counted yet: one read (no lock) counts them all,
    then each run of up to CHUNK hours is written with its marks in a short write
    transaction (on SQLite the log's writer waits for that lock)."""
    async with sessions() as session:
        rolled = set(map(as_utc, (await session.scalars(
            select(RolledHour.hour).where(RolledHour.hour >= low, RolledHour.hour < high)
        )).all()))
    missing, moment = [], low
    while moment < high:
        if moment not in rolled:
            missing.append(moment)
        moment += HOUR
    if not missing:
        return
    runs: list[list[datetime]] = []
    for h in missing:
        if runs and runs[-1][-1] + HOUR == h and len(runs[-1]) < CHUNK:
            runs[-1].append(h)
        else:
            runs.append([h])
    columns = [func.coalesce(getattr(LogRecord, k), literal("")) if k != "allowed"
               else LogRecord.allowed for k in KEYS]
    hour = _hour_expr(dialect).label("hour")
    # One read counts the whole span (no lock held); the writes go a few hours at a time.
    counted = (select(hour, *columns, func.count())
               .where(LogRecord.created_at >= missing[0],
                      LogRecord.created_at < missing[-1] + HOUR,
                      LogRecord.allowed.is_not(None))
               .group_by(hour, *columns))
    async with sessions() as session:
        found = (await session.execute(counted)).all()
    by_hour: dict[datetime, list[dict[str, Any]]] = {}
    for r in found:
        moment = as_utc(r[0])
        by_hour.setdefault(moment, []).append(
            {"hour": moment, **dict(zip(KEYS, r[1:-1], strict=True)), "count": r[-1]})
    for run in runs:
        a, b = run[0], run[-1] + HOUR
        values = [v for h in run for v in by_hour.get(h, ())]
        try:
            async with sessions() as session, session.begin():
                await session.connection(execution_options={WRITE_OPTION: True})
                await session.execute(delete(Rollup).where(Rollup.hour >= a,
                                                           Rollup.hour < b))
                if values:
                    await session.execute(insert(Rollup), values)
                await session.execute(insert(RolledHour), [{"hour": h} for h in run])
        except IntegrityError:
            pass  # another request counted these hours at the same time: theirs stand


async def forget(session: AsyncSession, before: datetime) -> None:
    """Drop the counts of every hour that may hold a record created before `before` (a
    prune's cut-off: it also removes records just after it, written before the cut)."""
    until = floor_hour(before) + 2 * HOUR
    await session.execute(delete(Rollup).where(Rollup.hour < until))
    await session.execute(delete(RolledHour).where(RolledHour.hour < until))


def rows(filters: Any, low: datetime, high: datetime, column: Any | None,
         by_hour: bool) -> Any:
    """The counted rows of [low, high) matching `filters` (the stats' own: project, tool,
    kind and the key's projects), grouped by `column` of Rollup and/or the hour."""
    query = select(*([Rollup.hour] if by_hour else []),
                   *([column] if column is not None else []),
                   func.sum(Rollup.count), Rollup.allowed)
    query = query.where(Rollup.hour >= low, Rollup.hour < high)
    if filters.kind is not None:
        query = query.where(Rollup.kind == filters.kind)
    else:
        query = query.where(Rollup.kind.in_(DECISION_KINDS))
    if filters.project is not None:
        query = query.where(Rollup.project == filters.project)
    if filters.tool is not None:
        query = query.where(Rollup.tool == filters.tool)
    if filters.projects is not None:
        query = query.where(Rollup.project.in_(filters.projects))
    group = [*([Rollup.hour] if by_hour else []), *([column] if column is not None else []),
             Rollup.allowed]
    return query.group_by(*group)


def as_utc(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value.replace("Z", "+00:00").replace(" ", "T"))
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
