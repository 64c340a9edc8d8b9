"""Retention: remove the oldest records while keeping the rest of the chain verifiable.

Pruning deletes a prefix of the chain (every record up to the newest one created before the
cut-off) and stores the last deleted record's seq and hash on `chain_head` as the anchor:
verification then starts from the anchor, so the remaining chain still proves that nothing
after it was altered, removed or reordered. The prune itself is recorded in the log.

With signed checkpoints (SPEC §16) the cut is made at the newest checkpoint at or before
that record: the anchor is then a signed head (its seq and head_hash), the first record
kept is that checkpoint's own record (its note inside), and the prune record names the
checkpoint. Checkpoints themselves (log_checkpoints) are never pruned.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import async_sessionmaker

from app.decisions import rollups
from app.kit.caller import Caller
from app.log.audit import audit_change
from app.log.records import iso
from app.log.tables import ChainHead, LogCheckpoint, LogRecord
from app.store.base import utcnow


async def prune(sessions: async_sessionmaker, before: datetime) -> dict:
    async with sessions() as session, session.begin():
        # Lock the head first, as every writer does, so no batch interleaves with the cut.
        await session.execute(update(ChainHead).where(ChainHead.id == 1)
                              .values(updated_at=utcnow()))
        last = await session.scalar(
            select(func.max(LogRecord.seq)).where(LogRecord.created_at < before))
        if last is None:
            return {"deleted": 0, "anchor_seq": None, "anchor_hash": None}
        pruned = await session.scalar(select(ChainHead.pruned_seq).where(ChainHead.id == 1))
        point = await session.scalar(
            select(LogCheckpoint).where(LogCheckpoint.seq <= last, LogCheckpoint.seq > pruned)
            .order_by(LogCheckpoint.seq.desc()).limit(1))
        named = None
        if point is not None:  # cut at the signed head: a few seconds' records more kept
            last = point.seq
            named = {"seq": point.seq, "head_hash": point.head_hash, "time": iso(point.time),
                     "note": point.note}
        anchor_hash = await session.scalar(select(LogRecord.hash).where(LogRecord.seq == last))
        result = await session.execute(delete(LogRecord).where(LogRecord.seq <= last))
        await session.execute(update(ChainHead).where(ChainHead.id == 1)
                              .values(pruned_seq=last, pruned_hash=anchor_hash))
        deleted = result.rowcount or 0
        await rollups.forget(session, before)  # counted again from what remains
        await audit_change(session, Caller(), resource="audit_log", name=None,
                           operation="prune", before=None,
                           after={"before": iso(before), "deleted": deleted,
                                  "anchor_seq": last, "anchor_hash": anchor_hash,
                                  "checkpoint": named})
    return {"deleted": deleted, "anchor_seq": last, "anchor_hash": anchor_hash,
            "checkpoint": named}
