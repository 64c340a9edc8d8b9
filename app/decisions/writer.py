"""The decision log's writer process: `python -m app.decisions.writer`. A worker on its own
starts one as its child (stdin/stdout); `toolgate serve --workers N` starts one for all its
workers (`--listen SOCKET`, one connection per worker, same protocol).

Why a process: the group commit's own work (hashing the chain, binding ~20 columns a row,
the database driver) used to run in the worker, on a thread or as a task. Either way it
took the worker's GIL or event loop from the requests, and a request whose record waited
behind other requests' work waited longer still: durable logging cost half the throughput.
In its own process the writer runs on another core and the worker only serialises each
record (orjson: its detail as canonical text, then the frame; ~4 µs) and reads one
acknowledgement per batch.

Protocol, one JSON document per line (orjson never writes a raw newline):
  stdin   first line: the configuration (see `open_store`), never on the command line
          where `ps` would show a database password
          then frames: [frame_id, [record, ...]]   (the records of one or more requests;
          a record's created_at is ISO text or integer nanoseconds since the epoch)
  stdout  per frame, once its records are committed or have failed:
          [frame_id, null | "why it failed", commits_so_far]
With --listen, stdin carries only the configuration, and frames and acknowledgements travel
over each worker's connection to the socket.
End of stdin: whatever was read is committed and acknowledged, then the process exits. That
is also what happens when the worker dies: nothing it sent is lost, and nothing it did not
send was answered. SIGINT/SIGTERM are ignored so that a Ctrl-C to the process group lets the
worker drain first; the writer leaves when the worker closes the pipe.

Frames are committed whole and in order; consecutive frames share one transaction up to
`max_batch` records. On SQLite the chain is extended under the `chain_head` row lock
exactly as `app.decisions.log.append` does it inside request transactions; on Postgres in
one statement that moves the head only from where this writer last left it (see
PostgresStore). Either way every process's records form one chain. Imports are kept light
(no SQLAlchemy): the process starts in ~50 ms.
"""

from __future__ import annotations

import asyncio
import logging
import operator
import os
import signal
import sqlite3
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from app.decisions.chain import COLUMNS, Unhashable, chain_values
from app.decisions.records import PG_EPOCH, iso_from_ns, pg_micros

log = logging.getLogger("toolgate.decisions.writer")

Frame = tuple[int, list[dict[str, Any]]]


def _now() -> datetime:
    return datetime.now(UTC)


def _pg_now() -> int:
    return (_now() - PG_EPOCH) // timedelta(microseconds=1)


def _one(value: int) -> tuple[int]:
    return (value,)


# --- the stores: one transaction per group of frames ------------------------------------

_SQLITE_HEAD = "UPDATE chain_head SET updated_at = ? WHERE id = 1 RETURNING seq, hash"
_QUOTED = ", ".join(f'"{c}"' for c in COLUMNS)  # "check" is an SQL keyword
_SQLITE_INSERT = f"INSERT INTO decision_log ({_QUOTED}) VALUES ({', '.join('?' * len(COLUMNS))})"
_SQLITE_SET_HEAD = "UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1"


def _sqlite_time(moment: datetime) -> str:
    # The text SQLAlchemy's SQLite DATETIME stores (naive UTC), so the ORM reads it back.
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _sqlite_text(iso: str) -> str:
    """The same text from a record's "YYYY-MM-DDTHH:MM:SS.ffffffZ" (what iso() writes)."""
    return f"{iso[:10]} {iso[11:26]}" if len(iso) == 27 and iso[-1] == "Z" else \
        _sqlite_time(datetime.fromisoformat(iso.replace("Z", "+00:00")))


class SQLiteStore:
    def __init__(self, path: str, synchronous: str) -> None:
        self._path, self._synchronous = path, synchronous
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self._path, timeout=30, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA busy_timeout=30000")
        return conn

    async def commit(self, records: list[dict[str, Any]]) -> None:
        conn = self._conn = self._conn or self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            seq, prev = conn.execute(_SQLITE_HEAD, (_sqlite_time(_now()),)).fetchone()
            rows, seq, prev = chain_values(records, seq, prev, time=_sqlite_text)
            conn.executemany(_SQLITE_INSERT, rows)
            conn.execute(_SQLITE_SET_HEAD, (seq, prev))
            conn.execute("COMMIT")
        except BaseException:
            self.close()  # rolls back; reconnect on the next batch
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    stop = close  # when the writer stops


