"""Appending to the hash-chained log: the group-commit writer for decisions, and
`append()` for records written inside a request's own transaction.

"No record, no allow": a decision's answer is sent only after its record is committed.
Each worker process hands its decisions' records to its own writer process
(`app/log/writer/`): the records produced in one turn of the event loop go as one
frame down a pipe (several, of FRAME_REQUESTS requests each, in a busy turn), and the
writer commits whatever frames have arrived in one transaction. How a writer process is
configured, and the shared one started, is app/log/writer/start.py.
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
from collections.abc import Callable
from functools import partial
from typing import Any

import orjson
from sqlalchemy import insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.log.chain import canonical_details, chain_rows
from app.log.tables import ChainHead, LogRecord
from app.log.writer.loop import CANNOT_BE_WRITTEN, InProcess
from app.log.writer.start import writer_config
from app.store.base import utcnow

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


# A frame leaves at the end of the loop turn, or as soon as this many requests wait in it:
# the writer then starts committing while the worker is still deciding the turn's other
# requests, instead of both taking turns. Measured on SQLite at 64 connections (1 worker,
# alternating runs): +9.7 % at 32 (+5 % at 16, +3 % at 8, +1.6 % at 48) against one frame
# per turn; no change on Postgres, whose writer reads frames while its commit is in flight.
FRAME_REQUESTS = 32

# How many full batches of records may wait for the writer's answer (DecisionLog._limit):
# 32,768 records (~32 MB) at the default max_batch.
WAITING_BATCHES = 64


class DecisionLog:
    """One per worker process: `await write(records)` returns once they are committed.

    Records wait in `_pending` until the end of the current event-loop turn (or until
    FRAME_REQUESTS requests wait), then leave as one frame; `_inflight` maps each sent
    frame to its requests' futures and its deadline.
    The writer is this worker's own child process, or, given `socket` (several workers
    under `toolgate serve`), the server's shared writer; if that cannot be reached, a
    child of its own. If the writer goes away, every request in flight gets
    RecordingFailed (a 503) and the next write connects or starts a writer again.
    """

    def __init__(self, database_url: str, *, max_batch: int = 512, timeout: float = 5.0,
                 sqlite_synchronous: str = "FULL", socket: str | None = None,
                 writer: str = "auto", nice: int = 0, db_timeout: float | None = None,
                 checkpoint: dict[str, Any] | None = None) -> None:
        # checkpoint: signed checkpoints of the head, by this worker's own writer (the
        # shared writer of `--workers N` is told by `toolgate serve`): writer/start.py.
        config = writer_config(database_url, max_batch=max_batch, timeout=timeout,
                               sqlite_synchronous=sqlite_synchronous, db_timeout=db_timeout,
                               checkpoint=checkpoint)
        # A writer process of this worker's own runs `nice` steps below it: it has the
        # spare CPU (a third of a core at the worker's full rate), and at the same priority
        # its wake-up at every frame took the worker's core mid-request (docs/performance.md).
        # Not one started because the shared writer of `--workers N` was unreachable: with
        # the other workers busy beside it, a lowered writer falls behind (the shared
        # writer's case, measured).
        self._config = orjson.dumps({**config, "nice": 0 if socket else nice}) + b"\n"
        # inline, Postgres, no shared writer: the writer's loop runs in this worker (InProcess).
        self._inline = config if (writer == "inline" and socket is None
                                  and "postgresql" in config) else None
        self._local: InProcess | None = None
        self._timeout = timeout
        self._socket = socket
        self._out: asyncio.StreamWriter | None = None  # frames go here
        self._process: asyncio.subprocess.Process | None = None  # a private writer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._connected = False
        self._acks: asyncio.Task | None = None
        self._starting: asyncio.Task | None = None
        self._closed = False
        self._pending: list[tuple[list[dict[str, Any]], Done]] = []
        self._flush_scheduled = False
        # frame -> (its requests' waiters, its timeout, its record count, and for an inline
        # frame its requests)
        self._inflight: dict[int, tuple[list[Done], asyncio.TimerHandle, int,
                                        list[tuple[list[dict[str, Any]], Done]] | None]] = {}
        self._frame = 0
        # Records sent and not yet answered by the writer (an expired frame's included:
        # `_expired` keeps their counts); past `_limit` new decisions get 503 at once.
        self._unanswered = 0
        self._expired: dict[int, int] = {}
        self._limit = WAITING_BATCHES * max_batch
        self.batches = 0  # commits acknowledged by the current writer
        self.records = 0
        # Called (call_soon) with an acknowledgement's number right after the requests it
        # released: their continuations are queued just before it, so it runs after all of
        # them and before anything queued later (the hot route writes their answers there).
        self.after_ack: Callable[[int], object] | None = None
        self._acks_seen = 0
        # Told of every request's records as they are handed over (the metrics' tally,
        # app/kit/metrics.py): every way of serving authorize passes here. None: off.
        self.on_records: Callable[[list[dict[str, Any]]], object] | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._inline is not None:
            self._local = InProcess(self._inline, self._answer)
            self._local.running.add_done_callback(self._local_ended)
            self._connected = True
            return
        acks: asyncio.StreamReader | None = None
        self._process = None
        if self._socket is not None:
            try:
                acks, self._out = await asyncio.open_unix_connection(self._socket,
                                                                     limit=1 << 30)
            except OSError as exc:
                log.warning("shared decision log writer unreachable (%s); this worker "
                            "starts its own", exc)
        if acks is None:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "app.log.writer",
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
            assert self._process.stdin is not None and self._process.stdout is not None
            acks, self._out = self._process.stdout, self._process.stdin
            self._out.write(self._config)
        self._connected = True
        self._acks = self._loop.create_task(
            self._read_acks(acks, self._process), name="toolgate-decision-log-acks")

    def queued(self) -> int:
        """Records handed over and not yet answered by the writer (the metrics' gauge)."""
        return self._unanswered + sum(len(records) for records, _ in self._pending)

    def running(self) -> bool:
        return self._connected

    async def close(self) -> None:
        """Drain: everything written before close is committed before the writer stops."""
        self._closed = True
        self._flush()
        if self._local is not None:
            local, self._local = self._local, None
            await local.close()
            self._connected = False
            return
        out, acks = self._out, self._acks
        if out is None or acks is None:
            return
        if not out.is_closing():
            # End of input: the writer commits and acknowledges what it has, then hangs up
            # (a private writer exits).
            out.write_eof()
        await acks

    async def write(self, records: list[dict[str, Any]]) -> int | None:
        """Returns once the records are committed: the number of the acknowledgement that
        released them when an `after_ack` hook will run for it, else None."""
        if not self.running():
            await self._restart()
        assert self._loop is not None  # set by start(), which _restart() ran if needed
        future: asyncio.Future = self._loop.create_future()
        self._enqueue(records, partial(_settle, future))
        return await future

    def submit(self, records: list[dict[str, Any]], done: Done) -> bool:
        """write() without a coroutine, for the HTTP protocol's hot route: `done(number,
        None)` is called once the records are committed (number as write() returns it),
        `done(None, RecordingFailed)` if they are not. Called from the acknowledgement
        reader itself, before the after_ack hook runs, so `done` must not block or raise.
        False (and `done` is never called) when no writer is running: write() starts one."""
        if not self._connected:
            return False
        self._enqueue(records, done)
        return True

    def _enqueue(self, records: list[dict[str, Any]], done: Done) -> None:
        self._pending.append((records, done))
        if self.on_records is not None:
            self.on_records(records)
        if len(self._pending) >= FRAME_REQUESTS:
            self._send()  # the end-of-turn flush, if scheduled, sends what comes after
        elif not self._flush_scheduled:
            self._flush_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self._flush)

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
        self._send()

    def _send(self) -> None:
        """Everything pending goes to the writer now, as one frame."""
        pending, self._pending = self._pending, []
        if not pending:
            return
        if self._local is not None:
            self._send_inline(self._local, pending)
            return
        out = self._out
        try:
            if out is None or not self._connected or out.is_closing():
                raise RecordingFailed("the decision log writer is not running")
            pending, records = self._within_limit(pending)
            if not pending:
                return
            try:
                frame = orjson.dumps([self._frame + 1, canonical_details(records)])
            except orjson.JSONEncodeError:
                # One request's record cannot be written: it alone fails, not its neighbours.
                pending = self._serialisable(pending)
                if not pending:
                    return
                records = [r for batch, _ in pending for r in batch]
                frame = orjson.dumps([self._frame + 1, records])
            out.write(frame + b"\n")
        except Exception as exc:  # closed pipe: not recorded
            self._fail([done for _, done in pending], exc)
            return
        self._sent(pending, len(records), None)

    def _send_inline(self, local: InProcess, pending: list[tuple[list[dict[str, Any]], Done]]
                     ) -> None:
        """The frame goes to the writer's loop in this process as it is: no serialising.
        The requests are kept with it, for the rare frame refused as CANNOT_BE_WRITTEN."""
        pending, records = self._within_limit(pending)
        if not pending:
            return
        local.send(self._frame + 1, records)
        self._sent(pending, len(records), pending)

    def _sent(self, pending: list[tuple[list[dict[str, Any]], Done]], count: int,
              kept: list[tuple[list[dict[str, Any]], Done]] | None) -> None:
        """Frame number self._frame + 1 has gone to the writer: wait for its answer, at
        most the log's timeout."""
        self._frame += 1
        self._unanswered += count
        assert self._loop is not None
        timer = self._loop.call_later(self._timeout, self._expire, self._frame)
        self._inflight[self._frame] = ([done for _, done in pending], timer, count, kept)

    def _serialisable(self, pending: list[tuple[list[dict[str, Any]], Done]]
                      ) -> list[tuple[list[dict[str, Any]], Done]]:
        kept = []
        for records, done in pending:
            try:
                orjson.dumps(canonical_details(records))
            except orjson.JSONEncodeError as exc:
                self._fail([done], RecordingFailed(f"the record cannot be written: {exc}"))
            else:
                kept.append((records, done))
        return kept

    def _within_limit(self, pending: list[tuple[list[dict[str, Any]], Done]]
                      ) -> tuple[list[tuple[list[dict[str, Any]], Done]], list[dict[str, Any]]]:
        """The requests whose records still fit under the limit, in order (the others fail),
        and their records. Records the writer has not answered wait in memory (this
        worker's, and the writer process's): while the database hangs, neither committing
        nor refusing, they would pile up at ~1 kB a decision (25 MB a second under load)
        behind the stalled commit."""
        records = [r for batch, _ in pending for r in batch]
        room = self._limit - self._unanswered
        if len(records) <= room:
            return pending, records
        behind = RecordingFailed(
            f"the decision log is behind: {self._unanswered} records wait for the database")
        kept = []
        for batch, done in pending:
            if len(batch) <= room:
                kept.append((batch, done))
                room -= len(batch)
            else:
                self._fail([done], behind)
        return kept, [r for batch, _ in kept for r in batch]

    def _expire(self, frame: int) -> None:
        entry = self._inflight.pop(frame, None)
        if entry is not None:
            self._expired[frame] = entry[2]  # its records still wait for the writer
            self._fail(entry[0], RecordingFailed(
                f"the decision was not recorded within {self._timeout}s"))

    def _answer(self, frame: int, error: str | None, commits: int) -> None:
        """The writer's answer for one frame: release its requests, or fail them."""
        entry = self._inflight.pop(frame, None)
        if entry is None:
            self._unanswered -= self._expired.pop(frame, 0)
            return  # expired already
        waiters, timer, count, pending = entry
        timer.cancel()
        self._unanswered -= count
        if error is None:
            self.batches = commits
            self.records += count
            self._acks_seen += 1
            hook, number = self.after_ack, self._acks_seen
            _call(waiters, number if hook is not None else None, None)
            if hook is not None:
                asyncio.get_running_loop().call_soon(hook, number)
        elif pending is not None and error.startswith(CANNOT_BE_WRITTEN) and len(pending) > 1:
            # One request's record could not be hashed: it alone fails, not its neighbours.
            kept = self._serialisable(pending)
            if len(kept) < len(pending):
                self._pending[:0] = kept
                self._send()
            else:  # none of them is the one: sent again, they would fail again
                self._fail(waiters, RecordingFailed(error))
        else:
            self._fail(waiters, RecordingFailed(error))

    def _local_ended(self, running: asyncio.Task) -> None:
        """The inline writer's loop stopped: at close(), or (a bug) by an exception."""
        if running.cancelled() or running.exception() is None:
            return
        log.error("decision log writer: %r", running.exception())
        self._connected = False
        self._local = None
        self._fail_all(self._take_inflight(), "the decision log writer stopped")

    def _take_inflight(self) -> dict[int, Any]:
        """What the writer that is gone held: none of it will be answered."""
        inflight, self._inflight = self._inflight, {}
        self._unanswered, self._expired = 0, {}
        return inflight

    def _fail_all(self, inflight: dict[int, Any], why: str) -> None:
        if inflight:
            log.error("%s with %d batches unrecorded", why, len(inflight))
        for waiters, timer, _, _ in inflight.values():
            timer.cancel()
            self._fail(waiters, RecordingFailed(why))

    async def _read_acks(self, acks: asyncio.StreamReader,
                         process: asyncio.subprocess.Process | None) -> None:
        try:
            while line := await acks.readline():
                self._answer(*orjson.loads(line))
        except (OSError, ValueError, TypeError) as exc:  # a broken connection, a garbled line
            log.error("decision log writer: %s", exc)
        finally:
            # The writer is gone (closed, crashed, killed): nothing in flight was recorded.
            self._connected = False
            if self._out is not None:
                self._out.close()
            # Its frames are taken before awaiting its exit: a request meanwhile starts a new
            # writer, and the frames sent to that one are not this writer's to fail.
            inflight = self._take_inflight()
            self._fail_all(inflight, "the decision log writer exited "
                           f"({await process.wait()})" if process is not None else
                           "the connection to the shared decision log writer was lost")

    @staticmethod
    def _fail(waiters: list[Done], error: BaseException) -> None:
        _call(waiters, None, error if isinstance(error, RecordingFailed)
              else RecordingFailed(str(error) or type(error).__name__))


# What waits for a request's records: called with (acknowledgement number or None, None)
# once they are committed, or (None, RecordingFailed) when they are not.
Done = Callable[[int | None, RecordingFailed | None], object]


def _settle(future: asyncio.Future, number: int | None, error: RecordingFailed | None) -> None:
    """write()'s Done: the awaiting request resumes with the number or the error."""
    if not future.done():
        if error is None:
            future.set_result(number)
        else:
            future.set_exception(error)


def _call(waiters: list[Done], number: int | None, error: RecordingFailed | None) -> None:
    for done in waiters:
        try:
            done(number, error)
        except Exception:  # one request's answer must not keep the others' from them
            log.exception("answering a recorded decision failed")
