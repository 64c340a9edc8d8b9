"""The decision log for dashboards and auditors (SPEC §6)."""

from __future__ import annotations

import base64
import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Annotated, Literal

import orjson
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse

from app.auth.deps import PrincipalDep
from app.decisions import queries
from app.decisions.queries import Filters
from app.edge.errors import InvalidInput, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import Session, Sessions
from app.kit.schemas import NAME_PATTERN, DateTime
from app.ledger.tables import outcome_of, outcome_out
from app.log.records import RECORD_FIELDS

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["decision log"])

NameQuery = Annotated[str | None, Query(pattern=NAME_PATTERN)]
CodeQuery = Annotated[str | None, Query(pattern=r"^[A-Za-z0-9_]{1,64}$")]
Kind = Literal["authorize", "screen", "plan", "resolve", "config", "approval", "outcome",
               "replay", "checkpoint"]


def _utc(moment: datetime | None, field: str = "since") -> datetime | None:
    if moment is None:
        return None
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00 is before year 1 in UTC
        raise InvalidInput(f"{field} is out of range", fields=[
            {"field": field, "message": "out of range", "type": "value_error"}]) from None


def _filters(since: datetime | None, until: datetime | None, **values: object) -> Filters:
    since, until = _utc(since, "since"), _utc(until, "until")
    if since and until and since > until:
        raise InvalidInput("since is after until", fields=[
            {"field": "since", "message": "must not be after until", "type": "value_error"}])
    return Filters(since=since, until=until, **values)  # type: ignore[arg-type]


def _cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"s{seq}".encode()).decode().rstrip("=")


