"""Reading the log: filtered pages, one record, stats, export and verification."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import orjson
from sqlalchemy import (
    Select,
    and_,
    case,
    cast,
    exists,
    false,
    func,
    literal,
    literal_column,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.decisions import rollups
from app.ledger.tables import OUTCOME_GROUPS, OUTCOME_JOIN
from app.log.chain import (
    GENESIS_ANCHOR,
    PRUNE_ANCHOR,
    RECORD_ANCHOR,
    Unreadable,
    Verifier,
    VerifyResult,
)
from app.log.records import DECISION_KINDS, iso
from app.log.tables import RARE_KINDS, ChainHead, LogRecord, Rollup
from app.store.engine import read_only  # export and verify never take a write lock

EXPORT_CHUNK = 1000


def to_record(row: LogRecord) -> dict[str, Any]:
    """The record exactly as it was hashed (and as it is exported). Its detail is the
    stored text itself (stored_detail), so no record, however deep, fails to be written
    out or hashed."""
    return {
        "seq": row.seq, "decision_id": row.decision_id, "kind": row.kind,
        "created_at": iso(row.created_at), "project": row.project, "plan_id": row.plan_id,
        "action_id": row.action_id, "tool": row.tool, "allowed": row.allowed,
        "code": row.code, "error": row.error, "check": row.check,
        "provenance": row.provenance, "profile_name": row.profile_name,
        "profile_version": row.profile_version, "latency_ms": row.latency_ms,
        "request_id": row.request_id, "key_id": row.key_id,
        "detail": stored_detail(row.detail), "prev_hash": row.prev_hash, "hash": row.hash,
    }


def shown(row: LogRecord) -> dict[str, Any]:
    """A record as GET /v1/decisions shows it: as hashed, plus the shadow verdict (SPEC §12)
    at its top level (`null` without one). It is read from the detail, where it is hashed:
    the top-level copy is for reading only, and export and verification never show it."""
    record = to_record(row)
    shadow = None
    if row.kind == "authorize" and '"shadow":{' in row.detail:
        try:
            shadow = orjson.loads(row.detail).get("shadow")
        except (orjson.JSONDecodeError, AttributeError):
            shadow = None
    record["shadow"] = shadow
    return record


def stored_detail(text: str) -> orjson.Fragment | Unreadable:
    """A row's detail as every read writes it: the stored text unchanged, embedded as an
    orjson Fragment, never parsed into objects and written again. That text is what the
    log hashed (chain.chain_values), and orjson writes only 254 levels: a record read back
    into a page (or a hash) wraps its detail two or three levels deeper than the log wrote
    it, so a detail near that limit, accepted before the free-form limits (docs/api.md),
    made GET /v1/decisions and /v1/audit/verify fail. The text is checked to be JSON first;
    a detail that is not (only something other than toolgate can store one) is given as
    the text, a JSON string, which verification reports."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return Unreadable(text)
    return orjson.Fragment(text)