_PG_LOCK_HEAD = "SELECT seq, hash FROM chain_head WHERE id = 1 FOR UPDATE"

# One statement, one round trip: move the chain head from where this writer last saw it
# ($4, $5) to the batch's last record ($1, $2), and insert the batch's rows ($6) only if
# the head was still there. In autocommit it is one transaction: the head and the rows move
# together or not at all.
#
# The rows travel as one array of the table's own row type, which asyncpg encodes in binary
# and Postgres reads with record_recv: no text to parse. Sent as one JSON document read by
# json_to_recordset they cost Postgres 20 µs more per row (35 against 13, measured on 64-row
# batches into the table without its indexes: docs/performance.md), more than the indexes;
# as 21 separate typed arrays, asyncpg's encoder cost the writer more than the rest of its
# work. COLUMNS is the table's column order (tests/store checks it), which is the row type's.
_PG_APPEND = (
    "WITH moved AS (UPDATE chain_head SET seq = $1, hash = $2, updated_at = $3 "
    "WHERE id = 1 AND seq = $4 AND hash = $5 RETURNING 1) "
    f"INSERT INTO decision_log ({_QUOTED}) SELECT r.* FROM moved, "
    "unnest($6::decision_log[]) AS r")


# The log grows by ~20 MB a second under load, and this connection's backend writes most
# of it out of shared_buffers itself. Postgres leaves a backend's writes in the OS page
# cache by default (backend_flush_after = 0) until a checkpoint fsyncs them all at once;
# that fsync held the commits behind it for up to 100 ms (a p99 of 50-70 ms over the
# 5 s around each checkpoint). Asking the kernel to write them out every 256 kB halved the
# longest checkpoint fsync and those p99s (docs/performance.md). A session setting: it
# changes nothing for any other connection.
_PG_SESSION = {"backend_flush_after": "256kB"}

# Each 16 MB WAL segment is created by the backend that first needs it, and by default
# Postgres fills it with zeros and fsyncs it first (wal_init_zero), holding the WAL write
# lock, so every commit waits: 50-90 ms, once a second at the log's rates, on a server that
# has no used segments to recycle (a new one, or after a quiet spell). Over 45 s on a new
# cluster that was a p99 of 48-57 ms against 11-17 ms with this connection's zero-filling
# off (docs/performance.md). This backend writes most of the server's WAL under load, so
# it creates most segments: it skips the zeros for its own, unless the server's
# configuration names wal_init_zero (the operator's choice stands) or the role may not set
# it (a superuser may; another role after GRANT SET ON PARAMETER wal_init_zero). Without
# the zeros the file system allocates a segment's blocks as WAL is written into it (a
# commit's fdatasync may then write that metadata too); every commit is still fsynced.
_PG_WAL_ZEROS = "SELECT setting, source FROM pg_settings WHERE name = 'wal_init_zero'"


async def _no_wal_zeros(conn: Any) -> bool:
    """Whether the WAL segments this connection creates skip the zeros: SET wal_init_zero
    = off where that is ours to choose."""
    import asyncpg

    setting = await conn.fetchrow(_PG_WAL_ZEROS)
    if setting is None:  # Postgres before 12: always zero-filled
        return False
    if setting["source"] != "default":  # configured: the operator's choice stands
        return setting["setting"] == "off"
    try:
        await conn.execute("SET wal_init_zero = off")
    except asyncpg.InsufficientPrivilegeError:
        return False
    return True


