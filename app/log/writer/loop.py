"""The writer's loop: read what has arrived, commit it, acknowledge it. The process's
entry point (`main`, run by `python -m app.log.writer`), its private and shared
modes (`serve`), and the same loop on the caller's event loop (`InProcess`)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable
from time import perf_counter
from typing import Any

import orjson

from app.kit.metrics import log_commit
from app.log.chain import Unhashable
from app.log.records import iso_from_ns
from app.log.writer.postgres import PostgresStore
from app.log.writer.sqlite import SQLiteStore

log = logging.getLogger("toolgate.decisions.writer")

Frame = tuple[int, list[dict[str, Any]]]


def open_store(config: dict[str, Any]) -> SQLiteStore | PostgresStore:
    """config (the first line on stdin): {"sqlite": path, "synchronous": "FULL"|"NORMAL"}
    or {"postgresql": dsn, "timeout": seconds}; plus "max_batch", and "db_timeout" (seconds:
    the bound of each statement, SQLite's busy timeout)."""
    db_timeout = config.get("db_timeout")
    if "sqlite" in config:
        return SQLiteStore(config["sqlite"], config["synchronous"],
                           30.0 if db_timeout is None else float(db_timeout))
    return PostgresStore(config["postgresql"], float(config["timeout"]),
                         None if db_timeout is None else float(db_timeout))


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

    def __init__(self, store: SQLiteStore | PostgresStore, max_batch: int,
                 checkpoints: Checkpoints | None = None) -> None:
        self.store, self.max_batch = store, max_batch
        self.checkpoints = checkpoints
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
        if self.checkpoints is not None:
            self.checkpoints.wake(self._arrived)
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
            if self.checkpoints is not None:
                # One timer per interval wakes the loop when nothing arrives (no timeout
                # per wait: that would cost every frame a task and a timer).
                if self.checkpoints.wait() <= 0:
                    await self.checkpoints.take(self.store)
                self.checkpoints.wake(self._arrived)

    async def commit(self, items: list[Item]) -> None:
        for group in groups(items, self.max_batch):
            error: str | None = None
            try:
                records = [r for (_, frame), _ in group for r in frame]
                for record in records:  # the hot path's integer timestamps, as hashed
                    if type(record["created_at"]) is int:
                        record["created_at"] = iso_from_ns(record["created_at"])
                started = perf_counter()
                await self.store.commit(records)
                self.commits += 1
                timed = (perf_counter() - started, len(records))
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
            if error is None:  # the metrics, once the workers have their answers
                log_commit(*timed)


class Checkpoints:
    """Every `seconds`, between two commits (never beside one: they share the store's
    connection), a signed checkpoint of the chain head if the log grew (SPEC §16): one
    signature per interval, nothing per decision. Whether one is due is decided under the
    head's lock from the latest stored checkpoint, so writers sharing a database (several
    replicas) make one sequence between them."""

    def __init__(self, signer: Any, seconds: float) -> None:
        self.signer, self.seconds = signer, seconds
        self._next = perf_counter() + seconds
        self._timer: asyncio.TimerHandle | None = None
        self.taken = 0
        self.stopped: str | None = None  # why signing stopped (checkpoints.Forged)

    @classmethod
    def from_config(cls, config: dict[str, Any] | None) -> Checkpoints | None:
        if not config:
            return None
        from app.log.checkpoints import load_signer

        return cls(load_signer(config["signing_key"]), float(config["seconds"]))

    def wait(self) -> float:
        return max(0.0, self._next - perf_counter())

    def wake(self, event: asyncio.Event) -> None:
        """Set `event` when the next checkpoint is due, unless a timer already will. (The
        loop may run a timer a little early: then the next one is set for what is left.)"""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.wait(), self._rang,
                                                                event)

    def _rang(self, event: asyncio.Event) -> None:
        self._timer = None
        event.set()

    async def take(self, store: SQLiteStore | PostgresStore) -> None:
        from app.log.checkpoints import Forged

        self._next = perf_counter() + self.seconds
        if self.stopped is not None:
            return  # until a restart (which checks again): decisions go on, unsigned
        try:
            if await store.checkpoint(self.signer, self.seconds) is not None:
                self.taken += 1
        except Forged as forged:
            self.stopped = str(forged)
            log.error("decision log checkpoints: signing stopped: %s; GET /readyz answers "
                      "degraded and the page's audit view says so", forged)
        except Exception as exc:  # the next interval tries again; decisions never wait
            log.warning("decision log checkpoint failed: %s", exc)


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
        self.writer = Writer(open_store(config), int(config["max_batch"]),
                             Checkpoints.from_config(config.get("checkpoint")))
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
    writer = Writer(open_store(config), int(config["max_batch"]),
                    Checkpoints.from_config(config.get("checkpoint")))
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


def configure_logging() -> None:
    """The writer's own lines in the server's format: it inherits the server's environment,
    so TOOLGATE_LOG_FORMAT=json makes them JSON lines like every other (SPEC §13)."""
    if os.environ.get("TOOLGATE_LOG_FORMAT", "").strip().lower() == "json":
        from app.edge.logs import configure
        configure("json", "info")
        return
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s:     %(name)s: %(message)s")


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    configure_logging()
    listen = sys.argv[sys.argv.index("--listen") + 1] if "--listen" in sys.argv else None
    try:  # uvloop, as uvicorn uses (uvicorn[standard]): less CPU per frame read and acked
        import uvloop
    except ImportError:
        asyncio.run(serve(listen))
    else:
        uvloop.run(serve(listen))