@dataclass
class Filters:
    since: datetime | None = None
    until: datetime | None = None
    project: str | None = None
    plan_id: str | None = None
    action_id: str | None = None
    tool: str | None = None
    allowed: bool | None = None
    code: str | None = None
    error: str | None = None
    kind: str | None = None
    # None = every project; a list = only these (a key's project scope).
    projects: list[str] | None = None
    # True: records whose shadow verdict (SPEC §12) differs from the answer; False: those
    # with a shadow verdict that does not.
    shadow_changed: bool | None = None
    # A coding agent (SPEC §20): the hook decisions whose detail.agent is this one.
    agent: str | None = None
    # A rule id (SPEC §18): the decisions that rule matched (detail.rules, shadow included).
    rule: str | None = None
    dialect: str = "sqlite"  # set from the session by page() and stats()

    def apply(self, query: Select) -> Select:
        if self.kind is not None:
            query = query.where(LogRecord.kind == self.kind)
            if self.kind != "authorize":
                # The kind index's own condition, spelled as it is: SQLite uses a partial
                # index only for a query that states it (Postgres proves it by itself).
                query = query.where(RARE_KINDS)
        else:
            query = query.where(LogRecord.kind.in_(DECISION_KINDS))
        for column, value in (
            (LogRecord.project, self.project), (LogRecord.plan_id, self.plan_id),
            (LogRecord.action_id, self.action_id), (LogRecord.tool, self.tool),
            (LogRecord.allowed, self.allowed), (LogRecord.code, self.code),
            (LogRecord.error, self.error),
        ):
            if value is not None:
                query = query.where(column == value)
        if self.since is not None:
            query = query.where(LogRecord.created_at >= self.since)
        if self.until is not None:
            query = query.where(LogRecord.created_at < self.until)
        if self.projects is not None:
            query = query.where(LogRecord.project.in_(self.projects))
        if self.agent is not None:
            query = query.where(hook_agent(self.dialect, self.agent))
        if self.shadow_changed is not None:
            code, allowed = shadow_code(self.dialect), shadow_allowed(self.dialect)
            changed = or_(allowed != LogRecord.allowed,
                          func.coalesce(code, "") != func.coalesce(LogRecord.code, ""))
            query = query.where(has_shadow(self.dialect),
                                changed if self.shadow_changed else ~changed)
        if self.rule is not None:
            query = query.where(matched_rule(self.dialect, self.rule))
        return query


def matched_rule(dialect: str, rule: str) -> Any:
    """Authorize records whose detail.rules names `rule`: a text test that skips most
    records cheaply, then each database's JSON reading (JSONB containment on Postgres,
    json_each on SQLite)."""
    if dialect == "postgresql":
        named = cast(LogRecord.detail, JSONB)["rules"].contains([{"id": rule}])
    else:
        entries = func.json_each(LogRecord.detail, "$.rules").table_valued("value")
        named = exists(select(literal(1)).select_from(entries)
                       .where(func.json_extract(entries.c.value, "$.id") == rule))
    return and_(LogRecord.kind == "authorize", LogRecord.detail.like('%"rules":[%'), named)


# The shadow verdict lives in the record's detail (so records verify as before): read
# with each database's JSON functions, after a text test that skips most records cheaply.
def _shadow_field(dialect: str, field: str) -> Any:
    if dialect == "postgresql":
        return cast(LogRecord.detail, JSONB)["shadow"][field].astext
    return func.json_extract(LogRecord.detail, f"$.shadow.{field}")


def shadow_code(dialect: str) -> Any:
    return _shadow_field(dialect, "code")


def shadow_allowed(dialect: str) -> Any:
    value = _shadow_field(dialect, "allowed")
    if dialect == "postgresql":
        return case((value == "true", True), else_=false())
    return case((value == 1, True), else_=false())


def has_shadow(dialect: str) -> Any:
    return and_(LogRecord.kind == "authorize", LogRecord.detail.like('%"shadow":{%'),
                _shadow_field(dialect, "allowed").is_not(None))


def hook_agent(dialect: str, agent: str) -> Any:
    """Authorize records made by a coding agent's hook (detail.agent, SPEC §20): a text
    test on the canonical detail that skips most records cheaply, then each database's
    JSON reading of the top-level field (an argument named `agent` is not it)."""
    if dialect == "postgresql":
        named = cast(LogRecord.detail, JSONB)["agent"].astext == agent
    else:
        named = func.json_extract(LogRecord.detail, "$.agent") == agent
    text = orjson.dumps({"agent": agent}).decode()[1:-1]
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return and_(LogRecord.kind == "authorize",
                LogRecord.detail.like(f"%{escaped}%", escape="\\"), named)


async def page(session: AsyncSession, filters: Filters, *, before_seq: int | None,
               limit: int) -> list[LogRecord]:
    filters.dialect = session.bind.dialect.name
    query = filters.apply(select(LogRecord)).order_by(LogRecord.seq.desc()).limit(limit)
    if before_seq is not None:
        query = query.where(LogRecord.seq < before_seq)
    return list((await session.scalars(query)).all())


