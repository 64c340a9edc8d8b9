"""The writer's Postgres store: one transaction per group of frames, each batch chained
optimistically onto the head this writer last wrote, in one statement."""

from __future__ import annotations

import logging
import operator
from datetime import timedelta
from typing import Any

from app.log.chain import QUOTED_COLUMNS, Unhashable, chain_values
from app.log.checkpoints import LAST_HELD
from app.log.records import PG_EPOCH, pg_micros
from app.log.writer.common import _CHECKPOINT_COLUMNS, _now, checkpoint_due
from app.log.writer.summariser import SUMMARISE_SECONDS, Summariser

log = logging.getLogger("toolgate.decisions.writer")


def _pg_now() -> int:
    return (_now() - PG_EPOCH) // timedelta(microseconds=1)


def _one(value: int) -> tuple[int]:
    return (value,)


_PG_LOCK_HEAD = "SELECT seq, hash FROM chain_head WHERE id = 1 FOR UPDATE"
_PG_CHECKPOINT = (f"INSERT INTO log_checkpoints ({', '.join(_CHECKPOINT_COLUMNS)}) "
                  f"VALUES ({', '.join(f'${i + 1}' for i in range(len(_CHECKPOINT_COLUMNS)))})")

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
    f"INSERT INTO decision_log ({QUOTED_COLUMNS}) SELECT r.* FROM moved, "
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


class PostgresStore:
    """Extends the chain optimistically: the writer remembers the head it last wrote and
    sends each batch chained onto it in one statement (see _PG_APPEND), instead of the five
    round trips of lock, read, COPY, update, commit. The statement waits for the row lock
    like any other chain writer (app.log.decision_log.append), then checks the head it finds,
    so the chain stays one chain.

    When another process moved the head meanwhile, nothing is written, and the batch goes
    the locking way: in a transaction, lock and read the head, chain onto it, and run the
    same statement, which then cannot miss. So a batch is tried at most twice, and a writer
    that keeps losing the race to another (two replicas' writers) is never starved; the
    first batch after a (re)connection goes that way too, the head being unknown."""

    def __init__(self, dsn: str, timeout: float, statement_timeout: float | None = None
                 ) -> None:
        self._dsn, self._timeout = dsn, timeout
        # Each statement's bound (TOOLGATE_DB_TIMEOUT_SECONDS): the server cancels it then,
        # and the writer stops waiting a second later if the server answers nothing (a
        # frozen or vanished server would otherwise hold every later batch for good). A
        # batch that ran out fails like any other: its requests get 503, and the next
        # batch reconnects and reads the head (the timed-out one may have been committed).
        self._session = dict(_PG_SESSION)
        self._command_timeout = None
        if statement_timeout is not None:
            self._session["statement_timeout"] = str(max(1, round(statement_timeout * 1000)))
            self._command_timeout = statement_timeout + 1.0
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
                                     command_timeout=self._command_timeout,
                                     server_settings=self._session)
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

    async def checkpoint(self, signer: Any, interval: float) -> int | None:
        """A signed checkpoint of the head, chained as the next record, if one is due
        (common.checkpoint_due), under the head's row lock like any chain writer; the seq
        it signed, or None."""
        try:
            conn = self._conn or await self._connect()
            async with conn.transaction():
                head = tuple(await conn.fetchrow(_PG_LOCK_HEAD))
                last = await conn.fetchrow(LAST_HELD)
                moment = _now()
                made = checkpoint_due(signer, interval, head[0], head[1], moment, last and (
                    last[0], PG_EPOCH + timedelta(microseconds=last[1])), last)
                if made is None:
                    return None
                record, row = made
                if not await self._extend(conn, [record], head):  # type: ignore[arg-type]
                    raise RuntimeError("the chain head moved although it was locked")
                await conn.execute(_PG_CHECKPOINT, *(
                    pg_micros(row[c]) if c == "time" else row[c] for c in _CHECKPOINT_COLUMNS))
            return head[0]
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """After a failed batch (the next one reconnects), and when the writer stops."""
        if self._conn is not None:
            self._conn.terminate()
        self._conn, self._head = None, None

    def stop(self) -> None:
        self.close()
        self.summariser.close()
