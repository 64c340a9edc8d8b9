"""Appending to the hash-chained log, and the group-commit writer.

"No record, no allow": a decision's answer is sent only after its record is committed.
Concurrent decisions share one transaction: one writer task per process drains whatever
has queued (up to `max_batch`) and commits it at once, so durability costs one commit per
batch rather than per decision. Every writer, in any process or replica, extends the chain
under a lock on the single `chain_head` row, which makes `seq` a total order.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import orjson
from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.decisions.chain import record_hash
from app.decisions.records import parse_iso
from app.decisions.tables import ChainHead, LogRecord
from app.store.tables import utcnow

log = logging.getLogger("toolgate.decisions")
_LOG = LogRecord.__table__
_HEAD = ChainHead.__table__


class RecordingFailed(Exception):
    """The log could not record a decision; the caller must not answer allow."""


async def append(session: AsyncSession, records: list[dict[str, Any]]) -> None:
    """Chain and insert records inside the caller's transaction (the caller commits)."""
    if not records:
        return
    # Taking the row lock with an UPDATE first makes SQLite start its write transaction
    # here too, so two processes never both read the head and then race to extend it.
    head = (await session.execute(
        update(_HEAD).where(_HEAD.c.id == 1).values(updated_at=utcnow())
        .returning(_HEAD.c.seq, _HEAD.c.hash)
    )).one()
    seq, prev = head.seq, head.hash
    rows = []
    for record in records:
        seq += 1
        record["seq"] = seq
        record["prev_hash"] = prev
        record["hash"] = prev = record_hash(record)
        rows.append({
            **{k: v for k, v in record.items() if k not in ("detail", "created_at")},
            "created_at": parse_iso(record["created_at"]),
            "detail": orjson.dumps(record["detail"], option=orjson.OPT_SORT_KEYS).decode(),
        })
    # Core statements on the tables: the ORM's bulk machinery costs more than the insert.
    await session.execute(insert(_LOG), rows)
    await session.execute(update(_HEAD).where(_HEAD.c.id == 1).values(seq=seq, hash=prev))


class DecisionLog:
    """One per process: `await write(records)` returns once they are committed."""

    def __init__(self, sessions: async_sessionmaker, *, max_batch: int = 512,
                 timeout: float = 5.0) -> None:
        self._sessions = sessions
        self._max_batch = max_batch
        self._timeout = timeout
        self._queue: asyncio.Queue[tuple[list[dict], asyncio.Future] | None] = asyncio.Queue()
        self._task: asyncio.Task | None = None
        self.batches = 0
        self.records = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="toolgate-decision-log")

    async def close(self) -> None:
        """Drain: everything queued before close is written before the writer stops."""
        if self._task is None:
            return
        self._queue.put_nowait(None)
        await self._task
        self._task = None

    async def write(self, records: list[dict[str, Any]]) -> None:
        if self._task is None or self._task.done():
            raise RecordingFailed("the decision log writer is not running")
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._queue.put_nowait((records, future))
        try:
            await asyncio.wait_for(asyncio.shield(future), self._timeout)
        except TimeoutError:
            raise RecordingFailed(
                f"the decision was not recorded within {self._timeout}s"
            ) from None

    async def _run(self) -> None:
        stopping = False
        while not stopping:
            item = await self._queue.get()
            if item is None:
                break
            batch = [item]
            while len(batch) < self._max_batch and not self._queue.empty():
                nxt = self._queue.get_nowait()
                if nxt is None:
                    stopping = True
                    break
                batch.append(nxt)
            await self._commit(batch)

    async def _commit(self, batch: list[tuple[list[dict], asyncio.Future]]) -> None:
        records = [record for records, _ in batch for record in records]
        try:
            async with self._sessions() as session, session.begin():
                await append(session, records)
        except Exception as exc:  # whatever the cause, these decisions are not recorded
            log.error("decision log write failed (%d records): %s", len(records), exc)
            for _, future in batch:
                if not future.done():
                    future.set_exception(RecordingFailed(str(exc) or type(exc).__name__))
            return
        self.batches += 1
        self.records += len(records)
        for _, future in batch:
            if not future.done():
                future.set_result(None)