async def get(session: AsyncSession, decision_id: str) -> LogRecord | None:
    return await session.scalar(select(LogRecord).where(LogRecord.decision_id == decision_id))


async def first_of_plan(session: AsyncSession, plan_id: str, *, kind: str,
                        contains: str | None = None) -> LogRecord | None:
    """The oldest record of one kind about a plan (the operators' page, app/ui/reads.py):
    its creation (kind `plan`), or the deny that asked for an approval (kind `authorize`
    whose detail holds `contains`, the approval's id as the canonical JSON writes it)."""
    query = select(LogRecord).where(LogRecord.plan_id == plan_id, LogRecord.kind == kind)
    if kind != "authorize":
        query = query.where(RARE_KINDS)
    if contains is not None:
        query = query.where(LogRecord.code.is_not(None),
                            LogRecord.detail.contains(contains, autoescape=True))
    return await session.scalar(query.order_by(LogRecord.seq).limit(1))


GROUPS = {"code": LogRecord.code, "tool": LogRecord.tool, "project": LogRecord.project,
          "allowed": LogRecord.allowed, "error": LogRecord.error, "kind": LogRecord.kind}
ROLLED_GROUPS = {"code": Rollup.code, "tool": Rollup.tool, "project": Rollup.project,
                 "allowed": Rollup.allowed, "error": Rollup.error, "kind": Rollup.kind}
BUCKETS = {"minute": "%Y-%m-%dT%H:%M:00Z", "hour": "%Y-%m-%dT%H:00:00Z",
           "day": "%Y-%m-%dT00:00:00Z"}


def _bucket_expr(dialect: str, bucket: str) -> Any:
    if dialect == "postgresql":
        return func.date_trunc(bucket, LogRecord.created_at)
    return func.strftime(BUCKETS[bucket], LogRecord.created_at)


def _counts() -> tuple[Any, Any]:
    allowed = func.sum(case((LogRecord.allowed.is_(True), 1), else_=0))
    return func.count(), allowed


async def stats(session: AsyncSession, filters: Filters, *, group_by: str | None,
                bucket: str | None, sessions: async_sessionmaker | None = None
                ) -> dict[str, Any]:
    """Counts over a range: the whole hours that are over from the hourly counts
    (app/decisions/rollups.py), the rest from the log. Per-minute series, and filters the
    counts do not hold (plan, action, verdict, code, error), read the log alone."""
    dialect = filters.dialect = session.bind.dialect.name
    span = None
    # The counts hold neither outcomes (SPEC §11) nor shadow verdicts (SPEC §12).
    if sessions is not None and bucket != "minute" and all(
            v is None for v in (filters.plan_id, filters.action_id, filters.allowed,
                                filters.code, filters.error, filters.shadow_changed)) and (
            group_by is None or group_by in ROLLED_GROUPS):
        # The oldest record by seq (the primary key; Postgres's created_at index is a
        # BRIN, no help for min()): times are nearly in seq order, and any record before it
        # is in the range read from the log anyway. The counted hours start there whatever
        # `since` says: since=2000-01-01 must not count a quarter of a million empty hours.
        first = await session.scalar(select(LogRecord.created_at).where(
            LogRecord.seq == select(func.min(LogRecord.seq)).scalar_subquery()))
        span = rollups.full_hours(filters.since, filters.until, first=first,
                                  now=datetime.now(UTC))
    if span is None:
        return await _stats(session, filters, group_by=group_by, bucket=bucket)
    low, high = span
    await rollups.ensure(sessions, dialect, low, high)
    total = [0, 0]
    groups: dict[Any, list[int]] = {}
    series: dict[datetime, list[int]] = {}

    def add(table: dict, key: Any, n: int, a: int) -> None:
        counts = table.setdefault(key, [0, 0])
        counts[0] += n
        counts[1] += a

    for edge in (replace(filters, until=low), replace(filters, since=high)):
        part = await _stats(session, edge, group_by=group_by, bucket=bucket)
        total[0] += part["total"]["count"]
        total[1] += part["total"]["allowed"]
        for g in part.get("groups", ()):
            add(groups, g["key"], g["count"], g["allowed"])
        for b in part.get("series", ()):
            add(series, rollups.as_utc(b["bucket"]), b["count"], b["allowed"])
    column = ROLLED_GROUPS[group_by] if group_by is not None else None
    for by_hour in (False, True):
        if by_hour and bucket is None:
            continue
        query = rollups.rows(filters, low, high, column if not by_hour else None, by_hour)
        # A session of its own: on SQLite the request's read transaction may have begun
        # before `ensure` wrote the counts, and would not see them.
        async with sessions() as fresh:
            found = (await fresh.execute(query)).all()
        for row in found:
            *keys, n, allowed = row
            n = int(n)  # Postgres sums a bigint as a numeric
            a = n if allowed else 0
            if by_hour:
                moment = rollups.as_utc(keys[0])
                if bucket == "day":
                    moment = moment.replace(hour=0)
                add(series, moment, n, a)
            elif column is not None:
                key = keys[0]
                add(groups, None if key == "" else key, n, a)
            if not by_hour:
                total[0] += n
                total[1] += a
    answer: dict[str, Any] = {"total": {"count": total[0], "allowed": total[1],
                                        "denied": total[0] - total[1]}}
    if group_by is not None:
        answer["groups"] = [{"key": k, "count": n, "allowed": a, "denied": n - a}
                            for k, (n, a) in sorted(groups.items(), key=lambda i: -i[1][0])]
    if bucket is not None:
        answer["series"] = [
            {"bucket": m.strftime(BUCKETS[bucket]) if dialect != "postgresql" else iso(m),
             "count": n, "allowed": a, "denied": n - a}
            for m, (n, a) in sorted(series.items())]
    return answer