# The created_at BRIN index summarises a range of 128 heap pages once it is full. Postgres
# can queue that for autovacuum (autosummarize), but its queue holds 256 requests, served
# when autovacuum next visits the database (every autovacuum_naptime, a minute by default):
# at the log's sustained rates (a range fills every ~0.1 s) it overflows (at once with
# autovacuum off), and every request it drops is a LOG line in the server's log with the
# whole INSERT statement (7-11 a second under load, measured). So the writer summarises
# the new ranges itself, this often, on a connection of its own beside the commits
# (migration 0007 turned autosummarize off). Time-range queries read the unsummarised
# newest ranges in full: at most this many seconds of records.
SUMMARISE_SECONDS = 10.0
_PG_SUMMARISE = "SELECT brin_summarize_new_values('ix_decision_log_created_at'::regclass)"
# A summary waits for no one: autovacuum (or a second server's writer) holding the table's
# maintenance lock makes it give up until the next turn, never queue behind it. Well under
# deadlock_timeout (1 s by default), after which a waiter cancels an autovacuum of the table.
_PG_SUMMARY_SESSION = {"lock_timeout": "100ms"}


class Summariser:
    """Every `seconds`, on its own connection, summarises the BRIN ranges filled since the
    last time. It never touches a commit: a passing failure (the database away, the lock
    taken) is logged and tried again at the next turn; one that cannot pass (a schema
    without the BRIN index, a role that does not own it) is logged once and the summaries
    stop (brin_summarize_new_values needs the role to own the index). Started by the
    Postgres store with its first connection; `close` ends it, for good."""

    def __init__(self, dsn: str, timeout: float, seconds: float) -> None:
        self._dsn, self._timeout, self._seconds = dsn, timeout, seconds
        self._task: asyncio.Task | None = None
        self._closed = False
        self.summarised = 0  # ranges summarised so far
        self.turns = 0

    def start(self) -> None:
        if self._task is None and not self._closed:
            self._task = asyncio.get_running_loop().create_task(
                self._run(), name="toolgate-decision-log-brin")

    async def _run(self) -> None:
        import asyncpg

        lasting = (asyncpg.InsufficientPrivilegeError, asyncpg.WrongObjectTypeError,
                   asyncpg.UndefinedTableError, asyncpg.UndefinedObjectError)
        conn = None
        try:
            while True:
                await asyncio.sleep(self._seconds)
                try:
                    if conn is None or conn.is_closed():
                        conn = await asyncpg.connect(self._dsn, timeout=self._timeout,
                                                     server_settings=_PG_SUMMARY_SESSION)
                    self.summarised += await conn.fetchval(_PG_SUMMARISE)
                    self.turns += 1
                except lasting as exc:
                    log.warning("decision log: the created_at index cannot be summarised "
                                "(%s); time-range queries read its unsummarised ranges in "
                                "full until the writer restarts", exc)
                    return
                except Exception as exc:  # tried again at the next turn
                    log.warning("decision log: summarising the created_at index failed: %s",
                                exc)
                    if conn is not None and not isinstance(exc, asyncpg.PostgresError):
                        conn.terminate()  # not the server's answer: a new connection
                        conn = None
        finally:
            if conn is not None:
                conn.terminate()

    def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            self._task = None


