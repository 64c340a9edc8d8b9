"""The decision log's writer process: `python -m app.decisions.writer`, one per server worker.

Why a process: the group commit's own work (hashing the chain, binding ~20 columns a row,
the database driver) used to run in the worker, on a thread or as a task. Either way it
took the worker's GIL or event loop from the requests, and a request whose record waited
behind other requests' work waited longer still: durable logging cost half the throughput.
In its own process the writer runs on another core and the worker only serialises each
record once (orjson, ~2 µs) and reads one acknowledgement per batch.

Protocol, one JSON document per line (orjson never writes a raw newline):
  stdin   first line: the configuration (see `open_store`), never on the command line
          where `ps` would show a database password
          then frames: [frame_id, [record, ...]]   (the records of one or more requests;
          a record's created_at is ISO text or integer nanoseconds since the epoch)
  stdout  per frame, once its records are committed or have failed:
          [frame_id, null | "why it failed", commits_so_far]
End of stdin: whatever was read is committed and acknowledged, then the process exits. That
is also what happens when the worker dies: nothing it sent is lost, and nothing it did not
send was answered. SIGINT/SIGTERM are ignored so that a Ctrl-C to the process group lets the
worker drain first; the writer leaves when the worker closes the pipe.

Frames are committed whole and in order; consecutive frames share one transaction up to
`max_batch` records. The chain is extended under the `chain_head` row lock exactly as
`app.decisions.log.append` does it inside request transactions, so every process's records
form one chain. Imports are kept light (no SQLAlchemy): the process starts in ~50 ms.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sqlite3
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

from app.decisions.chain import chain_rows
from app.decisions.records import RECORD_FIELDS, iso_from_ns

log = logging.getLogger("toolgate.decisions.writer")

# The decision_log columns in table order (tests/store checks this against the table).
COLUMNS = ("seq", *RECORD_FIELDS, "prev_hash", "hash")
Frame = tuple[int, list[dict[str, Any]]]


def _now() -> datetime:
    return datetime.now(UTC)


# --- the stores: one transaction per group of frames ------------------------------------

_SQLITE_HEAD = "UPDATE chain_head SET updated_at = ? WHERE id = 1 RETURNING seq, hash"
_QUOTED = ", ".join(f'"{c}"' for c in COLUMNS)  # "check" is an SQL keyword
_SQLITE_INSERT = f"INSERT INTO decision_log ({_QUOTED}) VALUES ({', '.join('?' * len(COLUMNS))})"
_SQLITE_SET_HEAD = "UPDATE chain_head SET seq = ?, hash = ? WHERE id = 1"


def _sqlite_time(moment: datetime) -> str:
    # The text SQLAlchemy's SQLite DATETIME stores (naive UTC), so the ORM reads it back.
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


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
            rows, seq, prev = chain_rows(records, seq, prev)
            conn.executemany(_SQLITE_INSERT, [
                tuple(_sqlite_time(row[c]) if c == "created_at" else row[c] for c in COLUMNS)
                for row in rows
            ])
            conn.execute(_SQLITE_SET_HEAD, (seq, prev))
            conn.execute("COMMIT")
        except BaseException:
            self.close()  # rolls back; reconnect on the next batch
            raise

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


_PG_HEAD = "UPDATE chain_head SET updated_at = $1 WHERE id = 1 RETURNING seq, hash"
_PG_SET_HEAD = "UPDATE chain_head SET seq = $1, hash = $2 WHERE id = 1"


class PostgresStore:
    def __init__(self, dsn: str, timeout: float) -> None:
        self._dsn, self._timeout = dsn, timeout
        self._conn: Any = None

    async def commit(self, records: list[dict[str, Any]]) -> None:
        import asyncpg

        if self._conn is None:
            self._conn = await asyncpg.connect(self._dsn, timeout=self._timeout)
        conn = self._conn
        try:
            async with conn.transaction():
                seq, prev = await conn.fetchrow(_PG_HEAD, _now())
                rows, seq, prev = chain_rows(records, seq, prev)
                await conn.copy_records_to_table(
                    "decision_log", columns=COLUMNS,
                    records=[tuple(row[c] for c in COLUMNS) for row in rows])
                await conn.execute(_PG_SET_HEAD, seq, prev)
        except BaseException:
            conn.terminate()
            self._conn = None  # reconnect on the next batch
            raise


def open_store(config: dict[str, Any]) -> SQLiteStore | PostgresStore:
    """config (the first line on stdin): {"sqlite": path, "synchronous": "FULL"|"NORMAL"}
    or {"postgresql": dsn, "timeout": seconds}; plus "max_batch"."""
    if "sqlite" in config:
        return SQLiteStore(config["sqlite"], config["synchronous"])
    return PostgresStore(config["postgresql"], float(config["timeout"]))


# --- the loop: read what has arrived, commit it, acknowledge it ---------------------------

def groups(frames: list[Frame], max_batch: int) -> list[list[Frame]]:
    """Consecutive frames, each group up to max_batch records (a frame is never split)."""
    out: list[list[Frame]] = []
    size = max_batch
    for frame in frames:
        if size + len(frame[1]) > max_batch and out and out[-1]:
            out.append([])
            size = 0
        elif not out:
            out.append([])
            size = 0
        out[-1].append(frame)
        size += len(frame[1])
    return out


class Writer:
    def __init__(self, store: SQLiteStore | PostgresStore, max_batch: int, out: Any) -> None:
        self.store, self.max_batch, self.out = store, max_batch, out
        self.commits = 0

    async def handle(self, frames: list[Frame]) -> None:
        for _, records in frames:
            for record in records:  # the hot path's integer timestamps, as hashed and kept
                if type(record["created_at"]) is int:
                    record["created_at"] = iso_from_ns(record["created_at"])
        for group in groups(frames, self.max_batch):
            error: str | None = None
            try:
                await self.store.commit([r for _, records in group for r in records])
                self.commits += 1
            except Exception as exc:  # whatever the cause, these decisions are not recorded
                error = str(exc) or type(exc).__name__
                log.error("decision log write failed (%d frames): %s", len(group), error)
            self.out(b"".join(orjson.dumps([frame_id, error, self.commits]) + b"\n"
                              for frame_id, _ in group))


async def serve(stdin: int = 0, stdout: int = 1) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 30)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                 os.fdopen(stdin, "rb", buffering=0))

    def out(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(stdout, view):]

    config = orjson.loads(await reader.readline())
    writer = Writer(open_store(config), int(config["max_batch"]), out)
    pending = b""
    while True:
        chunk = await reader.read(1 << 22)  # everything that has arrived, up to 4 MiB
        if chunk:
            pending += chunk
            lines = pending.split(b"\n")
            pending = lines.pop()
        else:
            lines = [pending] if pending else []  # end of input: a last complete frame?
        frames: list[Frame] = []
        for line in lines:
            try:
                frame_id, records = orjson.loads(line)
            except (orjson.JSONDecodeError, ValueError, TypeError):
                log.error("decision log writer: unreadable frame dropped (%d bytes)", len(line))
                continue
            frames.append((frame_id, records))
        if frames:
            try:
                await writer.handle(frames)
            except BrokenPipeError:
                pass  # the worker is gone; what it sent is committed all the same
        if not chunk:
            return


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(levelname)s:     %(name)s: %(message)s")
    asyncio.run(serve())


if __name__ == "__main__":
    main()