async def _stats(session: AsyncSession, filters: Filters, *, group_by: str | None,
                 bucket: str | None) -> dict[str, Any]:
    count, allowed = _counts()
    base = filters.apply(select(count, allowed)).where(LogRecord.allowed.is_not(None))
    total, allowed_total = (await session.execute(base)).one()
    answer: dict[str, Any] = {"total": {"count": total, "allowed": allowed_total or 0,
                                        "denied": total - (allowed_total or 0)}}
    if group_by is not None:
        if group_by == "shadow_code":  # over the records that have a shadow verdict
            column = shadow_code(filters.dialect)
            query = filters.apply(select(count, allowed, column.label("key"))).where(
                has_shadow(filters.dialect))
        else:
            column = GROUPS.get(group_by)
            query = select(count, allowed).select_from(LogRecord)
            if column is None:  # by outcome (SPEC §11): decisions joined to their reports
                column = OUTCOME_GROUPS[group_by]
                table, key = OUTCOME_JOIN
                query = query.outerjoin(table, key == LogRecord.decision_id)
            query = filters.apply(query.add_columns(column.label("key")))
        query = (query.where(LogRecord.allowed.is_not(None))
                 .group_by(column).order_by(count.desc()))
        answer["groups"] = [
            {"key": key, "count": n, "allowed": a or 0, "denied": n - (a or 0)}
            for n, a, key in (await session.execute(query)).all()
        ]
    if bucket is not None:
        expr = _bucket_expr(session.bind.dialect.name, bucket).label("bucket")
        query = (filters.apply(select(expr, count, allowed))
                 .where(LogRecord.allowed.is_not(None))
                 .group_by(literal_column("bucket")).order_by(literal_column("bucket")))
        answer["series"] = [
            {"bucket": b if isinstance(b, str) else iso(b), "count": n, "allowed": a or 0,
             "denied": n - (a or 0)}
            for b, n, a in (await session.execute(query)).all()
        ]
    return answer