class PostgresStore:
    """Extends the chain optimistically: the writer remembers the head it last wrote and
    sends each batch chained onto it in one statement (see _PG_APPEND), instead of the five
    round trips of lock, read, COPY, update, commit. The statement waits for the row lock
    like any other chain writer (app.decisions.log.append), then checks the head it finds,
    so the chain stays one chain.

    When another process moved the head meanwhile, nothing is written, and the batch goes
    the locking way: in a transaction, lock and read the head, chain onto it, and run the
    same statement, which then cannot miss. So a batch is tried at most twice, and a writer
    that keeps losing the race to another (two replicas' writers) is never starved; the
    first batch after a (re)connection goes that way too, the head being unknown."""

    def __init__(self, dsn: str, timeout: float) -> None:
        self._dsn, self._timeout = dsn, timeout
        self._conn: Any = None
        self._head: tuple[int, str] | None = None
        self.rechained = 0  # batches chained again because the head had moved
        self._told_zeros = False
        self.summariser = Summariser(dsn, timeout, SUMMARISE_SECONDS)

    async def commit(self, records: list[dict[str, Any]]) -> None:
        if not records:
            return
        try:
            conn = self._conn or await self._connect()
            if self._head is not None:
                if await self._extend(conn, records, self._head):
                    return
                self.rechained += 1  # another process extended the chain since our last batch
            async with conn.transaction():
                head = tuple(await conn.fetchrow(_PG_LOCK_HEAD))
                if not await self._extend(conn, records, head):  # type: ignore[arg-type]
                    raise RuntimeError("the chain head moved although it was locked")
        except Unhashable:
            raise  # a record refused while hashing, before anything was sent: no harm done
        except BaseException:
            self.close()  # reconnect, and read the head, on the next batch
            raise

    async def _connect(self) -> Any:
        import asyncpg

        conn = await asyncpg.connect(self._dsn, timeout=self._timeout,
                                     server_settings=_PG_SESSION)
        try:
            # Times as Postgres keeps them, integer microseconds since 2000: the rows'
            # created_at comes from its ISO text by pg_micros, with no datetime in between.
            await conn.set_type_codec("timestamptz", schema="pg_catalog", format="tuple",
                                      encoder=_one, decoder=operator.itemgetter(0))
            if not await _no_wal_zeros(conn) and not self._told_zeros:
                self._told_zeros = True
                log.info("decision log: new WAL segments this writer's backend creates are "
                         "zero-filled first (wal_init_zero), which stalls commits; see "
                         "docs/deployment.md")
        except BaseException:
            conn.terminate()
            raise
        self._conn, self._head = conn, None
        self.summariser.start()
        return conn

    async def _extend(self, conn: Any, records: list[dict[str, Any]],
                      head: tuple[int, str]) -> bool:
        """Chain `records` onto `head` and write them if the head is still there."""
        rows, seq, prev = chain_values(records, *head, time=pg_micros)
        status = await conn.execute(_PG_APPEND, seq, prev, _pg_now(), *head, rows)
        if status != f"INSERT 0 {len(rows)}":
            self._head = None
            return False
        self._head = (seq, prev)
        return True

    def close(self) -> None:
        """After a failed batch (the next one reconnects), and when the writer stops."""
        if self._conn is not None:
            self._conn.terminate()
        self._conn, self._head = None, None

    def stop(self) -> None:
        self.close()
        self.summariser.close()


def open_store(config: dict[str, Any]) -> SQLiteStore | PostgresStore:
    """config (the first line on stdin): {"sqlite": path, "synchronous": "FULL"|"NORMAL"}
    or {"postgresql": dsn, "timeout": seconds}; plus "max_batch"."""
    if "sqlite" in config:
        return SQLiteStore(config["sqlite"], config["synchronous"])
    return PostgresStore(config["postgresql"], float(config["timeout"]))


# --- the loop: read what has arrived, commit it, acknowledge it ---------------------------

# What the writer answers for a frame: (frame_id, None or why it failed, commits so far).
Answer = tuple[int, str | None, int]


class Source:
    """Where frames come from and their acknowledgements go: the stdin/stdout pipes, or
    one worker's socket connection. `idle` is set when every frame it sent is answered."""

    def __init__(self, send: Callable[[bytes], object]) -> None:
        self._send = send
        self.outstanding = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def took(self, count: int) -> None:
        self.outstanding += count
        if count:
            self.idle.clear()

    def ack(self, answers: list[Answer]) -> None:
        """Answer frames: one write for all of a commit's frames from this source."""
        self.outstanding -= len(answers)
        if not self.outstanding:
            self.idle.set()
        self._deliver(answers)

    def _deliver(self, answers: list[Answer]) -> None:
        self._send(b"".join(orjson.dumps(answer) + b"\n" for answer in answers))


class Callback(Source):
    """Frames from the process the writer runs in (InProcess): answers are calls."""

    def __init__(self, answer: Callable[[int, str | None, int], object]) -> None:
        super().__init__(lambda _: None)
        self._answer = answer

    def _deliver(self, answers: list[Answer]) -> None:
        for answer in answers:
            self._answer(*answer)


Item = tuple[Frame, Source]


def groups(items: list[Item], max_batch: int) -> list[list[Item]]:
    """Consecutive frames, each group up to max_batch records (a frame is never split)."""
    out: list[list[Item]] = []
    size = 0
    for item in items:
        count = len(item[0][1])
        if not out or size + count > max_batch:  # a frame of no records opens a group too
            out.append([])
            size = 0
        out[-1].append(item)
        size += count
    return out


