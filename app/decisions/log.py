"""Appending to the hash-chained log: the group-commit writer for decisions, and
`append()` for records written inside a request's own transaction.

"No record, no allow": a decision's answer is sent only after its record is committed.
Each worker process hands its decisions' records to its own writer process
(`app/decisions/writer.py`): all the records produced in one turn of the event loop go as one
frame down a pipe, and the writer commits whatever frames have arrived in one transaction.
Durability thus costs one commit per batch rather than per decision, and the hashing, the
driver and the commit run on another core instead of taking the worker's GIL from requests.
Every writer, in any process or replica, extends the chain under a lock on the single
`chain_head` row, which makes `seq` a total order. Configuration changes use `append()`
inside the request's SQLAlchemy transaction instead; both extend the chain the same way
(`chain_rows`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from typing import Any

import orjson
from sqlalchemy import insert, update
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncSession

from app.decisions.chain import chain_rows
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
    rows, seq, prev = chain_rows(records, head.seq, head.hash)
    await session.execute(insert(_LOG), rows)
    await session.execute(update(_HEAD).where(_HEAD.c.id == 1).values(seq=seq, hash=prev))


def writer_config(database_url: str, *, max_batch: int, timeout: float,
                  sqlite_synchronous: str) -> dict[str, Any]:
    """The writer process's configuration (sent on its stdin, not its command line)."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        return {"sqlite": url.database or "toolgate.db", "synchronous": sqlite_synchronous,
                "max_batch": max_batch}
    dsn = url.set(drivername="postgresql").render_as_string(hide_password=False)
    return {"postgresql": dsn, "timeout": timeout, "max_batch": max_batch}


class DecisionLog:
    """One per worker process: `await write(records)` returns once they are committed.

    Records wait in `_pending` until the end of the current event-loop turn, then leave as
    one frame; `_inflight` maps each sent frame to its requests' futures and its deadline.
    If the writer process exits, every request in flight gets RecordingFailed (a 503) and
    the next write starts a new writer.
    """

    def __init__(self, database_url: str, *, max_batch: int = 512,
                 timeout: float = 5.0, sqlite_synchronous: str = "FULL") -> None:
        self._config = orjson.dumps(writer_config(
            database_url, max_batch=max_batch, timeout=timeout,
            sqlite_synchronous=sqlite_synchronous)) + b"\n"
        self._timeout = timeout
        self._process: asyncio.subprocess.Process | None = None
        self._acks: asyncio.Task | None = None
        self._starting: asyncio.Task | None = None
        self._closed = False
        self._pending: list[tuple[list[dict[str, Any]], asyncio.Future]] = []
        self._flush_scheduled = False
        self._inflight: dict[int, tuple[list[asyncio.Future], asyncio.TimerHandle, int]] = {}
        self._frame = 0
        self.batches = 0  # commits acknowledged by the current writer
        self.records = 0

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "app.decisions.writer",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        assert self._process.stdin is not None
        self._process.stdin.write(self._config)
        self._acks = asyncio.get_running_loop().create_task(
            self._read_acks(self._process), name="toolgate-decision-log-acks")

    def running(self) -> bool:
        return self._process is not None and self._process.returncode is None

    async def close(self) -> None:
        """Drain: everything written before close is committed before the writer stops."""
        self._closed = True
        self._flush()
        process, acks = self._process, self._acks
        if process is None or acks is None:
            return
        assert process.stdin is not None
        process.stdin.close()  # end of input: the writer commits what it has, then exits
        await acks
        await process.wait()

    async def write(self, records: list[dict[str, Any]]) -> None:
        if not self.running():
            await self._restart()
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append((records, future))
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)
        await future

    async def _restart(self) -> None:
        if self._closed:
            raise RecordingFailed("the decision log is closed")
        if self._starting is None:  # one restart for all the requests that notice
            self._starting = asyncio.get_running_loop().create_task(self.start())
        starting = self._starting
        try:
            await asyncio.shield(starting)
        except Exception as exc:
            raise RecordingFailed(f"the decision log writer cannot start: {exc}") from None
        finally:
            if self._starting is starting:
                self._starting = None

    def _flush(self) -> None:
        """At the end of a loop turn: everything pending goes to the writer as one frame."""
        self._flush_scheduled = False
        pending, self._pending = self._pending, []
        if not pending:
            return
        futures = [future for _, future in pending]
        process = self._process
        try:
            if process is None or process.stdin is None or process.returncode is not None:
                raise RecordingFailed("the decision log writer is not running")
            self._frame += 1
            records = [r for batch, _ in pending for r in batch]
            process.stdin.write(orjson.dumps([self._frame, records]) + b"\n")
        except Exception as exc:  # unserialisable record, closed pipe: not recorded
            self._fail(futures, exc)
            return
        timer = asyncio.get_running_loop().call_later(self._timeout, self._expire, self._frame)
        self._inflight[self._frame] = (futures, timer, len(records))

    def _expire(self, frame: int) -> None:
        entry = self._inflight.pop(frame, None)
        if entry is not None:
            self._fail(entry[0], RecordingFailed(
                f"the decision was not recorded within {self._timeout}s"))

    async def _read_acks(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdout is not None
        try:
            while line := await process.stdout.readline():
                frame, error, commits = orjson.loads(line)
                entry = self._inflight.pop(frame, None)
                if entry is None:
                    continue  # expired already
                futures, timer, count = entry
                timer.cancel()
                if error is None:
                    self.batches = commits
                    self.records += count
                    for future in futures:
                        if not future.done():
                            future.set_result(None)
                else:
                    self._fail(futures, RecordingFailed(error))
        finally:
            # The writer is gone (closed, crashed, killed): nothing in flight was recorded.
            code = await process.wait()
            if self._inflight:
                log.error("decision log writer exited (code %s) with %d batches unrecorded",
                          code, len(self._inflight))
            inflight, self._inflight = self._inflight, {}
            for futures, timer, _ in inflight.values():
                timer.cancel()
                self._fail(futures, RecordingFailed(f"the decision log writer exited ({code})"))

    @staticmethod
    def _fail(futures: list[asyncio.Future], error: BaseException) -> None:
        for future in futures:
            if not future.done():
                future.set_exception(error if isinstance(error, RecordingFailed)
                                     else RecordingFailed(str(error) or type(error).__name__))