async def seq_range(session: AsyncSession, since: datetime | None,
                    until: datetime | None) -> tuple[int, int] | None:
    """The contiguous seq range (the chain's order) that holds every record of a time range.

    Record times are taken when a decision is made and seq when it is written, so they are
    not in the same order: the range runs from the smallest to the largest seq of any record
    in the window (and may hold a few records just outside it, never miss one inside)."""
    query = select(func.min(LogRecord.seq), func.max(LogRecord.seq))
    if since is not None:
        query = query.where(LogRecord.created_at >= since)
    if until is not None:
        query = query.where(LogRecord.created_at < until)
    first, last = (await session.execute(query)).one()
    if first is None or last is None:
        return None
    return first, last


async def stream(sessions: async_sessionmaker, since: datetime | None,
                 until: datetime | None, *, projects: list[str] | None = None,
                 after_seq: int | None = None, until_seq: int | None = None
                 ) -> AsyncIterator[dict[str, Any]]:
    """Records in chain order, fetched in chunks: memory stays flat for any range.
    after_seq/until_seq bound the seq range too (a witness's export between two
    checkpoints: seq > after_seq, seq <= until_seq)."""
    async with read_only(sessions) as session:
        bounds = await seq_range(session, since, until)
    if bounds is None:
        return
    cursor, last = bounds[0] - 1, bounds[1]
    if after_seq is not None:
        cursor = max(cursor, after_seq)
    if until_seq is not None:
        last = min(last, until_seq)
    while cursor < last:
        async with read_only(sessions) as session:
            query = (select(LogRecord).where(LogRecord.seq > cursor, LogRecord.seq <= last)
                     .order_by(LogRecord.seq).limit(EXPORT_CHUNK))
            if projects is not None:
                query = query.where(LogRecord.project.in_(projects))
            rows = list((await session.scalars(query)).all())
        if not rows:
            return
        for row in rows:
            yield to_record(row)
        cursor = rows[-1].seq


async def verify(sessions: async_sessionmaker, since: datetime | None,
                 until: datetime | None) -> VerifyResult:
    async with read_only(sessions) as session:
        head = (await session.execute(select(ChainHead))).scalar_one()
        bounds = await seq_range(session, since, until)
        # Where the walk starts: the range's first record, or (for an empty window that
        # reaches the present) just past the head; the whole log starts after the prune.
        start = bounds[0] if bounds else (head.seq + 1 if since else head.pruned_seq + 1)
        anchor: tuple[int, str] = (head.pruned_seq, head.pruned_hash)
        kind = PRUNE_ANCHOR if head.pruned_seq else GENESIS_ANCHOR
        if start - 1 > head.pruned_seq:
            kind = RECORD_ANCHOR
            before = await session.scalar(
                select(LogRecord.hash).where(LogRecord.seq == start - 1))
            # The record before the range is gone (removed): the range starts unanchored
            # at its expected position, so the gap is reported on the first record.
            anchor = (start - 1, before) if before is not None else (start - 1, "")
    # A window that reaches the present is checked up to the chain head, so records removed
    # from the newest end are found (the head no longer matches the last record).
    to_head = until is None or until >= datetime.now(UTC)
    if bounds is None and not to_head:
        return VerifyResult(True, 0, None, head.hash, kind)
    verifier = Verifier(anchor, anchor_kind=kind)
    # Walk by seq from the anchor, so a removed record shows up as a gap.
    cursor = anchor[0]
    last = head.seq if to_head else bounds[1]
    while cursor < last and verifier.first_bad is None:
        async with read_only(sessions) as session:
            rows = list((await session.scalars(
                select(LogRecord).where(LogRecord.seq > cursor, LogRecord.seq <= last)
                .order_by(LogRecord.seq).limit(EXPORT_CHUNK))).all())
        if not rows:
            break
        for row in rows:
            if not verifier.feed(to_record(row)):
                break
        cursor = rows[-1].seq
    result = verifier.result()
    if result.ok and to_head and verifier.head != head.hash:
        result.ok = False
        result.first_bad = {"seq": head.seq, "decision_id": None,
                            "reason": "the newest records are missing (chain head mismatch)"}
    result.head = head.hash
    return result