class Writer:
    """Frames from any number of sources (the stdin pipe, or one socket connection per
    worker) go into one queue; each turn commits everything queued, in groups of up to
    max_batch records, and acknowledges every frame to the source it came from."""

    def __init__(self, store: SQLiteStore | PostgresStore, max_batch: int) -> None:
        self.store, self.max_batch = store, max_batch
        self.commits = 0
        self.records = 0
        self.frames = 0
        self._queue: list[Item] = []
        self._arrived = asyncio.Event()
        self._sources = 0
        self._accepting = True  # False once no new source can come

    def open(self, reader: asyncio.StreamReader, source: Source) -> asyncio.Task:
        """Start queueing the frames of one source, until its end of input. (Counted at
        once, so that run() cannot finish between now and the task's first step.)"""
        self.attach()
        return asyncio.get_running_loop().create_task(self._read(reader, source))

    def attach(self) -> None:
        """One more source: run() goes on until it has detached."""
        self._sources += 1

    def detach(self) -> None:
        self._sources -= 1
        self._arrived.set()

    async def _read(self, reader: asyncio.StreamReader, source: Source) -> None:
        pending = b""
        try:
            while chunk := await reader.read(1 << 22):  # what has arrived, up to 4 MiB
                pending += chunk
                lines = pending.split(b"\n")
                pending = lines.pop()
                self.take(_frames(lines), source)
            self.take(_frames([pending] if pending else []), source)
        finally:
            self.detach()

    def take(self, frames: list[Frame], source: Source) -> None:
        source.took(len(frames))
        self._queue.extend((frame, source) for frame in frames)
        self._arrived.set()

    def stop_accepting(self) -> None:
        self._accepting = False
        self._arrived.set()

    async def run(self) -> None:
        """Until every source has ended and everything it sent is committed."""
        while True:
            items, self._queue = self._queue, []
            if items:
                await self.commit(items)
            elif not self._sources and not self._accepting:
                log.info("decision log writer: %d records in %d frames, %d commits",
                         self.records, self.frames, self.commits)
                return
            else:
                await self._arrived.wait()
                self._arrived.clear()

    async def commit(self, items: list[Item]) -> None:
        for group in groups(items, self.max_batch):
            error: str | None = None
            try:
                records = [r for (_, frame), _ in group for r in frame]
                for record in records:  # the hot path's integer timestamps, as hashed
                    if type(record["created_at"]) is int:
                        record["created_at"] = iso_from_ns(record["created_at"])
                await self.store.commit(records)
                self.commits += 1
            except Unhashable as exc:  # a record orjson cannot serialise
                error = f"{CANNOT_BE_WRITTEN}: {exc}"
            except Exception as exc:  # whatever the cause, these decisions are not recorded
                error = str(exc) or type(exc).__name__
                log.error("decision log write failed (%d frames): %s", len(group), error)
            else:
                self.records += sum(len(records) for (_, records), _ in group)
                self.frames += len(group)
            answers: dict[Source, list[Answer]] = {}
            for (frame_id, _), source in group:
                answers.setdefault(source, []).append((frame_id, error, self.commits))
            for source, answered in answers.items():
                try:
                    source.ack(answered)
                except OSError:
                    pass  # that worker is gone; what it sent is committed all the same


# How the answer for a frame holding a record orjson cannot write (an integer past 64 bits)
# begins. A worker that sends frames through a pipe finds such records itself, serialising
# them; to InProcess they come as they are, and DecisionLog sends the frame's other
# records again.
CANNOT_BE_WRITTEN = "the record cannot be written"