def _seq(cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not raw.startswith("s"):
            raise ValueError(raw)
        seq = int(raw[1:])
        if not 0 <= seq < 2**63:
            raise ValueError(raw)
        return seq
    except Exception:  # any malformed cursor is the client's input error
        raise InvalidInput("cursor is not valid", fields=[
            {"field": "cursor", "message": "not a cursor from a previous page",
             "type": "value_error"}]) from None


@router.get("/decisions", summary="Decisions, newest first, filtered and paged")
async def list_decisions(
    request: Request,
    session: Session,
    principal: PrincipalDep,
    since: DateTime | None = None,
    until: DateTime | None = None,
    project: NameQuery = None,
    plan_id: NameQuery = None,
    action_id: NameQuery = None,
    tool: NameQuery = None,
    allowed: bool | None = None,
    code: CodeQuery = None,
    error: CodeQuery = None,
    kind: Kind | None = None,
    shadow_changed: bool | None = None,
    agent: Annotated[str | None, Query(
        pattern=r"^[a-z][a-z0-9-]{0,63}$",
        description="A coding agent's hook decisions (`claude-code`, `gemini-cli`, ...): "
                    "their detail.agent")] = None,
    rule: NameQuery = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: str | None = None,
) -> Response:
    """`rule`: the decisions a call rule matched (SPEC §18), shadow rules included."""
    filters = _filters(since, until, project=project, plan_id=plan_id, action_id=action_id,
                       tool=tool, allowed=allowed, code=code, error=error, kind=kind,
                       projects=principal.project_list(), shadow_changed=shadow_changed,
                       rule=rule)
    # app/decisions/reader.py (it knows no shadow or rule filter: those read the session).
    reader = (request.app.state.log_reader if shadow_changed is None and rule is None
              else None)
    if agent is not None:  # the reader knows no agent filter either
        filters.agent, reader = agent, None
    before = _seq(cursor) if cursor else None
    rows = (await reader.page(filters, before_seq=before, limit=limit + 1) if reader else
            await queries.page(session, filters, before_seq=before, limit=limit + 1))
    items = [queries.shown(r) for r in rows[:limit]]
    next_cursor = _cursor(rows[limit - 1].seq) if len(rows) > limit else None
    return Response(orjson.dumps({"items": items, "next_cursor": next_cursor}),
                    media_type="application/json")


@router.get("/decisions/stats", summary="Counts by code/tool/project/allowed, and a series")
async def decision_stats(
    session: Session,
    sessions: Sessions,
    principal: PrincipalDep,
    since: DateTime | None = None,
    until: DateTime | None = None,
    group_by: Literal["code", "tool", "project", "allowed", "error", "kind",
                      "outcome", "unverified", "args_mismatch", "shadow_code"] | None = None,
    bucket: Literal["minute", "hour", "day"] | None = None,
    project: NameQuery = None,
    tool: NameQuery = None,
    kind: Kind | None = None,
) -> dict:
    filters = _filters(since, until, project=project, tool=tool, kind=kind,
                       projects=principal.project_list())
    answer = await queries.stats(session, filters, group_by=group_by, bucket=bucket,
                                 sessions=sessions)
    return {"since": since, "until": until, "group_by": group_by, "bucket": bucket, **answer}


@router.get("/decisions/{decision_id}", responses=errors(404),
            summary="One decision or configuration change")
async def get_decision(decision_id: str, request: Request, sessions: Sessions,
                       principal: PrincipalDep) -> Response:
    reader = request.app.state.log_reader  # app/decisions/reader.py
    wanted = decision_id[:64]
    if reader is not None:
        row, reported = await reader.get_with_outcome(wanted)
        if row is None or not principal.sees(row.project):
            raise NotFound(f"decision '{wanted}' does not exist", decision_id=wanted)
        record = queries.shown(row)
        if row.kind == "authorize":  # what the agent reported (SPEC §11), null until then
            record["outcome"] = outcome_out(reported) if reported is not None else None
        return Response(orjson.dumps(record), media_type="application/json")
    async with sessions() as session:
        row = await queries.get(session, wanted)
        if row is None or not principal.sees(row.project):
            raise NotFound(f"decision '{wanted}' does not exist", decision_id=wanted)
        record = queries.shown(row)
        if row.kind == "authorize":
            record["outcome"] = await outcome_of(session, row.decision_id)
    return Response(orjson.dumps(record), media_type="application/json")


CSV_COLUMNS = ("seq", *RECORD_FIELDS, "prev_hash", "hash")


async def _jsonl(records: AsyncIterator[dict]) -> AsyncIterator[bytes]:
    async for record in records:
        yield orjson.dumps(record, option=orjson.OPT_SORT_KEYS) + b"\n"


async def _csv(records: AsyncIterator[dict]) -> AsyncIterator[bytes]:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(CSV_COLUMNS)
    async for record in records:
        record = {**record, "detail": orjson.dumps(record["detail"],
                                                   option=orjson.OPT_SORT_KEYS).decode()}
        writer.writerow(["" if record[c] is None else record[c] for c in CSV_COLUMNS])
        if buffer.tell() > 64 * 1024:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


class JSONLines(StreamingResponse):
    media_type = "application/x-ndjson"


EXPORTED = {200: {"description": "One record per line (`format=jsonl`, the default), or CSV "
                                 "with a header row (`format=csv`)",
                  "content": {"application/x-ndjson": {"schema": {"type": "string"}},
                              "text/csv": {"schema": {"type": "string"}}}}}


@router.get("/audit/export", response_class=JSONLines, responses=EXPORTED,
            summary="Every record of a range, streamed (JSONL or CSV)")
async def audit_export(
    sessions: Sessions,
    principal: PrincipalDep,
    since: DateTime | None = None,
    until: DateTime | None = None,
    format: Literal["jsonl", "csv"] = "jsonl",
    after_seq: Annotated[int | None, Query(ge=0, lt=2**63, description=(
        "Only records with a greater seq (a witness's export after a checkpoint)"))] = None,
    until_seq: Annotated[int | None, Query(ge=0, lt=2**63, description=(
        "Only records up to this seq"))] = None,
) -> StreamingResponse:
    _filters(since, until)
    # A scoped key exports its projects' records only: such a file has gaps in the chain,
    # so it cannot be verified offline (verify needs an unscoped key; docs/auth.md).
    records = queries.stream(sessions, _utc(since, "since"), _utc(until, "until"),
                             projects=principal.project_list(), after_seq=after_seq,
                             until_seq=until_seq)
    if format == "csv":
        return StreamingResponse(_csv(records), media_type="text/csv",
                                 headers={"Content-Disposition":
                                          'attachment; filename="toolgate-audit.csv"'})
    return JSONLines(_jsonl(records), headers={"Content-Disposition":
                                               'attachment; filename="toolgate-audit.jsonl"'})


@router.get("/audit/verify", summary="Check the hash chain over a range")
async def audit_verify(
    sessions: Sessions,
    since: DateTime | None = None,
    until: DateTime | None = None,
) -> dict:
    """The chain spans every project, so this needs a key whose projects are all (null):
    a scoped key gets 403 (docs/auth.md)."""
    _filters(since, until)
    return (await queries.verify(sessions, _utc(since, "since"),
                                 _utc(until, "until"))).as_dict()
