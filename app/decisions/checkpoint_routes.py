"""Signed checkpoints for auditors and witnesses (SPEC §16): the latest, the list, and
the verifier keys. The writer takes them (app/log/writer/loop.py, Checkpoints);
app/log/checkpoints.py is their format."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.edge.errors import InvalidInput, NotFound
from app.edge.openapi import errors
from app.edge.routing import JSONRoute
from app.kit.deps import Session, SettingsDep
from app.log.checkpoints import contradiction, load_signer, open_checkpoint
from app.log.note import NoteError, Verifier
from app.log.records import iso
from app.log.tables import ChainHead, LogCheckpoint, LogRecord

router = APIRouter(prefix="/v1/audit", route_class=JSONRoute, tags=["decision log"])


def _out(row: LogCheckpoint) -> dict[str, Any]:
    return {"origin": row.origin, "seq": row.seq, "head_hash": row.head_hash,
            "time": iso(row.time), "record_seq": row.record_seq,
            "verifier_key": row.verifier_key, "note": row.note}


def _current_key(signing_key: str | None) -> str | None:
    """The verifier key of TOOLGATE_LOG_SIGNING_KEY (checked at start-up by Settings)."""
    if signing_key is None:
        return None
    try:
        return load_signer(signing_key).verifier().key()
    except (OSError, NoteError):  # replaced or removed since: say nothing rather than 500
        return None


def _signature(row: LogCheckpoint, current: str | None) -> str | None:
    """Why the stored checkpoint's signature does not hold by the service's own key (from
    its key file, not from the database, where anyone who rewrote the log could store
    another key), or None."""
    if current is None:
        return "the signing key cannot be read, so the signature is not checked"
    try:
        open_checkpoint(row.note, [Verifier.parse(current)])
    except NoteError as exc:
        return f"the signature does not hold by the current signing key: {exc}"
    return None


async def _held(session: AsyncSession, row: LogCheckpoint) -> str | None:
    """Why the stored log no longer holds the checkpoint's head: the record at its seq (or
    the prune anchor there) has another hash; None when it holds."""
    found = await session.scalar(select(LogRecord.hash).where(LogRecord.seq == row.seq))
    head = (await session.execute(select(ChainHead))).scalar_one()
    return contradiction(row.seq, row.head_hash, found, head.pruned_seq, head.pruned_hash)


@router.get("/checkpoint", responses=errors(404), summary="The latest signed checkpoint")
async def latest_checkpoint(session: Session, settings: SettingsDep) -> dict:
    """The newest checkpoint of the log's head: `note` is the signed note (C2SP
    signed-note format), the other fields its content. `verifies` says whether its
    signature and the stored log at its `seq` still hold (`problem` says why not): what
    the operators' page shows. `signing_stopped`: the stored log contradicts it, so the
    service signs no new checkpoint over that log (and GET /readyz says degraded). An
    auditor checks the note itself (`toolgate audit verify --checkpoint`), with a verifier
    key obtained elsewhere. 404 when nothing is
    signed (no TOOLGATE_LOG_SIGNING_KEY) or no checkpoint was taken yet."""
    if settings.log_signing_key is None:
        raise NotFound("no checkpoints: the log is not signed (TOOLGATE_LOG_SIGNING_KEY)")
    row = await session.scalar(select(LogCheckpoint).order_by(LogCheckpoint.seq.desc())
                               .limit(1))
    if row is None:
        raise NotFound("no checkpoint yet: one is taken every TOOLGATE_CHECKPOINT_SECONDS "
                       "in which the log grew")
    forged = await _held(session, row)
    problem = _signature(row, _current_key(settings.log_signing_key)) or forged
    # The writer signs nothing over a log that contradicts its last checkpoint (the same
    # test, app/log/writer/common.py): this one stays the latest, and signing has stopped.
    return {**_out(row), "verifies": problem is None, "problem": problem,
            "signing_stopped": forged is not None}


def _since(value: str | None) -> tuple[int | None, datetime | None]:
    if value is None:
        return None, None
    if value.isdigit():
        return int(value), None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        if moment.tzinfo is None:
            raise ValueError(value)
    except ValueError:
        raise InvalidInput("since is neither a seq nor an RFC 3339 date-time", fields=[
            {"field": "since", "message": "a seq (checkpoints after it) or an RFC 3339 "
             "date-time with an offset", "type": "value_error"}]) from None
    return None, moment.astimezone(UTC)


@router.get("/checkpoints", summary="Signed checkpoints, oldest first")
async def list_checkpoints(
    session: Session,
    since: Annotated[str | None, Query(
        description="A seq: the checkpoints after it; or an RFC 3339 date-time: those "
                    "taken from then on", max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> dict:
    """`items` oldest first; `next_since` is the `since` of the next page (null on the
    last). Checkpoints outlive a prune of their records."""
    after, moment = _since(since)
    query = select(LogCheckpoint).order_by(LogCheckpoint.seq).limit(limit + 1)
    if after is not None:
        if after >= 2**63:
            raise InvalidInput("since is out of range", fields=[
                {"field": "since", "message": "out of range", "type": "value_error"}])
        query = query.where(LogCheckpoint.seq > after)
    if moment is not None:
        query = query.where(LogCheckpoint.time >= moment)
    rows = list((await session.scalars(query)).all())
    more = len(rows) > limit
    rows = rows[:limit]
    return {"items": [_out(r) for r in rows],
            "next_since": str(rows[-1].seq) if more else None}


@router.get("/public-key", responses=errors(404), summary="The checkpoints' verifier keys")
async def public_key(session: Session, settings: SettingsDep) -> dict:
    """`verifier_key`: the key signing new checkpoints (`<origin>+<key id>+<base64>`, the
    signed-note format's), null when nothing is signed now. `keys`: every key that signed
    a stored checkpoint and the current one, each with the `first_seq` and `last_seq` it
    signed (null for a key that has signed none yet): after a rotation a new key signs
    from its first checkpoint on, and the old ones still verify the checkpoints before."""
    current = _current_key(settings.log_signing_key)
    rows = (await session.execute(
        select(LogCheckpoint.verifier_key, func.min(LogCheckpoint.seq),
               func.max(LogCheckpoint.seq))
        .group_by(LogCheckpoint.verifier_key).order_by(func.min(LogCheckpoint.seq)))).all()
    keys = [{"verifier_key": key, "first_seq": first, "last_seq": last,
             "current": key == current} for key, first, last in rows]
    if current is not None and current not in {k["verifier_key"] for k in keys}:
        keys.append({"verifier_key": current, "first_seq": None, "last_seq": None,
                     "current": True})
    if not keys:
        raise NotFound("the log is not signed (TOOLGATE_LOG_SIGNING_KEY)")
    return {"verifier_key": current, "keys": keys}