class InProcess:
    """The writer's loop on the caller's own event loop: `send` frames, and each frame's
    answer comes as a call to `answer(frame_id, error, commits)`. What a worker with the
    log on Postgres and no shared writer uses with decision_log_writer=inline (DecisionLog).

    The writer runs as a process to keep its work off the worker's core, but then each
    frame crosses two more wake-ups and is serialised and parsed once more. With Postgres,
    whose backend is already the other process, one worker with its writer inline spent 56
    µs of CPU in all per decision against 75 with the writer process on the Intel VM, and
    answered 15 % more requests; on the AMD VM the writer process, a little below its
    worker's priority, answers 10-14 % more (docs/performance.md). SQLite's commit would
    stall the event loop for its fsync: there the process stays."""

    def __init__(self, config: dict[str, Any],
                 answer: Callable[[int, str | None, int], object]) -> None:
        self.writer = Writer(open_store(config), int(config["max_batch"]))
        self._source = Callback(answer)
        self.writer.attach()
        self.running = asyncio.get_running_loop().create_task(
            self.writer.run(), name="toolgate-decision-log-writer")
        # However the loop ends (close(), or a bug that DecisionLog reports and replaces
        # this writer for), its connections and summaries end with it.
        self.running.add_done_callback(lambda _: self.writer.store.stop())

    def send(self, frame_id: int, records: list[dict[str, Any]]) -> None:
        self.writer.take([(frame_id, records)], self._source)

    async def close(self) -> None:
        """Everything sent is committed (or has failed) and answered, then the database
        connection is closed."""
        self.writer.detach()
        self.writer.stop_accepting()
        try:
            await asyncio.shield(self.running)
        finally:
            self.writer.store.stop()


def _frames(lines: list[bytes]) -> list[Frame]:
    frames = []
    for line in lines:
        try:
            frame_id, records = orjson.loads(line)
        except (orjson.JSONDecodeError, ValueError, TypeError):
            log.error("decision log writer: unreadable frame dropped (%d bytes)", len(line))
            continue
        frames.append((frame_id, records))
    return frames


def _blocking_out(fd: int) -> Callable[[bytes], None]:
    def out(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return out


def _lower_priority(steps: int) -> None:
    """Run `steps` nice levels below the process that started this writer (never above:
    raising a priority needs privileges, lowering it does not)."""
    if steps > 0:
        try:
            os.nice(steps)
        except OSError as exc:  # the writer works the same, only at its parent's priority
            log.warning("decision log writer: priority not lowered: %s", exc)


async def serve(listen: str | None = None, stdin: int = 0, stdout: int = 1) -> None:
    """Private mode (no `listen`): frames on stdin, acknowledgements on stdout. Shared mode:
    stdin carries only the configuration, and each worker connects to the Unix socket
    `listen`; the end of stdin (the server is shutting down) stops new connections, and
    the writer leaves once every connection has ended and been committed."""
    loop = asyncio.get_running_loop()
    control = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(control),
                                 os.fdopen(stdin, "rb", buffering=0))
    config = orjson.loads(await control.readline())
    _lower_priority(int(config.get("nice", 0)))
    writer = Writer(open_store(config), int(config["max_batch"]))
    try:
        await _serve(writer, control, listen, stdout)
    finally:
        writer.store.stop()


async def _serve(writer: Writer, control: asyncio.StreamReader, listen: str | None,
                 stdout: int) -> None:
    loop = asyncio.get_running_loop()
    if listen is None:
        reading = writer.open(control, Source(_blocking_out(stdout)))
        writer.stop_accepting()
        await writer.run()
        await reading
        return

    connections: set[asyncio.Task] = set()

    async def connected(reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        source = Source(out.write)
        try:
            await writer.open(reader, source)
        except OSError as exc:  # the worker went away mid-frame: commit what came whole
            log.warning("decision log writer: a worker's connection broke: %s", exc)
        try:
            await source.idle.wait()  # its last frames answered, then hang up
        finally:
            out.close()

    def accept(reader: asyncio.StreamReader, out: asyncio.StreamWriter) -> None:
        task = loop.create_task(connected(reader, out))
        connections.add(task)
        task.add_done_callback(connections.discard)

    server = await asyncio.start_unix_server(accept, listen, limit=1 << 30)
    os.chmod(listen, 0o600)
    running = loop.create_task(writer.run())
    await control.read()  # until the server closes our stdin
    server.close()
    writer.stop_accepting()
    await running


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s:     %(name)s: %(message)s")
    listen = sys.argv[sys.argv.index("--listen") + 1] if "--listen" in sys.argv else None
    try:  # uvloop, as uvicorn uses (uvicorn[standard]): less CPU per frame read and acked
        import uvloop
    except ImportError:
        asyncio.run(serve(listen))
    else:
        uvloop.run(serve(listen))


if __name__ == "__main__":
    main()
