"""POST /v1/replay (SPEC §12): what a candidate policy would have answered to the stored
decisions of a window, compared with what was answered."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
from fastapi import APIRouter

from app.auth.deps import PrincipalDep
from app.edge.errors import InvalidInput, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.canonical import canonical_sha256
from app.kit.deps import CallerDep, Sessions
from app.log.audit import record_in_transaction
from app.replay.deps import ReplayerDep
from app.replay.engine import Candidate
from app.replay.schemas import ReplayIn, ReplayOut
from app.replay.service import Window
from app.rules.service import compile_set
from app.store.engine import WRITE_OPTION

router = APIRouter(prefix="/v1", route_class=JSONRoute, tags=["replay"])


def _utc(moment: datetime, field: str) -> datetime:
    try:
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00:00+05:00 is before year 1 in UTC
        raise InvalidInput(f"{field} is out of range", fields=[
            {"field": field, "message": "out of range", "type": "value_error"}]) from None


@router.post("/replay", response_model=ReplayOut, response_model_by_alias=True,
             responses=errors(404), summary="Re-evaluate stored decisions under a candidate")
async def replay(body: ReplayIn, sessions: Sessions, principal: PrincipalDep,
                 replayer: ReplayerDep, caller: CallerDep) -> dict:
    """Every stored authorize decision in `[since, until)` (and the filters), re-evaluated
    from its recorded inputs with the candidate in place of what it replaces. Changes
    nothing; writes one audit record (kind `replay`) of itself, at the end, in a short
    write transaction of its own: the replay itself only reads, in read-only sessions, and
    never holds a write lock (the non-GET routes' `Session` would take SQLite's)."""
    since = _utc(body.since, "since")
    until = _utc(body.until, "until") if body.until is not None else datetime.now(UTC)
    if since >= until:
        raise InvalidInput("since must be before until", fields=[
            {"field": "since", "message": "must be before until", "type": "value_error"}])
    if body.project is not None and not principal.sees(body.project):
        raise NotFound(f"project '{body.project}' does not exist", project=body.project)
    window = Window(since=since, until=until, project=body.project, plan_id=body.plan_id,
                    tool=body.tool, projects=principal.project_list())
    rules = body.candidate.rules
    candidate = Candidate(profile=body.candidate.profile, tools=body.candidate.registered(),
                          rules=None if rules is None else compile_set(
                              {rule_id: rule.model_dump(exclude_none=True)
                               for rule_id, rule in rules.items()},
                              prefix="candidate.rules."))
    answer = await replayer.run(window, candidate, examples=body.examples)
    sent = body.candidate.model_dump(mode="json")
    async with sessions() as session, session.begin():
        await session.connection(execution_options={WRITE_OPTION: True})
        await record_in_transaction(session, caller, "replay", project=body.project, detail={
            "window": {"since": since.isoformat(), "until": until.isoformat(),
                       "project": body.project, "plan_id": body.plan_id, "tool": body.tool},
            # What identifies the candidate, not a copy of it (up to the body's size).
            "candidate": {"sha256": canonical_sha256(sent), "bytes": len(orjson.dumps(sent)),
                          "profile": body.candidate.profile is not None,
                          "tools": len(body.candidate.tools),
                          "skills": len(body.candidate.skills)},
            "result": {k: answer[k] for k in ("checked", "changed", "allow_to_deny",
                                              "deny_to_allow", "code_changed",
                                              "unreplayable", "truncated")}})
    return answer
